#!/usr/bin/env python3
"""What the jail costs a start: the agent's command started jailed against started plainly.

Each figure starts the same command many times through trysquare's own process
runner (``trysquare._process.run_process``), once plainly and once in the jail
(bubblewrap: its namespaces, the mount view, the limits), and prints the ratio of
the mean start-to-end times, with the baseline measured in the same run:

    jail.startup.python: 1.6x (python -c pass plainly 18.0 ms, jailed 29.1 ms, 40 starts)
    jail.startup.true: 9.8x (true plainly 1.1 ms, jailed 10.8 ms, 40 starts)

The first is what a suite pays per command (an interpreter starting); the second
is the jail's own cost in absolute terms. Validators themselves never pay it: only
the suite, ``prepare`` and the hidden tests run in the jail.

Usage: python benchmarks/bench_jail.py [--quick] [--starts N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from trysquare import jail
from trysquare._process import run_process
from trysquare.sandbox import Sandbox


def timed(argv: list[str], folder: str, starts: int, *, jailed: bool) -> float:
    """The median seconds one start of ``argv`` takes."""
    policy = jail.JailPolicy() if jailed else None
    sandbox = Sandbox([folder]) if jailed else None
    times = []
    for _ in range(starts):
        started = time.perf_counter()
        done = run_process(argv, cwd=folder, timeout=60, sandbox=sandbox, jail=policy)
        times.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise SystemExit(f"{argv} failed: {done.stderr.decode(errors='replace')}")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--starts", type=int)
    args = parser.parse_args()
    starts = args.starts or (10 if args.quick else 40)
    found = jail.availability()
    if not found.available:
        print(f"jail.startup: skipped (no jail here: {found.reason})")
        return
    with tempfile.TemporaryDirectory(prefix="bench-jail-") as folder:
        for name, argv in (("python", [sys.executable, "-c", "pass"]), ("true", ["true"])):
            timed(argv, folder, 2, jailed=True)  # warm the probe and the page cache
            plain = timed(argv, folder, starts, jailed=False)
            jailed = timed(argv, folder, starts, jailed=True)
            shown = Path(argv[0]).name + (" -c pass" if name == "python" else "")
            print(
                f"jail.startup.{name}: {jailed / plain:.2f}x ({shown} plainly "
                f"{plain * 1000:.1f} ms, jailed {jailed * 1000:.1f} ms, {starts} starts)"
            )


if __name__ == "__main__":
    main()

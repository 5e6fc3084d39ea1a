#!/usr/bin/env python3
"""Many validators on one run: time and peak memory of ``validate`` must grow linearly.

A scenario of N script validators (each a one-line ``sh`` script declaring its own
metric) on one real git run; ``validate`` at N and at 2N (then 4N). Prints:

    validators.linear: 2.05x time, 1.10x peak memory from 2500 to 5000 validators (...)

Linear is 2x time at twice the validators, and memory that grows by no more than the
results it holds (a quadratic runner doubles the time twice and quadruples what it holds).

Usage: python benchmarks/bench_validators.py [--quick] [--count N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _matrix import MEASURE
from trysquare.testing import RunBuilder


def build(root: Path, count: int) -> tuple[Path, Path]:
    scenario_dir = root / "scenario"
    scenario_dir.mkdir(parents=True)
    tables = []
    for index in range(count):
        script = scenario_dir / f"v{index}.sh"
        script.write_text(f"#!/bin/sh\necho '{json.dumps({'metrics': {f'm{index}': True}})}'\n")
        script.chmod(0o755)
        tables.append(
            f'[[validation]]\nname = "v{index}"\nmode = "script"\ncommand = "v{index}.sh"\n'
            f'metrics = ["m{index}"]\n'
        )
    scenario = scenario_dir / "scenario.toml"
    scenario.write_text("\n".join(tables))
    run = RunBuilder(root / "exp" / "runs" / "r1")
    run.base({"a.py": "a = 1\n"})
    run.repo.write("a.py", "a = 2\n")
    run.finish(response="done\n")
    return scenario, root / "exp"


def validate(scenario: Path, experiment: Path) -> tuple[float, float]:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            MEASURE,
            "validate",
            str(scenario),
            str(experiment),
            "--no-progress",
            "--jobs",
            "2",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    line = [x for x in done.stderr.splitlines() if x.startswith("MEASURE ")]
    if not line:
        raise SystemExit(f"validate failed: {done.stderr.strip()[-500:]}")
    _, took, peak = line[-1].split()
    return float(took), float(peak)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--count", type=int)
    args = parser.parse_args()
    count = args.count or (500 if args.quick else 2500)
    figures = {}
    for n in (count, 2 * count):
        with tempfile.TemporaryDirectory() as temp:
            os.environ["XDG_CACHE_HOME"] = str(Path(temp) / "cache")
            scenario, experiment = build(Path(temp), n)
            figures[n] = validate(scenario, experiment)
    (t1, m1), (t2, m2) = figures[count], figures[2 * count]
    print(
        f"validators.linear: {t2 / t1:.2f}x time, {m2 / m1:.2f}x peak memory from {count} to "
        f"{2 * count} validators on one run (linear: 2x time; {t1:.1f} s / {m1:.0f} MB, "
        f"{t2:.1f} s / {m2:.0f} MB)"
    )


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The gap between one validator's exit and the next one's start, told by the kernel.

``validate --replay --force --jobs 1`` over N runs of a cold assay validator (``warm =
false``) is recorded with ``perf record -e sched:sched_process_exit,sched:sched_process_exec
-a``; each validator's exit is paired with the next validator's exec, and the gaps' median
and 90th percentile are printed. The figure is the time trysquare's worker spends between
two children, the part of a run's wall time that is trysquare's on the critical path at one
job (the validator itself runs on the other core's spare time or not at all). It needs
``perf`` and the right to trace every CPU (root, or ``perf_event_paranoid`` <= -1).

    gap.cold.jobs1: median 0.91 ms, p90 1.40 ms (199 gaps, 3 rounds; load average 1.02)

``--against PYTHON``: the same, interleaved round by round, with another interpreter's
trysquare (an earlier checkout's ``.venv/bin/python``), marked ``(against)``. The validator
is the same file for both: it runs with this interpreter's ``trysquare.assay``.

Usage: python benchmarks/bench_gap.py [--runs N] [--rounds N] [--against PYTHON] [--jobs N]
       [--quick]  (40 runs, one round: what ``benchmarks/run --quick`` asks)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _matrix import cold_matrix
from bench_validate import ASSAY


def gaps(python: str, scenario: Path, experiment: Path, script: Path, jobs: int) -> list[float]:
    """The gaps, in seconds, of one validate: each validator exit to the next validator exec."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as temp:
        recorded = Path(temp) / "perf.data"
        subprocess.run(
            [
                "perf", "record", "-q", "-a", "-o", str(recorded),
                "-e", "sched:sched_process_exit", "-e", "sched:sched_process_exec",
                "--", python, "-m", "trysquare", "validate", str(scenario), str(experiment),
                "--replay", "--force", "--no-progress", "--jobs", str(jobs),
            ],
            check=True, stdout=subprocess.DEVNULL, env=env,
        )  # fmt: skip
        listing = subprocess.run(
            ["perf", "script", "-i", str(recorded), "-F", "tid,time,event,trace"],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
    started: dict[int, float] = {}  # validator pid -> its exec
    ended: dict[int, float] = {}  # validator pid -> its exit
    wanted = f"filename={script}"
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        tid, at = int(fields[0]), float(fields[1].rstrip(":"))
        if "sched_process_exec" in fields[2] and wanted in fields:
            started[tid] = at
        elif "sched_process_exit" in fields[2] and tid in started:
            ended.setdefault(tid, at)  # its main thread exits last of those traced: the first
    # Per slot (--jobs), each exec is paired with the latest exit before it not yet paired:
    # with one job that is simply the previous validator's.
    execs = sorted(started.values())
    exits = sorted(ended[pid] for pid in started if pid in ended)
    measured = []
    unpaired: list[float] = []
    pending = iter(exits)
    upcoming = next(pending, None)
    for at in execs:
        while upcoming is not None and upcoming < at:
            unpaired.append(upcoming)
            upcoming = next(pending, None)
        if unpaired:
            measured.append(at - unpaired.pop(0))
    return measured


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--against", help="another interpreter whose trysquare runs beside")
    parser.add_argument("--quick", action="store_true", help="40 runs, 1 round")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.rounds = 40, 1
    pythons = {"": sys.executable}
    if args.against:
        pythons[" (against)"] = args.against
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        cold, experiment, script = cold_matrix(root, args.runs, ASSAY)
        for python in pythons.values():  # contexts archived, bytecode written: not measured
            subprocess.run(
                [python, "-m", "trysquare", "validate", str(cold), str(experiment), "--no-progress"],
                check=True, stdout=subprocess.DEVNULL,
            )  # fmt: skip
        found: dict[str, list[float]] = {mark: [] for mark in pythons}
        for _ in range(args.rounds):
            for mark, python in pythons.items():
                found[mark] += gaps(python, cold, experiment, script, args.jobs)
        load = Path("/proc/loadavg").read_text().split()[0]
        for mark, measured in found.items():
            deciles = statistics.quantiles(measured, n=10)
            print(
                f"gap.cold.jobs{args.jobs}{mark}: median {statistics.median(measured) * 1e3:.2f} ms, "
                f"p90 {deciles[-1] * 1e3:.2f} ms ({len(measured)} gaps, {args.rounds} rounds; "
                f"load average {load})"
            )


if __name__ == "__main__":
    main()

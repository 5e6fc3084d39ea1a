#!/usr/bin/env python3
"""The start of ``trysquare validate`` and ``report`` on one run, against ``python -c pass``.

One real git run and one ``sh`` script validator; the context is built and archived by a
first, untimed ``validate``. Then, in interleaved rounds (so that a busy machine weighs on
every command alike), each command is started as a user would start it, in a process of
its own: ``python -c pass`` (the interpreter's own start, the baseline), ``trysquare
validate --replay --force`` (the validator runs again) and ``trysquare report``. Bytecode
is written and warm, as after any install. Prints, for each, the median wall time, the
median CPU time (user + system, children included: steadier than the wall on a shared
machine) and the ratio of the wall against the baseline. Goal: <= 0.15 s and <= 8x.

    start.validate: 0.121 s wall (6.9x python -c pass), 0.102 s CPU (9 rounds)

Usage: python benchmarks/bench_start.py [--rounds N] [--against PYTHON] [--quick]
(``--against``: the same commands, interleaved, with another interpreter's trysquare, e.g.
an earlier checkout's ``.venv/bin/python``; its lines are marked ``(against)``.)
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _matrix import build_matrix

VALIDATOR = '#!/bin/sh\necho \'{"metrics": {"changed": true}}\'\n'
GOAL_SECONDS = 0.15
GOAL_RATIO = 8.0


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one command, run to its end (its output thrown away)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(
            f"{' '.join(command[:3])} exited {done.returncode}: {done.stderr.strip()[-500:]}"
        )
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="5 rounds")
    parser.add_argument("--against", help="another interpreter whose trysquare runs beside")
    args = parser.parse_args()
    if args.quick:
        args.rounds = min(args.rounds, 5)
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed trysquare has its bytecode
    with tempfile.TemporaryDirectory() as temp:
        env["XDG_CACHE_HOME"] = str(Path(temp) / "cache")
        scenario, experiment = build_matrix(Path(temp), 1, "changed.sh", VALIDATOR)
        pythons = {"": sys.executable}
        if args.against:
            pythons[" (against)"] = args.against
        commands: dict[str, list[str]] = {"python -c pass": [sys.executable, "-c", "pass"]}
        for mark, python in pythons.items():
            trysquare = [python, "-m", "trysquare"]
            commands[f"validate{mark}"] = [
                *trysquare, "validate", str(scenario), str(experiment),
                "--replay", "--force", "--no-progress",
            ]  # fmt: skip
            commands[f"report{mark}"] = [*trysquare, "report", str(scenario), str(experiment)]
            timed([*trysquare, "validate", str(scenario), str(experiment), "--no-progress"], env)
        for command in commands.values():
            timed(command, env)  # bytecode written, files in the page cache
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, command in commands.items():
                wall, cpu = timed(command, env)
                walls[name].append(wall)
                cpus[name].append(cpu)
    baseline = statistics.median(walls["python -c pass"])
    print(
        f"start.python: {baseline:.3f} s wall, {statistics.median(cpus['python -c pass']):.3f} s "
        f"CPU ({args.rounds} rounds; python -c pass, the baseline)"
    )
    for name in commands:
        if name == "python -c pass":
            continue
        wall = statistics.median(walls[name])
        print(
            f"start.{name}: {wall:.3f} s wall ({wall / baseline:.1f}x python -c pass), "
            f"{statistics.median(cpus[name]):.3f} s CPU ({args.rounds} rounds; "
            f"goal <= {GOAL_SECONDS} s, <= {GOAL_RATIO:g}x)"
        )


if __name__ == "__main__":
    main()

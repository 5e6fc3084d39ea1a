#!/usr/bin/env python3
"""Where trysquare's own CPU goes in a cold re-validation, thread by thread, against a loop.

At ``--jobs 2`` on two cores the validators keep both cores busy, so every millisecond of
CPU trysquare spends itself is wall time the shell loop does not pay: this is the profile
behind ``validate.assay.cold.jobs2`` (``bench_validate.py``). The same assay validator
(``warm = false``) runs over the same archived contexts of N runs, ``validate --replay
--force`` at ``--jobs 1`` and ``2``, rounds interleaved with a serial and an ``xargs -P2``
loop; the medians of each figure are printed:

    cpu_split.cold.jobs2: trysquare 2.8 ms CPU a run of its own (main 1.0: 0.3 before the
    tasks, 0.6 beside them, 0.1 after; task workers 0.7, planning 0.5, task builder 0.3,
    threads that start a child confined 0.2); validators 14.6 ms a run, the loop's 14.3 ...

The split is read inside the measured process: each thread's CPU time as it ends
(``threading.Thread.run`` wrapped), the main thread's at three moments, the process's own
total at the end (other threads: what no named thread took, the bare threads that start a
confined child among it), and the children's. The loops' CPU counts the shell's or
``xargs``'s own too (a little, in trysquare's favour). Timing overhead: a few microseconds a
thread.

Usage: python benchmarks/bench_cpu_split.py [--runs N] [--rounds N] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _matrix import cold_matrix
from bench_validate import ASSAY

# The measured command, in a process of its own: its figures on stderr as `SPLIT <json>`.
SPLIT = """
import json, resource, sys, threading, time
from collections import Counter

threads = Counter()
run = threading.Thread.run

def counted(self):
    try:
        run(self)
    finally:
        threads[self.name.rstrip("0123456789-")] += time.thread_time()

threading.Thread.run = counted
from trysquare import runner

moments = {}
execute = runner._Execution.run

def noted(self):
    moments["before"] = time.thread_time()
    try:
        return execute(self)
    finally:
        moments["beside"] = time.thread_time() - moments["before"]

runner._Execution.run = noted
from trysquare._console import main  # the console script's own start (collector paused)

sys.argv[0] = "trysquare"
code = main()
main_thread = time.thread_time()
own = resource.getrusage(resource.RUSAGE_SELF)
children = resource.getrusage(resource.RUSAGE_CHILDREN)
print("SPLIT", json.dumps({
    "code": code,
    "own": own.ru_utime + own.ru_stime,
    "children": children.ru_utime + children.ru_stime,
    "main": main_thread,
    "before": moments["before"],
    "beside": moments["beside"],
    "threads": dict(threads),
}), file=sys.stderr)
"""

# Thread names as validate gives them, and how they are said.
NAMES = {
    "trysquare-task": "task workers",
    "trysquare-planning": "planning",
    "trysquare-task-builder": "task builder",
}


def measured(scenario: Path, experiment: Path, jobs: int) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    argv = ["validate", str(scenario), str(experiment), "--replay", "--force", "--no-progress"]
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", SPLIT, *argv, "--jobs", str(jobs)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    lines = [line for line in done.stderr.splitlines() if line.startswith("SPLIT ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"validate --jobs {jobs} failed: {done.stderr.strip()[-500:]}")
    split = json.loads(lines[-1][len("SPLIT ") :])
    named = {NAMES.get(name, name): seconds for name, seconds in split["threads"].items()}
    return {
        "wall": wall,
        "own": split["own"],
        "children": split["children"],
        "main": split["main"],
        "before": split["before"],
        "beside": split["beside"],
        "after": split["main"] - split["before"] - split["beside"],
        **named,
    }


def loop(experiment: Path, script: Path, jobs: int) -> dict[str, float]:
    listing = experiment / "contexts.txt"
    if not listing.exists():
        contexts = sorted(experiment.glob("runs/*/validation/script/context.json"))
        listing.write_text("".join(f"{c}\n" for c in contexts))
    command = (
        f'while read -r c; do "{script}" "$c" > /dev/null; done < "{listing}"'
        if jobs == 1
        else f'xargs -P{jobs} -n1 "{script}" < "{listing}" > /dev/null'
    )
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(["sh", "-c", command], check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return {"wall": wall, "children": cpu}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int)
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    count = args.runs or (40 if args.quick else 200)
    rounds = args.rounds or (2 if args.quick else 3)
    with tempfile.TemporaryDirectory() as temp:
        os.environ["XDG_CACHE_HOME"] = str(Path(temp) / "cache")
        cold, experiment, script = cold_matrix(Path(temp), count, ASSAY)
        measured(cold, experiment, 1)  # contexts built and archived, bytecode written
        taken: dict[str, list[dict[str, float]]] = {}
        for _ in range(rounds):
            for jobs in (1, 2):
                taken.setdefault(f"trysquare{jobs}", []).append(measured(cold, experiment, jobs))
                taken.setdefault(f"loop{jobs}", []).append(loop(experiment, script, jobs))
        for jobs, said in ((1, "serial loop"), (2, f"xargs -P{2} loop")):
            ours = _medians(taken[f"trysquare{jobs}"])
            theirs = _medians(taken[f"loop{jobs}"])
            print(_line(jobs, said, ours, theirs, count))


def _medians(rows: list[dict[str, float]]) -> dict[str, float]:
    keys = {key for row in rows for key in row}
    return {key: statistics.median(row.get(key, 0.0) for row in rows) for key in keys}


def _line(
    jobs: int, said: str, ours: dict[str, float], theirs: dict[str, float], count: int
) -> str:
    def ms(seconds: float) -> str:
        return f"{seconds / count * 1000:.2f}"

    threads = ", ".join(f"{name} {ms(ours[name])}" for name in NAMES.values() if name in ours)
    # Every thread not named above, the bare ones that start a child confined among them.
    others = ours["own"] - ours["main"] - sum(ours.get(name, 0.0) for name in NAMES.values())
    line = (
        f"cpu_split.cold.jobs{jobs}: trysquare {ms(ours['own'])} ms CPU a run of its own "
        f"(main {ms(ours['main'])}: {ms(ours['before'])} before the tasks, "
        f"{ms(ours['beside'])} beside them, {ms(ours['after'])} after; {threads}, "
        f"other threads {ms(others)}, the bare ones that start a child confined among them); "
        f"validators "
        f"{ms(ours['children'])} ms a run, the {said}'s {ms(theirs['children'])}; wall "
        f"{ours['wall'] / theirs['wall']:.2f}x the {said} ({ours['wall']:.2f} s against "
        f"{theirs['wall']:.2f} s over {count} runs)"
    )
    if jobs > 1:
        # Both cores busy: CPU of anyone's is wall time shared out over the cores.
        extra = ours["own"] + ours["children"] - theirs["children"]
        line += (
            f"; its CPU beyond the loop's, {ms(extra)} ms a run over {jobs} cores, is "
            f"{extra / jobs / theirs['wall']:.2f}x of the loop's wall"
        )
    return line


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""How close a cold re-validation can come to a shell loop at all: runners that do less.

``bench_validate.py`` sets trysquare's cold replay (``warm = false``) against a shell loop.
This sets the same loop against three runners that do only part of trysquare's work, each a
small Python program of its own started like trysquare, over the same archived contexts of the
same assay validator, with the same number of workers (threads pulling runs from a queue):

- ``plain``: starts the validator with trysquare's ``run_process`` (its output read through
  pipes, its exit told by a pidfd, a scratch folder as its working directory), parses the
  JSON it printed and writes a result file atomically (``os.replace``);
- ``confined``: the same, the validator confined as trysquare confines it (its own Landlock
  domain allowing writes to its scratch folder and archive folder only, ``Sandbox``);
- ``guarded``: the same again, with the clone's stat picture taken before the validator and
  taken again after it knowing the first, as trysquare does, and compared
  (``clone_guard.stat_picture``), and the result signed (``_signing.mac``).

and trysquare itself (``validate --replay --force``). Rounds are interleaved; the medians are
printed, the loop's wall time first, then each runner's ratio to it:

    floor.cold.jobs1: serial loop 3.36 s over 200 runs; plain 1.10x, confined 1.14x,
    guarded 1.16x, trysquare 1.16x (CPU: loop 3.3 s; plain 1.07x, ...; median of 5 rounds)

What the figures say: the ratio of ``confined`` is what no runner that confines each
validator in its own domain goes below on this machine, whatever else it leaves out;
``guarded`` adds the least a runner must do for a result to be trusted; trysquare's distance
from ``guarded`` is everything else it does (planning, the in-flight markers, the result
ledger, its start: imports and loading the runs).

Usage: python benchmarks/bench_floor.py [--runs N] [--rounds N] [--jobs 1,2] [--quick]
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

from _matrix import cold_matrix
from bench_validate import ASSAY

# One runner, in a process of its own: argv is its kind, its number of workers, the validator,
# a file listing the contexts, and the folder its results go to (outside the experiment).
RUNNER = r"""
import json, os, queue, sys, tempfile, threading, time

kind, jobs, script, listing, results = sys.argv[1:6]
from trysquare._process import run_process
if kind != "plain":
    from trysquare.sandbox import Sandbox
if kind == "guarded":
    from trysquare import _signing
    from trysquare.clone_guard import stat_picture

runs = queue.SimpleQueue()
for number, context in enumerate(open(listing).read().split()):
    runs.put((number, context))
for _ in range(int(jobs)):
    runs.put(None)
environment = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}


def worker():
    while (taken := runs.get()) is not None:
        number, context = taken
        archive = os.path.dirname(context)
        scratch = tempfile.mkdtemp(prefix="floor-")
        sandbox = None if kind == "plain" else Sandbox([scratch, archive])
        if kind == "guarded":
            clone = os.path.join(archive, os.pardir, os.pardir, "repo")
            pictured_at = time.time_ns()
            before = stat_picture(clone)
        done = run_process(
            [script, context], cwd=scratch, timeout=None,
            env={**environment, "TMPDIR": scratch}, sandbox=sandbox,
        )
        document = {"metrics": json.loads(done.stdout), "exit": done.returncode}
        if kind == "guarded":
            after = stat_picture(clone, known=before, known_taken_ns=pictured_at)
            document["clone changed"] = after != before
            document["signature"] = _signing.mac(document)
        target = os.path.join(results, f"{number}.json")
        with open(target + ".tmp", "w") as written:
            json.dump(document, written)
        os.replace(target + ".tmp", target)
        os.rmdir(scratch)


workers = [threading.Thread(target=worker) for _ in range(int(jobs))]
for started in workers:
    started.start()
for started in workers:
    started.join()
"""

KINDS = ("plain", "confined", "guarded")


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (the command's and all it started) of ``argv``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--jobs", default="1,2", help="numbers of workers, comma-separated")
    parser.add_argument("--quick", action="store_true", help="40 runs, one round")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.rounds = 40, 1
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        cold, experiment, script = cold_matrix(root, args.runs, ASSAY)
        # Contexts archived and bytecode written, not measured.
        timed([sys.executable, "-m", "trysquare", "validate", str(cold), str(experiment), "--no-progress"])  # fmt: skip
        listing = root / "contexts.txt"
        contexts = sorted(experiment.glob("runs/*/validation/script/context.json"))
        listing.write_text("".join(f"{context}\n" for context in contexts))
        runner = root / "runner.py"
        runner.write_text(RUNNER)
        results = root / "results"
        results.mkdir()
        for jobs in (int(j) for j in args.jobs.split(",")):
            loop = (
                f'while read -r c; do "{script}" "$c" > /dev/null; done < "{listing}"'
                if jobs == 1
                else f'xargs -P{jobs} -n1 "{script}" < "{listing}" > /dev/null'
            )
            measures: dict[str, list[str]] = {"loop": ["sh", "-c", loop]}
            for kind in KINDS:
                measures[kind] = [sys.executable, str(runner), kind, str(jobs), str(script)]
                measures[kind] += [str(listing), str(results)]
            measures["trysquare"] = [
                sys.executable, "-m", "trysquare", "validate", str(cold), str(experiment),
                "--replay", "--force", "--no-progress", "--jobs", str(jobs),
            ]  # fmt: skip
            found: dict[str, list[tuple[float, float]]] = {name: [] for name in measures}
            for _ in range(args.rounds):
                for name, argv in measures.items():
                    found[name].append(timed(argv))
            wall = {name: statistics.median(w for w, _ in taken) for name, taken in found.items()}
            cpu = {name: statistics.median(c for _, c in taken) for name, taken in found.items()}
            others = [name for name in measures if name != "loop"]
            said = "serial loop" if jobs == 1 else f"xargs -P{jobs} loop"
            print(
                f"floor.cold.jobs{jobs}: {said} {wall['loop']:.2f} s over {args.runs} runs; "
                + ", ".join(f"{name} {wall[name] / wall['loop']:.3f}x" for name in others)
                + f" (CPU: loop {cpu['loop']:.2f} s; "
                + ", ".join(f"{name} {cpu[name] / cpu['loop']:.2f}x" for name in others)
                + f"; median of {args.rounds} interleaved rounds; load average "
                + f"{Path('/proc/loadavg').read_text().split()[0]})"
            )


if __name__ == "__main__":
    main()

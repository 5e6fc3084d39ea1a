#!/usr/bin/env python3
"""The judging phase of N runs against a loopback chat-completions server.

Each reply takes 100 ms; the provider's concurrency bound is 16 and the pool
has more threads than that, so the bound is what paces the work. Contexts are
built (and archived) first, untimed; only the executor's run over the planned
judge tasks is measured, against the ideal N x 0.1 / 16 s. Prints:

    judge.200runs: 1.08x (ideal 1.25 s)

Usage: uv run python benchmarks/bench_judge.py [--quick] [--runs N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the loopback server lives in tests/

from trysquare import executors
from trysquare.runner import ValidateOptions, plan
from trysquare.runs import discover
from trysquare.scenario import load_scenario
from trysquare.testing import RunBuilder

from tests.judge.chatserver import ChatServer, Reply, verdict

LATENCY = float(os.environ.get("BENCH_LATENCY", "0.1"))
BOUND = 16
THREADS = 64

SCENARIO = """\
[[validation]]
mode = "judge"
provider = "bench"
model = "bench-judge"
thinking = "off"
rubric = "rubric.md"
pieces = ["prompt", "response", "diff"]
metrics = ["note_usable", "cites_paths"]
"""


def build(root: Path, count: int, base_url: str) -> tuple[Path, Path]:
    folder = root / "scenario"
    folder.mkdir()
    (folder / "scenario.toml").write_text(SCENARIO)
    (folder / "rubric.md").write_text(
        "note_usable is false when the note says nothing. Empty: all false.\n"
    )
    (root / "trysquare.toml").write_text(
        f'[providers.bench]\ntype = "openai"\nbase_url = "{base_url}"\nmax_concurrency = {BOUND}\n'
    )
    experiment = root / "exp"
    # One real git run, copied: building N repositories would dwarf what is measured.
    first = RunBuilder(experiment / "runs" / "r0000", cell="c0", repetition=0)
    first.base({"counter.py": "count = 1\n"})
    first.repo.write("counter.py", "count = 0\n")
    first.finish(response="Changed counter.py so counting starts at zero.\n")
    for index in range(1, count):
        target = experiment / "runs" / f"r{index:04d}"
        shutil.copytree(first.path, target, symlinks=True)
        toml = (target / "run.toml").read_text().replace('cell = "c0"', f'cell = "c{index % 4}"')
        (target / "run.toml").write_text(toml.replace("repetition = 0", f"repetition = {index}"))
    return folder / "scenario.toml", experiment


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int)
    args = parser.parse_args()
    count = args.runs or (48 if args.quick else 200)
    reply = verdict({"note_usable": True, "cites_paths": False})
    with (
        tempfile.TemporaryDirectory() as temp,
        ChatServer(lambda _: Reply(body=reply.body, delay=LATENCY)) as server,
    ):
        os.environ["XDG_CACHE_HOME"] = str(Path(temp) / "cache")
        scenario_path, experiment = build(Path(temp), count, server.base_url)
        scenario = load_scenario(scenario_path)
        [found] = discover([experiment])
        options = ValidateOptions(jobs=THREADS)
        errors: list = []
        for validation in scenario.validations:
            validation.prepare()  # as validate does before planning (the judge's HTTP import)
        with ThreadPoolExecutor(max_workers=8) as pool:  # contexts built here: not timed
            tasks = plan(scenario, found.runs, scenario.validations, options, errors, pool)
        assert len(tasks) == count and not errors, errors
        running = executors.get("local", {}, jobs=THREADS)
        started = time.perf_counter()
        states = [
            result.document["state"] for result in running.run(tasks, should_stop=lambda: False)
        ]
        elapsed = time.perf_counter() - started
    invalid = [s for s in states if s != "valid"]
    assert not invalid, f"{len(invalid)} judged runs were not valid"
    assert server.peak <= BOUND, f"the server saw {server.peak} requests at once (bound {BOUND})"
    ideal = count * LATENCY / BOUND
    print(f"judge.{count}runs: {elapsed / ideal:.2f}x (ideal {ideal:.2f} s)")
    print(
        f"  measured {elapsed:.2f} s, {len(server.received)} requests, peak in flight {server.peak}"
    )


if __name__ == "__main__":
    main()

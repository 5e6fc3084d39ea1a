#!/usr/bin/env python3
"""Batch judging's own cost: a whole ``validate`` of N runs through a fake batch API, against
the same validate through a chat server answering at once (the baseline), both in this run.

Both servers answer without delay, so what is compared is trysquare's work: the batch path
records each item, rewrites each pending result with its batch id, and then the verdict; the
interactive path sends N requests. Prints:

    batch.200runs: 1.30x the interactive validate (baseline 3.1 s)

Usage: uv run python benchmarks/bench_batch.py [--quick] [--runs N]
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the fake servers live in tests/

from trysquare import runner
from trysquare.runs import discover
from trysquare.scenario import load_scenario
from trysquare.testing import RunBuilder

from tests.judge.batchserver import GOOD, BatchFake
from tests.judge.chatserver import ChatServer, verdict

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


def build(root: Path, count: int, base_url: str, *, batch: bool) -> tuple[Path, Path]:
    folder = root / "scenario"
    folder.mkdir(parents=True)
    (folder / "scenario.toml").write_text(SCENARIO + ("batch = true\n" if batch else ""))
    (folder / "rubric.md").write_text(
        "note_usable is false when the note says nothing. Empty: all false.\n"
    )
    (root / "trysquare.toml").write_text(
        f'[providers.bench]\ntype = "openai"\nbase_url = "{base_url}"\nmax_concurrency = 16\npoll_interval = 0\n'
    )
    experiment = root / "exp"
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


def timed(root: Path, count: int, base_url: str, *, batch: bool) -> float:
    scenario_path, experiment = build(root, count, base_url, batch=batch)
    scenario = load_scenario(scenario_path)
    started = time.perf_counter()
    summary = runner.validate(
        scenario,
        discover([experiment]),
        runner.ValidateOptions(jobs=8, progress=False),
        out=io.StringIO(),
    )
    elapsed = time.perf_counter() - started
    assert summary.states["valid"] == count, summary.closing_line()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int)
    args = parser.parse_args()
    count = args.runs or (48 if args.quick else 200)
    with tempfile.TemporaryDirectory() as temp:
        os.environ["XDG_CACHE_HOME"] = str(Path(temp) / "cache")
        with ChatServer(lambda _: verdict(GOOD)) as chat:
            baseline = timed(Path(temp) / "interactive", count, chat.base_url, batch=False)
        with BatchFake("openai", looks_to_end=1) as fake:
            batched = timed(Path(temp) / "batch", count, fake.base_url, batch=True)
        assert fake.counts["create"] == 1 and fake.counts["chat"] == 0, fake.counts
    print(
        f"batch.{count}runs: {batched / baseline:.2f}x the interactive validate (baseline {baseline:.1f} s)"
    )
    print(f"  measured {batched:.2f} s in batch, {baseline:.2f} s interactive")


if __name__ == "__main__":
    main()

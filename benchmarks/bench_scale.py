#!/usr/bin/env python3
"""``validate --replay --force`` and ``report`` per run at 1,000, 10,000 and 100,000 runs.

One small real git run is built and validated (its context archived), then copied: the
first thousand with ``shutil.copytree``, every further thousand by one ``cp -a
--reflink=auto`` of a whole block (a real copy or a reflink, never a hard link: trysquare
refuses hard-linked files in a run), each copy then given a cell and repetition of its own.
The experiment grows from one size to the next. At each size an untimed ``validate
--replay`` signs the new copies' results here (a copied result is signed for another
folder), then, each in a process of its own, ``validate --replay --force`` (every result
replaced) and ``report`` are timed, with the peak resident memory of the trysquare process
(its validators apart). Goal: time per run flat within 10% from the smallest size to the
largest, memory <= 100 MiB at 100,000. Prints one line per command and size, then:

    scale.validate: 1.04x time per run from 1000 to 100000 runs (goal <= 1.10x); 61 MiB at 100000

Usage: python benchmarks/bench_scale.py [--sizes 1000,10000,100000] [--jobs N] [--quick]
(``--quick``: 100 and 1,000 runs, two minutes; 100,000 runs take hours on two cores and
about 18 GB of disk.)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _matrix import MEASURE, build_matrix

BLOCK = 1000
VALIDATOR = '#!/bin/sh\necho \'{"metrics": {"changed": true}}\'\n'


def measure(*args: str | Path) -> tuple[float, float, str]:
    """Wall seconds, peak MiB and the last line printed of one trysquare command in a
    process of its own."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
    )
    found = [line for line in done.stderr.splitlines() if line.startswith("MEASURE ")]
    if not found:
        raise SystemExit(f"{args[0]} failed: {done.stderr.strip()[-500:]}")
    _, took, peak = found[-1].split()
    last = (done.stdout.strip().splitlines() or [""])[-1]
    return float(took), float(peak), last


def set_cell(run_toml: Path, index: int) -> None:
    text = run_toml.read_text(encoding="utf-8")
    text = re.sub(r'(?m)^cell = ".*"$', f'cell = "c{index % 4}"', text)
    text = re.sub(r"(?m)^repetition = \d+$", f"repetition = {index}", text)
    run_toml.write_text(text, encoding="utf-8")


def grow(experiment: Path, template: Path, have: int, want: int) -> None:
    """Add runs ``have`` .. ``want - 1`` as copies of ``template``, in blocks of 1,000.

    A run's id is its folder's name: each copy is renamed to an id of its own.
    """
    index = have
    while index < want:
        block, slot = divmod(index, BLOCK)
        target = experiment / f"b{block:04d}"
        if block > 0 and slot == 0 and want - index >= BLOCK:
            # A whole block by one cp of the first (reflinks where the filesystem has
            # them), then each run given its own id, cell and repetition.
            first = experiment / "b0000"
            subprocess.run(["cp", "-a", "--reflink=auto", str(first), str(target)], check=True)
            for offset, run_dir in enumerate(sorted(target.iterdir())):
                renamed = run_dir.rename(target / f"r{index + offset:06d}")
                set_cell(renamed / "run.toml", index + offset)
            index += BLOCK
            continue
        target.mkdir(parents=True, exist_ok=True)
        shutil.copytree(template, target / f"r{index:06d}", symlinks=True)
        set_cell(target / f"r{index:06d}" / "run.toml", index)
        index += 1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma list, ascending")
    parser.add_argument("--quick", action="store_true", help="100 and 1,000 runs")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    sizes = sorted(int(size) for size in ("100,1000" if args.quick else args.sizes).split(","))
    figures: dict[int, dict[str, tuple[float, float, str]]] = {}
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        os.environ["XDG_CACHE_HOME"] = str(root / "cache")
        scenario, seed = build_matrix(root, 1, "changed.sh", VALIDATOR)
        measure("validate", scenario, seed, "--no-progress")  # the context built and archived
        template = seed / "runs" / "r0000"
        experiment = root / "scale"
        have = 0
        for size in sizes:
            started = time.perf_counter()
            grow(experiment, template, have, size)
            have = size
            built = time.perf_counter() - started
            measure("validate", scenario, experiment, "--replay", "--no-progress", "-q",
                    "--jobs", str(args.jobs))  # fmt: skip
            validate = measure("validate", scenario, experiment, "--replay", "--force",
                               "--no-progress", "-q", "--jobs", str(args.jobs))  # fmt: skip
            if not validate[2].startswith(f"{size} runs: {size} valid"):
                raise SystemExit(
                    f"validate at {size} runs did not validate them all: {validate[2]}"
                )
            report = measure("report", scenario, experiment, "--format", "json")
            figures[size] = {"validate": validate, "report": report}
            for name, (took, peak, _) in figures[size].items():
                print(
                    f"scale.{name} at {size}: {took / size * 1000:.2f} ms per run, "
                    f"{took:.1f} s, {peak:.0f} MiB peak (copies built in {built:.0f} s)",
                    flush=True,
                )
    small, big = sizes[0], sizes[-1]
    for name in ("validate", "report"):
        per_small = figures[small][name][0] / small
        per_big = figures[big][name][0] / big
        print(
            f"scale.{name}: {per_big / per_small:.2f}x time per run from {small} to {big} runs "
            f"(goal <= 1.10x); {figures[big][name][1]:.0f} MiB at {big} (goal <= 100 MiB at 100000)"
        )


if __name__ == "__main__":
    main()

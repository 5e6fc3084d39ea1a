#!/usr/bin/env python3
"""validate --replay --force over N runs with a trivial validator, against a shell loop.

The baseline spawns the same validator on the same archived contexts from a
plain shell loop; the ratio is what trysquare's runner adds on top. Prints:

    validate.replay.jobs1: 1.05x (baseline shell loop 4.10 s over 200 runs)
    validate.replay.jobs2: 0.61x (...)

Usage: python benchmarks/bench_validate.py [--quick] [--runs N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trysquare.testing import RunBuilder

TRIVIAL = f"""#!{sys.executable}
import json, sys
context = json.load(open(sys.argv[1]))
print(json.dumps({{"metrics": {{"changed": bool(context["touched"])}}}}))
"""


def build(root: Path, count: int) -> tuple[Path, Path]:
    scenario_dir = root / "scenario"
    scenario_dir.mkdir()
    script = scenario_dir / "trivial.py"
    script.write_text(TRIVIAL)
    script.chmod(0o755)
    scenario = scenario_dir / "scenario.toml"
    scenario.write_text(
        '[[validation]]\nmode = "script"\ncommand = "trivial.py"\nmetrics = ["changed"]\n'
    )
    experiment = root / "exp"
    first = RunBuilder(experiment / "runs" / "r0000", cell="c0", repetition=0)
    first.base({"a.py": "a = 1\n", "b.py": "b = 1\n"})
    first.repo.write("a.py", "a = 2\n")
    first.finish(response="done\n")
    for index in range(1, count):
        target = experiment / "runs" / f"r{index:04d}"
        shutil.copytree(first.path, target, symlinks=True)
        toml = (target / "run.toml").read_text().replace('cell = "c0"', f'cell = "c{index % 4}"')
        (target / "run.toml").write_text(toml.replace("repetition = 0", f"repetition = {index}"))
    return scenario, experiment


def trysquare(*args: str | Path) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "trysquare", *map(str, args)], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def shell_loop(experiment: Path, script: Path) -> float:
    contexts = sorted(experiment.glob("runs/*/validation/script/context.json"))
    listing = experiment / "contexts.txt"
    listing.write_text("".join(f"{c}\n" for c in contexts))
    loop = f'while read -r c; do "{script}" "$c" > /dev/null; done < "{listing}"'
    started = time.perf_counter()
    subprocess.run(["sh", "-c", loop], check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int)
    args = parser.parse_args()
    count = args.runs or (40 if args.quick else 200)
    with tempfile.TemporaryDirectory() as temp:
        os.environ["XDG_CACHE_HOME"] = str(Path(temp) / "cache")
        scenario, experiment = build(Path(temp), count)
        trysquare("validate", scenario, experiment, "--no-progress")  # build and archive contexts
        script = scenario.parent / "trivial.py"
        baseline = min(shell_loop(experiment, script) for _ in range(2))
        for jobs in (1, 2):
            took = min(
                trysquare("validate", scenario, experiment, "--replay", "--force", "--no-progress",
                          "--jobs", str(jobs))
                for _ in range(2)
            )
            print(f"validate.replay.jobs{jobs}: {took / baseline:.2f}x "
                  f"(baseline shell loop {baseline:.2f} s over {count} runs; trysquare {took:.2f} s)")


if __name__ == "__main__":
    main()

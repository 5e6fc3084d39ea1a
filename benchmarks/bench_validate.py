#!/usr/bin/env python3
"""validate --replay --force over N runs with a trivial validator, against a shell loop.

The baseline spawns the same validator on the same archived contexts from a
plain shell loop; the ratio is what trysquare's runner adds on top. Prints:

    validate.fresh.jobs1: 1.30x (baseline shell loop 4.10 s over 200 runs; ...)
    validate.replay.jobs1: 1.05x (baseline shell loop 4.10 s over 200 runs)
    validate.replay.jobs2: 0.61x (...)
    validate.startup.confined: 1.04x (python -c pass started plainly ...)

``fresh`` is a first ``validate``: every context built from git, with a cache of its own
(no shadow repository or etalon checkout kept from before). The last figure is what
starting a validator confined (Landlock where the kernel offers it, strays ended) costs
against starting the same ``python -c pass`` with ``subprocess.run``.

Usage: python benchmarks/bench_validate.py [--quick] [--runs N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _matrix import build_matrix

TRIVIAL = f"""#!{sys.executable}
import json, sys
context = json.load(open(sys.argv[1]))
print(json.dumps({{"metrics": {{"changed": bool(context["touched"])}}}}))
"""


def build(root: Path, count: int) -> tuple[Path, Path]:
    return build_matrix(root, count, "trivial.py", TRIVIAL)


# An installed trysquare starts from bytecode; with PYTHONDONTWRITEBYTECODE set
# every start would compile every module again and the figure would measure the
# compiler. The untimed first validate writes the bytecode.
def trysquare(*args: str | Path) -> float:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "trysquare", *map(str, args)], check=True,
                   stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - started


def shell_loop(experiment: Path, script: Path) -> float:
    contexts = sorted(experiment.glob("runs/*/validation/script/context.json"))
    listing = experiment / "contexts.txt"
    listing.write_text("".join(f"{c}\n" for c in contexts))
    loop = f'while read -r c; do "{script}" "$c" > /dev/null; done < "{listing}"'
    started = time.perf_counter()
    subprocess.run(["sh", "-c", loop], check=True)
    return time.perf_counter() - started


def startup(count: int, scratch: Path) -> None:
    from trysquare._process import run_process
    from trysquare.sandbox import Sandbox, protection_line

    argv = [sys.executable, "-c", "pass"]

    def plain() -> float:
        started = time.perf_counter()
        for _ in range(count):
            subprocess.run(argv, check=True)
        return time.perf_counter() - started

    def through_run_process(sandbox: Sandbox | None) -> float:
        started = time.perf_counter()
        for _ in range(count):
            run_process(argv, cwd=scratch, timeout=None, sandbox=sandbox)
        return time.perf_counter() - started

    baseline = min(plain() for _ in range(2))
    unconfined = min(through_run_process(None) for _ in range(2))
    took = min(through_run_process(Sandbox([scratch])) for _ in range(2))
    print(f"validate.startup.confined: {took / baseline:.2f}x (python -c pass by subprocess.run "
          f"{baseline / count * 1000:.1f} ms each; run_process unconfined {unconfined / count * 1000:.1f} ms, "
          f"confined {took / count * 1000:.1f} ms; {protection_line().split(' —')[0]})")


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
        fresh = []
        for attempt in range(2):
            os.environ["XDG_CACHE_HOME"] = str(Path(temp) / f"fresh-cache-{attempt}")
            fresh.append(trysquare("validate", scenario, experiment, "--force", "--no-progress",
                                   "--jobs", "1"))
        os.environ["XDG_CACHE_HOME"] = str(Path(temp) / "cache")
        print(f"validate.fresh.jobs1: {min(fresh) / baseline:.2f}x "
              f"(baseline shell loop {baseline:.2f} s over {count} runs; trysquare {min(fresh):.2f} s)")
        for jobs in (1, 2):
            took = min(
                trysquare("validate", scenario, experiment, "--replay", "--force", "--no-progress",
                          "--jobs", str(jobs))
                for _ in range(2)
            )
            print(f"validate.replay.jobs{jobs}: {took / baseline:.2f}x "
                  f"(baseline shell loop {baseline:.2f} s over {count} runs; trysquare {took:.2f} s)")
        startup(count // 4, Path(temp))


if __name__ == "__main__":
    main()

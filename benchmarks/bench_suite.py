#!/usr/bin/env python3
"""The suite is paid once: a replay of a validator calling run.tests(), second vs first.

N runs, a 2-second suite, a validator that only calls ``run.tests()``. The first
``validate --replay --force --rerun-suite`` runs the suite on every run; the second
``validate --replay --force`` reuses each run's recorded outcome. Prints:

    suite.replay.reused: 0.08x (first replay ran the 2 s suite on 20 runs in 21.3 s; second 1.7 s)

Usage: python benchmarks/bench_suite.py [--quick] [--runs N] [--seconds S]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _matrix import build_matrix

VALIDATOR = f"""#!{sys.executable}
from trysquare.assay import validator

@validator
def evaluate(run):
    return {{"changed": run.tests}}

if __name__ == "__main__":
    evaluate.cli()
"""

# A suite that takes its time and says, as unittest does, that it ran one test.
SUITE = """import sys, time
time.sleep(float(sys.argv[1]))
print("Ran 1 test in %ss\\n\\nOK" % sys.argv[1])
"""


def trysquare(*args: str | Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "trysquare", *map(str, args)], check=True, stdout=subprocess.DEVNULL
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    count = args.runs or (6 if args.quick else 20)
    with tempfile.TemporaryDirectory() as temp:
        os.environ["XDG_CACHE_HOME"] = str(Path(temp) / "cache")
        scenario, experiment = build_matrix(Path(temp), count, "suite_validator.py", VALIDATOR)
        suite = scenario.parent / "slow_suite.py"
        suite.write_text(SUITE)
        command = f"{sys.executable} {suite} {args.seconds:g}"
        scenario.write_text(
            f"[task]\ntest_command = {json.dumps(command)}\n\n" + scenario.read_text()
        )
        # Build and archive the contexts (this also runs and records the suite once).
        trysquare("validate", scenario, experiment, "--no-progress", "--jobs", "2")
        first = trysquare(
            "validate",
            scenario,
            experiment,
            "--replay",
            "--force",
            "--rerun-suite",
            "--no-progress",
            "--jobs",
            "2",
        )
        seconds = [
            trysquare(
                "validate",
                scenario,
                experiment,
                "--replay",
                "--force",
                "--no-progress",
                "--jobs",
                "2",
            )
            for _ in range(3)
        ]
        second = min(seconds)
        results = [
            json.loads(p.read_text()) for p in experiment.glob("runs/*/validation/script.json")
        ]
        assert all(r["metrics"] == {"changed": True} for r in results), (
            "the suite's verdict changed"
        )
        assert all(any("reused" in n for n in r.get("notes", [])) for r in results), "not reused"
        print(
            f"suite.replay.reused: {second / first:.2f}x (first replay ran the {args.seconds:g} s suite "
            f"on {count} runs in {first:.2f} s, --jobs 2; second {second:.2f} s, "
            f"spread {max(seconds) - second:.2f} s over 3)"
        )


if __name__ == "__main__":
    main()

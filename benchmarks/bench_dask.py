#!/usr/bin/env python3
"""validate over N runs with a validator sleeping 0.5 s: local --jobs 2 against a Dask LocalCluster.

The sleeping validator stands in for remote capacity (a suite on another
machine, a judge behind an API): on a two-core machine the cluster's 8 threads
can only win by running more tasks at once, which is what the ratio shows. The
dask time includes starting the LocalCluster. Prints:

    dask.200runs: 3.10x faster than local --jobs 2 (local 51.2 s, dask 16.5 s)

Usage: python benchmarks/bench_dask.py [--quick] [--runs N]
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

from _matrix import build_matrix

SLEEPER = f"""#!{sys.executable}
import json, sys, time
context = json.load(open(sys.argv[1]))
time.sleep(0.5)
print(json.dumps({{"metrics": {{"changed": bool(context["touched"])}}}}))
"""

# Eight threads in all, in two worker processes: the cluster the issue names.
CLUSTER = ["--executor", "dask", "--executor-option", "workers=2", "--executor-option", "threads=4"]


def build(root: Path, count: int) -> tuple[Path, Path]:
    return build_matrix(root, count, "sleeper.py", SLEEPER)


def validate(scenario: Path, experiment: Path, *extra: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "trysquare",
            "validate",
            str(scenario),
            str(experiment),
            "--no-progress",
            *extra,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="40 runs instead of 200")
    parser.add_argument("--runs", type=int)
    args = parser.parse_args()
    count = args.runs or (40 if args.quick else 200)
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        os.environ["XDG_CACHE_HOME"] = str(root / "cache")
        scenario, experiment = build(root, count)
        on_cluster = root / "exp-dask"
        shutil.copytree(experiment, on_cluster, symlinks=True)
        local = validate(scenario, experiment, "--jobs", "2")
        dask = validate(scenario, on_cluster, *CLUSTER)
        done = len(list(on_cluster.glob("runs/*/validation/script.json")))
        assert done == count, f"the cluster recorded {done} of {count} results"
    print(
        f"dask.{count}runs: {local / dask:.2f}x faster than local --jobs 2 "
        f"(local {local:.1f} s, dask {dask:.1f} s)"
    )


if __name__ == "__main__":
    main()

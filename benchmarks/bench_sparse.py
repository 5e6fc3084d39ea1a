"""Peak memory of a context build for a run holding a 2 GB sparse file, against the
same run holding a 1 KB file.

Each build (touched, files, diff.patch written to disk) runs in a fresh child
process; its peak resident size comes from ``resource.getrusage`` (git's own
children are reported apart). Printed as a ratio, not asserted; the target is
constant memory: about 1.0x.

    uv run python benchmarks/bench_sparse.py [--quick]
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "trysquare_core" / "src"))

from trysquare.testing import RunBuilder

MEASURE = """
import json, pathlib, resource, sys
from trysquare import context as contexts
from trysquare.runs import load_run
facts = contexts.gather_facts(load_run(pathlib.Path(sys.argv[1])))
print(json.dumps({
    "self_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    "children_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    "diff_bytes": contexts.diff_size(facts),
}))
"""


def make_run(root: Path, size: int) -> Path:
    run = RunBuilder(root)
    run.base({"counter.py": "x = 1\n"})
    big = run.repo.path / "data.bin"
    with open(big, "wb") as handle:
        handle.write(b"head\n")
    os.truncate(big, size)
    return run.finish(response="Done.\n") / "run.toml"


def measure(run_toml: Path, cache: Path) -> tuple[dict[str, int], float]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(run_toml)],
        capture_output=True, text=True, check=True, env=env,
    )  # fmt: skip
    return json.loads(done.stdout), time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a 512 MB sparse file instead of 2 GB")
    args = parser.parse_args(argv)
    size = 512 * 1024**2 if args.quick else 2 * 1024**3
    with tempfile.TemporaryDirectory(prefix="bench-sparse-") as scratch:
        root = Path(scratch)
        small, t_small = measure(make_run(root / "small", 1024), root / "cache")
        large, t_large = measure(make_run(root / "large", size), root / "cache")
    label = f"{size // 1024**2} MB sparse"
    print(
        f"context build peak memory, {label} file: {large['self_kb'] / small['self_kb']:.2f}x "
        f"(baseline 1 KB file {small['self_kb'] / 1024:.1f} MB)"
    )
    print(f"context build time, {label} file: {t_large / t_small:.2f}x (baseline {t_small:.2f} s)")
    print(
        f"  (git children peak: {large['children_kb'] / 1024:.1f} MB vs "
        f"{small['children_kb'] / 1024:.1f} MB; diff.patch {large['diff_bytes']} bytes)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

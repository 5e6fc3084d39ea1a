"""A 2 GB sparse file in the clone costs constant memory and no disk.

The context build (touched, files, diff.patch) runs in a child process whose peak
RSS is read with ``resource.getrusage``; the suite's throwaway copy keeps the file
sparse.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from trysquare.git.suite_copy import copy_tree
from trysquare.testing import GitRepo

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare.git.suite_copy",)


TWO_GB = 2 * 1024**3

MEASURE = """
import json, resource, sys
from trysquare import context as contexts
from trysquare.runs import load_run
facts = contexts.gather_facts(load_run(__import__("pathlib").Path(sys.argv[1])))
print(json.dumps({
    "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    "touched": list(facts.touched),
    "diff_size": contexts.diff_size(facts),
}))
"""


def peak(run_toml: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(run_toml)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def make_run(root: Path, size: int) -> Path:
    from trysquare.testing import RunBuilder

    run = RunBuilder(root)
    run.base({"counter.py": "x = 1\n"})
    big = run.repo.path / "data.bin"
    with open(big, "wb") as handle:
        handle.write(b"head\n")
    os.truncate(big, size)  # sparse: no disk behind the zeros
    return run.finish(response="Done.\n") / "run.toml"


def test_a_two_gigabyte_sparse_file_costs_constant_memory(tmp_path: Path) -> None:
    small = peak(make_run(tmp_path / "small", 1024))
    large = peak(make_run(tmp_path / "large", TWO_GB))
    assert large["touched"] == ["data.bin"]
    assert int(large["rss_kb"]) < int(small["rss_kb"]) + 64 * 1024  # within 64 MB of a 1 KB file


def test_the_suite_copy_keeps_a_sparse_file_sparse(tmp_path: Path) -> None:
    g = GitRepo.init(tmp_path / "clone", {"counter.py": "x = 1\n"})
    big = g.path / "data.bin"
    with open(big, "wb") as handle:
        handle.write(b"head\n")
        handle.seek(TWO_GB // 2)
        handle.write(b"middle\n")
    os.truncate(big, TWO_GB)
    copy = copy_tree(g.path, tmp_path / "copy") / "data.bin"
    info = os.stat(copy)
    assert info.st_size == TWO_GB
    assert info.st_blocks * 512 < 16 * 1024 * 1024  # holes stayed holes
    with open(copy, "rb") as handle:
        assert handle.read(5) == b"head\n"
        handle.seek(TWO_GB // 2)
        assert handle.read(7) == b"middle\n"

"""Hostile paths in a measured clone: names that are not UTF-8, too many paths for a
command line, paths git cannot read. Each is carried losslessly or refuses the run,
named; none crashes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from trysquare import context as contexts
from trysquare.errors import RepoError, RunError
from trysquare.git.changes import changed_files, touched_and_files
from trysquare.git.patch import diff_patch
from trysquare.runs import load_run
from trysquare.testing import GitRepo, RunBuilder

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare.git.changes", "trysquare.git.patch")


BASE = {"counter.py": "def count():\n    return 1\n"}


def test_a_file_name_that_is_not_utf8(tmp_path: Path) -> None:
    run = RunBuilder(tmp_path / "runs" / "r1")
    run.base(BASE)
    name = b"caf\xe9.py"
    with open(os.path.join(os.fsencode(run.repo.path), name), "wb") as handle:
        handle.write(b"x = 1\n")
    run.finish(response="Done.\n")
    facts = contexts.gather_facts(load_run(run.path / "run.toml"))
    shown = os.fsdecode(name)
    assert facts.touched == (shown,) and shown in facts.files
    assert b"caf\xe9.py" in facts.diff.read_bytes()
    text = contexts.dump_context({"touched": list(facts.touched), "files": list(facts.files)})
    assert "\\udce9" in text
    (tmp_path / "context.json").write_text(text, encoding="utf-8")  # writable as UTF-8
    back = json.loads((tmp_path / "context.json").read_text(encoding="utf-8"))
    assert [os.fsencode(p) for p in back["touched"]] == [name]  # lossless


@pytest.mark.slow
def test_sixty_thousand_paths_removed_from_the_index(tmp_path: Path) -> None:
    g = GitRepo.init(tmp_path / "clone")
    # One commit of 60,000 empty files, made by fast-import.
    names = [
        b"d%02d/file_%04d_with_a_longish_name.txt" % (i // 1000, i % 1000) for i in range(60_000)
    ]
    lines = [
        b"blob\nmark :1\ndata 0\n",
        b"commit refs/heads/main\n",
        b"committer t <t@t.invalid> 0 +0000\ndata 4\nbase\n",
    ]
    lines += [b"M 100644 :1 %s\n" % name for name in names]
    subprocess.run(
        ["git", "-C", str(g.path), "fast-import", "--quiet"], input=b"".join(lines), check=True
    )
    base = g.git("rev-parse", "main").strip()
    # The same files in the working tree and no index, as `git reset --hard` then
    # `git rm -r --cached .` leave them: 60k paths untracked. Created here, one folder fd
    # at a time: git's checkout of them took 13-33 s of system time on CI's disk, this ~4 s.
    for folder in sorted({name.split(b"/")[0] for name in names}):
        os.mkdir(g.path / os.fsdecode(folder))
    for name in names:
        os.close(os.open(g.path / os.fsdecode(name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    touched, files = touched_and_files(g.path, base)
    assert touched == set() and len(files) == 60_000
    assert diff_patch(g.path, base) == ""
    g.write("d00/file_0000_with_a_longish_name.txt", "changed\n")
    assert changed_files(g.path, base) == {"d00/file_0000_with_a_longish_name.txt"}


def deep_folder(root: Path, depth: int, name: str = "d" * 20) -> bytes:
    """Make ``depth`` nested folders below ``root`` (beyond PATH_MAX); return the path."""
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        made = os.open("evil.py", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd)
        os.write(made, b"out of scope\n")
        os.close(made)
    finally:
        os.close(fd)
    return b"/".join([name.encode()] * depth)


def test_a_path_longer_than_path_max(tmp_path: Path) -> None:
    run = RunBuilder(tmp_path / "runs" / "r1")
    run.base(BASE)
    run.repo.write("counter.py", "def count():\n    return 2\n")
    deep_folder(run.repo.path, 250)  # 5250 bytes: past PATH_MAX (4096)
    run.finish(response="Done.\n")
    with pytest.raises(RunError, match=r"could not read part of .*dddd"):
        contexts.gather_facts(load_run(run.path / "run.toml"))
    subprocess.run(["rm", "-rf", str(run.repo.path / ("d" * 20))], check=True)


def test_five_hundred_nested_folders(tmp_path: Path) -> None:
    g = GitRepo.init(tmp_path / "clone", BASE)
    deep_folder(g.path, 500, name="d")  # short names: 1000 bytes, but very deep
    try:
        touched = changed_files(g.path, "HEAD")
    except RepoError as error:
        assert "could not read part of" in error.message
    else:
        # git read every level: the file it found is the agent's, never dropped
        assert touched == {"/".join(["d"] * 500) + "/evil.py"}
    subprocess.run(["rm", "-rf", str(g.path / "d")], check=True)

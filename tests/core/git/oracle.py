"""The oracle for ``trysquare.git``'s tests: plain git, nothing from trysquare."""

from __future__ import annotations

import io
import os
import stat
import subprocess
from pathlib import Path

from trysquare.git.changes import changed_files, touched_and_files, working_files
from trysquare.git.patch import context_facts, diff_patch
from trysquare.testing import GitRepo

BASE_FILES = {
    "README.md": "# demo\n",
    "src/app.py": "def main():\n    return 1\n",
    "src/util.py": "X = 1\n",
    "docs/guide.md": "guide\n",
    "tests/test_app.py": "def test(): pass\n",
    "run.sh": "#!/bin/sh\necho hi\n",
}


# --- the oracle: plain git, nothing from trysquare -------------------------------------


def plain_git(path: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True).stdout


def z_paths(data: bytes) -> set[str]:
    return {os.fsdecode(p.rstrip(b"/")) for p in data.split(b"\0") if p}


def base_excludes(path: Path, base: str) -> str:
    """`--exclude-from` of the root .gitignore as it is at ``base`` (ignore rules are
    the base commit's, never the work tree's)."""
    rules = path.parent / f"oracle-exclude-{base.replace('/', '_')}"
    done = subprocess.run(
        ["git", "-C", str(path), "show", f"{base}:.gitignore"], capture_output=True, check=False
    )
    rules.write_bytes(done.stdout if done.returncode == 0 else b"")
    return f"--exclude-from={rules}"


def oracle_touched(path: Path, base: str) -> set[str]:
    """`git diff --name-only --no-renames <base>` plus untracked files not ignored at base."""
    tracked = plain_git(path, "diff", "--name-only", "-z", "--no-renames", base, "--")
    others = plain_git(path, "ls-files", "-z", "--others", base_excludes(path, base))
    return z_paths(tracked) | z_paths(others)


def oracle_files(path: Path) -> set[str]:
    """`git ls-files` (tracked) plus untracked not ignored at HEAD, minus deleted from disk."""
    cached = z_paths(plain_git(path, "ls-files", "-z"))
    deleted = z_paths(plain_git(path, "ls-files", "-z", "--deleted"))
    others = z_paths(plain_git(path, "ls-files", "-z", "--others", base_excludes(path, "HEAD")))
    return (cached - deleted) | others


def check_against_git(g: GitRepo, base: str) -> tuple[frozenset[str], frozenset[str]]:
    touched = changed_files(g.path, base)
    files = working_files(g.path)
    assert touched == oracle_touched(g.path, base)
    assert files == oracle_files(g.path)
    assert touched_and_files(g.path, base) == (touched, files)
    patch = io.BytesIO()  # the context build's one walk gives the same three facts
    assert context_facts(g.path, base, patch) == (touched, files)
    assert patch.getvalue().decode("utf-8", "replace") == diff_patch(g.path, base)
    assert not any(p == ".git" or p.startswith(".git/") for p in touched | files)
    return touched, files


def chunk_paths(patch: str) -> list[str]:
    return [
        line.split(" b/")[0][len("diff --git a/") :]
        for line in patch.splitlines()
        if line.startswith("diff --git a/")
    ]


def tree_state(root: Path, paths: set[str]) -> dict[str, tuple[str, bytes]]:
    """Kind (link / exec / file) and content of each path."""
    state: dict[str, tuple[str, bytes]] = {}
    for rel in paths:
        full = root / rel
        if full.is_symlink():
            state[rel] = ("link", os.fsencode(os.readlink(full)))
        else:
            kind = "exec" if full.stat().st_mode & stat.S_IXUSR else "file"
            state[rel] = (kind, full.read_bytes())
    return state

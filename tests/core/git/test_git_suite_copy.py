"""``trysquare.git.suite_copy``: the suite's copy holds exactly the working tree's files.

Expectations come from plain ``git`` calls made here (the oracle) or are written
by hand; never from trysquare's own output.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from trysquare.errors import RepoError
from trysquare.git.suite_copy import copy_tree
from trysquare.testing import GitRepo

from tests.core.git.oracle import oracle_files, tree_state

# --- copy_tree ---------------------------------------------------------------------------


def test_copy_tree_holds_exactly_the_files(g: GitRepo, tmp_path: Path) -> None:
    g.write("src/app.py", "agent\n")
    g.write("untracked/new.py", "n\n")
    g.delete("docs/guide.md")
    os.symlink("../src/app.py", g.path / "src/alias.py")
    g.ignore("node_modules/")
    g.stage(".gitignore")
    g.commit("ignore rules at HEAD", all=False)
    g.write("node_modules/dep/index.js", "ignored\n")
    dest = copy_tree(g.path, tmp_path / "copy")
    expected = oracle_files(g.path)
    copied = {str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_symlink() or p.is_file()}
    assert copied == expected
    assert tree_state(dest, expected) == tree_state(g.path, expected)
    assert (dest / "src/alias.py").is_symlink()
    assert not (dest / ".git").exists() and not (dest / "node_modules").exists()
    (dest / "src/app.py").write_text("mutated in the copy\n")
    assert (g.path / "src/app.py").read_text() == "agent\n"


def test_copy_tree_refuses_a_non_empty_destination(g: GitRepo, tmp_path: Path) -> None:
    dest = tmp_path / "busy"
    dest.mkdir()
    (dest / "something").write_text("x")
    with pytest.raises(RepoError, match="not empty"):
        copy_tree(g.path, dest)


def test_copy_tree_copies_a_nested_repository_without_its_git(g: GitRepo, tmp_path: Path) -> None:
    GitRepo.init(g.path / "vendor/lib", {"a.c": "int a;\n"})
    dest = copy_tree(g.path, tmp_path / "copy")
    assert (dest / "vendor/lib/a.c").read_text() == "int a;\n"
    assert not (dest / "vendor/lib/.git").exists()
    shutil.rmtree(dest)

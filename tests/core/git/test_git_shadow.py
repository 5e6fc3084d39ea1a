"""``trysquare.git.shadow``: the shadow cache is pruned, and kept while used; ``ls-files
--others`` is left out only where it could list nothing.

Expectations come from plain ``git`` calls made here (the oracle) or are written
by hand; never from trysquare's own output.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from trysquare.git.changes import changed_files
from trysquare.git.patch import context_facts
from trysquare.git.shadow import _SHADOW_ROOTS, _may_hold_others, prune_shadows
from trysquare.testing import GitRepo

from tests.core.git.oracle import BASE_FILES, plain_git

# --- the shadow cache is pruned -------------------------------------------------------------


def test_shadows_unused_for_thirty_days_are_pruned_and_rebuilt_when_needed(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    _SHADOW_ROOTS.clear()
    g = GitRepo.init(tmp_path / "clone", BASE_FILES)
    base = g.head()
    g.write("src/app.py", "changed\n")
    assert changed_files(g.path, base) == {"src/app.py"}
    root = tmp_path / "cache" / "trysquare" / "shadow"
    (used,) = [p for p in root.iterdir() if not p.name.startswith((".", "base-"))]
    (shared,) = [p for p in root.iterdir() if p.name.startswith("base-")]  # what base gives
    old = root / ("0" * 32)
    old.mkdir()
    (old / "index").write_bytes(b"an old shadow's index")
    leftover = root / ".build.killed"
    leftover.mkdir()
    long_ago = (root / ".pruned").stat().st_mtime - 31 * 86400
    for folder in (used, shared, old, leftover):
        os.utime(folder, (long_ago, long_ago))

    # Pruned at most once a day: the stamp written when the cache was first used holds it back.
    assert prune_shadows(root) == []
    later = (root / ".pruned").stat().st_mtime + 86400 + 1
    assert sorted(prune_shadows(root, now=later)) == sorted(
        [used.name, shared.name, old.name, leftover.name]
    )
    assert [p.name for p in root.iterdir()] == [".pruned"]
    assert prune_shadows(root, now=later + 60) == []  # stamped again

    # A pruned shadow is rebuilt the next time it is needed, and answers the same.
    assert changed_files(g.path, base) == {"src/app.py"}
    assert (used / "index").is_file()
    assert (shared / "index").is_file()


def test_using_a_shadow_keeps_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    _SHADOW_ROOTS.clear()
    g = GitRepo.init(tmp_path / "clone", BASE_FILES)
    base = g.head()
    changed_files(g.path, base)
    root = tmp_path / "cache" / "trysquare" / "shadow"
    (shadow,) = [p for p in root.iterdir() if not p.name.startswith((".", "base-"))]
    long_ago = shadow.stat().st_mtime - 31 * 86400
    os.utime(shadow, (long_ago, long_ago))
    changed_files(g.path, base)  # used again: touched
    later = (root / ".pruned").stat().st_mtime + 86400 + 1
    assert prune_shadows(root, now=later) == []
    assert shadow.is_dir()


# --- ls-files --others is started only when the work tree holds something to list ----------


def _git_lists_nothing(clone: GitRepo) -> bool:
    """Plain ``git ls-files --others`` with no ignore rule at all: a superset of what
    trysquare's listing (base rules, ``excluded``) could name."""
    return plain_git(clone.path, "ls-files", "-z", "--others") == b""


def _shape_tracked_edit(clone: GitRepo) -> None:
    clone.write("src/app.py", "def main():\n    return 2\n")
    clone.delete("docs/guide.md")


def _shape_empty_folders(clone: GitRepo) -> None:
    (clone.path / "new" / "deeper").mkdir(parents=True)


def _shape_file_in_new_folder(clone: GitRepo) -> None:
    (clone.path / "new" / "deeper").mkdir(parents=True)
    clone.write("new/deeper/x.py", "x\n")


def _shape_tracked_file_now_a_folder(clone: GitRepo) -> None:
    clone.delete("src/util.py")
    clone.write("src/util.py/inner.py", "x\n")


def _shape_new_link(clone: GitRepo) -> None:
    os.symlink("src", clone.path / "shortcut")


def _shape_new_link_to_an_empty_folder(clone: GitRepo) -> None:
    (clone.path / "empty").mkdir()  # a folder with nothing in it: git lists neither it...
    os.symlink("empty", clone.path / "shortcut")  # ...nor anything through it, but the link


def _shape_nested_repository(clone: GitRepo) -> None:
    GitRepo.init(clone.path / "vendor" / "lib", {"lib.py": "y\n"})


def _shape_ignored_file(clone: GitRepo) -> None:
    clone.write("build.log", "noise\n")


@pytest.mark.parametrize(
    "shape",
    [
        _shape_tracked_edit,
        _shape_empty_folders,
        _shape_file_in_new_folder,
        _shape_tracked_file_now_a_folder,
        _shape_new_link,
        _shape_new_link_to_an_empty_folder,
        _shape_nested_repository,
        _shape_ignored_file,
    ],
)
def test_the_walk_says_nothing_to_list_only_when_git_lists_nothing(
    g: GitRepo, shape: Callable[[GitRepo], None]
) -> None:
    shape(g)
    tracked = frozenset(p for p in plain_git(g.path, "ls-files", "-z").split(b"\0") if p)
    walked_nothing = not _may_hold_others(g.path, tracked)
    assert walked_nothing == _git_lists_nothing(g)


def test_a_run_with_nothing_new_has_the_facts_git_gives(g: GitRepo, tmp_path: Path) -> None:
    base = g.head()
    _shape_tracked_edit(g)
    _shape_empty_folders(g)
    patch = io.BytesIO()
    touched, files = context_facts(g.path, base, patch)
    assert touched == {"src/app.py", "docs/guide.md"}
    assert files == set(BASE_FILES) - {"docs/guide.md"}
    expected = plain_git(g.path, "diff", "--no-color", "--abbrev=12", base)
    assert patch.getvalue() == expected


@pytest.mark.skipif(os.geteuid() == 0, reason="root lists any folder")
def test_a_folder_the_walk_cannot_list_is_left_to_git(g: GitRepo) -> None:
    locked = g.path / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        assert _may_hold_others(g.path, frozenset())
    finally:
        locked.chmod(0o755)

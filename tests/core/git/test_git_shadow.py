"""``trysquare.git.shadow``: the shadow cache is pruned, and kept while used.

Expectations come from plain ``git`` calls made here (the oracle) or are written
by hand; never from trysquare's own output.
"""

from __future__ import annotations

import os
from pathlib import Path

from trysquare.git.changes import changed_files
from trysquare.git.shadow import _SHADOW_ROOTS, prune_shadows
from trysquare.testing import GitRepo

from tests.core.git.oracle import BASE_FILES

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
    (used,) = [p for p in root.iterdir() if not p.name.startswith(".")]
    old = root / ("0" * 32)
    old.mkdir()
    (old / "index").write_bytes(b"an old shadow's index")
    leftover = root / ".build.killed"
    leftover.mkdir()
    long_ago = (root / ".pruned").stat().st_mtime - 31 * 86400
    for folder in (used, old, leftover):
        os.utime(folder, (long_ago, long_ago))

    # Pruned at most once a day: the stamp written when the cache was first used holds it back.
    assert prune_shadows(root) == []
    later = (root / ".pruned").stat().st_mtime + 86400 + 1
    assert sorted(prune_shadows(root, now=later)) == sorted([used.name, old.name, leftover.name])
    assert [p.name for p in root.iterdir()] == [".pruned"]
    assert prune_shadows(root, now=later + 60) == []  # stamped again

    # A pruned shadow is rebuilt the next time it is needed, and answers the same.
    assert changed_files(g.path, base) == {"src/app.py"}
    assert (used / "index").is_file()


def test_using_a_shadow_keeps_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    _SHADOW_ROOTS.clear()
    g = GitRepo.init(tmp_path / "clone", BASE_FILES)
    base = g.head()
    changed_files(g.path, base)
    root = tmp_path / "cache" / "trysquare" / "shadow"
    (shadow,) = [p for p in root.iterdir() if not p.name.startswith(".")]
    long_ago = shadow.stat().st_mtime - 31 * 86400
    os.utime(shadow, (long_ago, long_ago))
    changed_files(g.path, base)  # used again: touched
    later = (root / ".pruned").stat().st_mtime + 86400 + 1
    assert prune_shadows(root, now=later) == []
    assert shadow.is_dir()

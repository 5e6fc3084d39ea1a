"""``trysquare.git.etalon``: the etalon checkout is the tree exactly, cached by content.

Expectations come from plain ``git`` calls made here (the oracle) or are written
by hand; never from trysquare's own output.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from trysquare.git.etalon import materialise_etalon
from trysquare.testing import GitRepo

from tests.core.git.oracle import BASE_FILES, plain_git, tree_state

# --- the etalon checkout -----------------------------------------------------------------


def oracle_tree(g: GitRepo, rev: str) -> dict[str, tuple[str, bytes]]:
    """Each file of rev's tree: kind and content, from ls-tree and cat-file."""
    state: dict[str, tuple[str, bytes]] = {}
    for item in plain_git(g.path, "ls-tree", "-r", "-z", rev).split(b"\0"):
        if not item:
            continue
        meta, _, path = item.partition(b"\t")
        mode, _, oid = meta.decode().split(" ")
        kind = {"120000": "link", "100755": "exec"}.get(mode, "file")
        state[os.fsdecode(path)] = (kind, plain_git(g.path, "cat-file", "blob", oid))
    return state


def test_etalon_is_the_tree_exactly(g: GitRepo, tmp_path: Path) -> None:
    os.symlink("src/app.py", g.path / "link")
    g.write("tests/.gitattributes", "* export-ignore\n")  # git archive would drop these
    g.write("VERSION", "$Format:%H$\n")
    g.write(".gitattributes", "VERSION export-subst\n")
    g.write("weird name\twith tab.txt", "w\n")
    g.commit("etalon contents")
    g.tag("etalon-v2")
    g.write("src/app.py", "agent edit\n")  # the working tree does not matter
    folder = materialise_etalon(g.path, "etalon-v2", tmp_path / "cache")
    expected = oracle_tree(g, "etalon-v2")
    on_disk = {
        str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_symlink() or p.is_file()
    }
    assert on_disk == set(expected)
    assert tree_state(folder, set(expected)) == expected
    assert folder.name == plain_git(g.path, "rev-parse", "etalon-v2^{tree}").decode().strip()
    assert not os.access(folder / "src/app.py", os.W_OK) or os.geteuid() == 0
    assert not (folder / ".git").exists()


def test_etalon_cache_is_content_addressed_and_reused(g: GitRepo, tmp_path: Path) -> None:
    cache = tmp_path / "etalons"
    first = materialise_etalon(g.path, "etalon-v1", cache)
    marker = first / "src" / "marker"
    marker.write_text("reused")
    g.commit("empty commit, same tree")
    assert materialise_etalon(g.path, "HEAD", cache) == first
    assert marker.exists()
    g.write("src/app.py", "v2\n")
    g.commit("new tree")
    second = materialise_etalon(g.path, "HEAD", cache)
    assert second != first and second.parent == cache
    assert sorted(p.name for p in cache.iterdir()) == sorted([first.name, second.name])


def test_etalon_default_cache_honours_xdg(
    g: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    folder = materialise_etalon(g.path, "etalon-v1")
    assert folder.parent == tmp_path / "xdg" / "trysquare" / "etalons"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    folder = materialise_etalon(g.path, "etalon-v1")
    assert folder.parent == tmp_path / "home" / ".cache" / "trysquare" / "etalons"


def test_concurrent_materialisers_agree(g: GitRepo, tmp_path: Path) -> None:
    cache = tmp_path / "etalons"
    results: list[Path] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(materialise_etalon(g.path, "etalon-v1", cache))
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(set(results)) == 1
    assert [p.name for p in cache.iterdir()] == [results[0].name]  # no temporary left
    assert tree_state(results[0], set(BASE_FILES)) == oracle_tree(g, "etalon-v1")


def test_etalon_with_a_submodule_leaves_an_empty_folder(g: GitRepo, tmp_path: Path) -> None:
    upstream = GitRepo.init(tmp_path / "upstream", {"lib.py": "v1\n"})
    g.git(
        "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(upstream.path), "deps/lib"
    )
    g.commit("submodule")
    folder = materialise_etalon(g.path, "HEAD", tmp_path / "cache")
    assert (folder / "deps/lib").is_dir() and not any((folder / "deps/lib").iterdir())
    assert (folder / ".gitmodules").is_file()

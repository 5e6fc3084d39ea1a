"""``trysquare.git.shadow``: what a shadow takes from its base commit (the index read from the
base tree, its ignore rules, its paths) is built once per commit and shared by every clone
at that commit. One clone's object store is its agent's: a base tree or commit rewritten
under its id there must not become the base every other run is measured against."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import zlib
from pathlib import Path

import pytest
from trysquare.errors import RepoError
from trysquare.git.patch import context_facts
from trysquare.git.shadow import _Shadow
from trysquare.testing import GitRepo

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare.git.shadow",)

BASE = {"src/counter.py": "x = 1\n", "README.md": "hello\n", ".gitignore": "*.log\n"}


def _two_clones(tmp_path: Path) -> tuple[GitRepo, GitRepo, str]:
    """Two clones at one base commit (the second a copy of the first), each changed alike."""
    honest = GitRepo.init(tmp_path / "honest", BASE)
    base = honest.head()
    shutil.copytree(honest.path, tmp_path / "hostile", symlinks=True)
    hostile = GitRepo(tmp_path / "hostile")
    for clone in (honest, hostile):
        clone.write("src/counter.py", "x = 2\n")
        clone.write("debug.log", "ignored at base\n")
    return honest, hostile, base


def _rewrite(clone: GitRepo, object_id: str, kind: bytes, content: bytes) -> None:
    loose = clone.path / ".git" / "objects" / object_id[:2] / object_id[2:]
    if not loose.exists():
        pytest.skip("the object is packed here")
    os.chmod(loose, 0o644)
    loose.write_bytes(zlib.compress(kind + b" %d\0" % len(content) + content))


def _facts(clone: GitRepo, base: str) -> tuple[frozenset[str], frozenset[str], str]:
    patch = io.BytesIO()
    touched, files = context_facts(clone.path, base, patch)
    return touched, files, patch.getvalue().decode()


def _plant_tree(hostile: GitRepo, base: str) -> str:
    """Rewrite base's ``src`` tree under its id to list a blob the agent chose; its id."""
    subtree = hostile.git("rev-parse", f"{base}:src").strip()
    planted = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"], cwd=hostile.path, input=b"x = 'planted'\n",
        capture_output=True, check=True,
    ).stdout.decode().strip()  # fmt: skip
    _rewrite(hostile, subtree, b"tree", b"100644 counter.py\0" + bytes.fromhex(planted))
    return subtree


def test_a_base_tree_rewritten_in_one_clone_is_refused_and_never_shared(tmp_path: Path) -> None:
    honest, hostile, base = _two_clones(tmp_path)
    subtree = _plant_tree(hostile, base)

    with pytest.raises(RepoError) as refused:  # the hostile run is measured first
        _facts(hostile, base)
    assert subtree in refused.value.message
    assert "does not hold what its id names" in refused.value.message

    touched, files, patch = _facts(honest, base)
    assert touched == {"src/counter.py"}  # debug.log stays ignored: base's rules
    assert files == {"src/counter.py", "README.md", ".gitignore"}
    assert "-x = 1\n+x = 2" in patch and "planted" not in patch


def test_a_base_commit_rewritten_to_name_another_tree_is_refused(tmp_path: Path) -> None:
    honest, hostile, base = _two_clones(tmp_path)
    readme = hostile.git("rev-parse", f"{base}:README.md").strip()
    listing = f"100644 blob {readme}\tREADME.md\n".encode()
    made = subprocess.run(
        ["git", "mktree"], cwd=hostile.path, input=listing, capture_output=True, check=True
    )
    tree = made.stdout.decode().strip()  # a base without src/: counter.py would look new
    loose = hostile.path / ".git" / "objects" / base[:2] / base[2:]
    if not loose.exists():
        pytest.skip("the base commit is packed here")
    body = zlib.decompress(loose.read_bytes()).split(b"\0", 1)[1]
    _rewrite(hostile, base, b"commit", b"tree " + tree.encode() + b"\n" + body.split(b"\n", 1)[1])

    with pytest.raises(RepoError):  # refused, whichever check sees it first
        _facts(hostile, base)
    with pytest.raises(RepoError):
        _Shadow(hostile.path, base)
    assert _facts(honest, base)[0] == {"src/counter.py"}


def test_a_clone_rewritten_after_the_base_was_shared_is_measured_against_the_real_base(
    tmp_path: Path,
) -> None:
    """The other order: the honest clone built the shared base first; the hostile clone's
    rewritten tree is never read for its base, so it cannot move its own base either."""
    honest, hostile, base = _two_clones(tmp_path)
    assert _facts(honest, base)[0] == {"src/counter.py"}
    _plant_tree(hostile, base)
    touched, _files, patch = _facts(hostile, base)
    assert touched == {"src/counter.py"}
    assert "-x = 1\n+x = 2" in patch


def _folder_state(folder: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every entry below ``folder``: mode, mtime and content (files)."""
    state = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
        state[str(path.relative_to(folder))] = (info.st_mode, info.st_mtime_ns, data)
    return state


def test_reading_a_hostile_clone_through_the_shared_base_writes_nothing_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The base folder is every clone's shadow for the patch: a clone's read must not
    leave its objects, an alternates file or a refreshed index there for the next one."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    honest, hostile, base = _two_clones(tmp_path)
    assert _facts(honest, base)[0] == {"src/counter.py"}
    (shared,) = (tmp_path / "cache" / "trysquare" / "shadow").glob("base-*")
    before = _folder_state(shared)
    with open(hostile.path / ".git" / "config", "a", encoding="utf-8") as config:
        config.write("[core]\n\tuntrackedCache = true\n\tsplitIndex = true\n[gc]\n\tauto = 1\n")
    hostile.write("src/new.py", "n = 1\n")
    touched, _files, patch = _facts(hostile, base)
    assert touched == {"src/counter.py", "src/new.py"}
    assert "+n = 1" in patch
    assert _folder_state(shared) == before
    assert not (shared / "objects" / "info" / "alternates").exists()


def test_a_store_whose_path_holds_a_colon_is_borrowed_whole(tmp_path: Path) -> None:
    """The clone's objects are named to git in a colon-separated variable: a store the agent
    put at ``<...>/x:<path>`` (a ``gitdir:`` file) must not be read as two stores."""
    _honest, hostile, base = _two_clones(tmp_path)
    store = tmp_path / "odd:store"
    shutil.move(hostile.path / ".git", store)
    (hostile.path / ".git").write_text(f"gitdir: {store}\n")
    touched, _files, patch = _facts(hostile, base)
    assert touched == {"src/counter.py"}
    assert "-x = 1\n+x = 2" in patch

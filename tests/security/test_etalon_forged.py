"""The clone's object store is the agent's: the etalon (base's tree, cached and shared by
every run at that base, and what the controls at base and the hidden tests' set-aside
harness run on) must be base's real content, not what the agent wrote under its ids."""

from __future__ import annotations

import os
import subprocess
import zlib
from pathlib import Path

import pytest
from trysquare.errors import RepoError
from trysquare.git.etalon import materialise_etalon

from tests.security.guard_fixtures import build_run

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare.git.etalon",)


def test_a_base_blob_the_agent_rewrote_in_its_object_store_never_reaches_the_etalon(
    tmp_path: Path,
) -> None:
    run = build_run(tmp_path, "r1")
    clone = run.repo.path
    assert run.base_commit is not None
    blob = subprocess.run(
        ["git", "rev-parse", f"{run.base_commit}:counter.py"],
        cwd=clone,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    loose = clone / ".git" / "objects" / blob[:2] / blob[2:]
    if not loose.exists():
        pytest.skip("the base blob is packed here")
    forged = b"x = 'what the agent wants every run at this base to start from'\n"
    os.chmod(loose, 0o644)
    loose.write_bytes(zlib.compress(b"blob %d\0" % len(forged) + forged))
    try:
        etalon = materialise_etalon(clone, run.base_commit, cache=tmp_path / "etalons")
    except Exception:
        return
    assert (etalon / "counter.py").read_text() == "x = 1\n"


def test_a_base_tree_the_agent_rewrote_in_its_object_store_is_refused_by_name(
    tmp_path: Path,
) -> None:
    """Variant: not a file's content but a folder's listing (a tree object) rewritten under its
    id, pointing a base file at content the agent chose (a blob that exists honestly)."""
    run = build_run(tmp_path, "r1", base={"src/counter.py": "x = 1\n", "README.md": "hello\n"})
    clone = run.repo.path
    assert run.base_commit is not None

    def git(*args: str, data: bytes | None = None) -> bytes:
        return subprocess.run(
            ["git", *args], cwd=clone, check=True, capture_output=True, input=data
        ).stdout

    subtree = git("rev-parse", f"{run.base_commit}:src").decode().strip()
    loose = clone / ".git" / "objects" / subtree[:2] / subtree[2:]
    if not loose.exists():
        pytest.skip("the base tree is packed here")
    planted = git("hash-object", "-w", "--stdin", data=b"x = 'planted'\n").decode().strip()
    forged = b"100644 counter.py\0" + bytes.fromhex(planted)
    os.chmod(loose, 0o644)
    loose.write_bytes(zlib.compress(b"tree %d\0" % len(forged) + forged))
    with pytest.raises(RepoError) as refused:
        materialise_etalon(clone, run.base_commit, cache=tmp_path / "etalons")
    assert (
        subtree in refused.value.message
        and "does not hold what its id names" in refused.value.message
    )
    assert not list((tmp_path / "etalons").glob("*/src/counter.py"))


def test_a_base_commit_rewritten_to_name_another_tree_is_refused(tmp_path: Path) -> None:
    """Variant: the commit object itself, rewritten under base's id to name a tree the agent
    built (every object of that tree honest)."""
    run = build_run(tmp_path, "r1")
    clone = run.repo.path
    assert run.base_commit is not None

    def git(*args: str, data: bytes | None = None) -> bytes:
        return subprocess.run(
            ["git", *args], cwd=clone, check=True, capture_output=True, input=data
        ).stdout

    loose = clone / ".git" / "objects" / run.base_commit[:2] / run.base_commit[2:]
    if not loose.exists():
        pytest.skip("the base commit is packed here")
    blob = git("hash-object", "-w", "--stdin", data=b"x = 'planted'\n").decode().strip()
    tree = git("mktree", data=f"100644 blob {blob}\tcounter.py\n".encode()).decode().strip()
    original = zlib.decompress(loose.read_bytes())
    body = original.split(b"\0", 1)[1]
    forged = b"tree " + tree.encode() + b"\n" + body.split(b"\n", 1)[1]
    os.chmod(loose, 0o644)
    loose.write_bytes(zlib.compress(b"commit %d\0" % len(forged) + forged))
    with pytest.raises(RepoError):
        materialise_etalon(clone, run.base_commit, cache=tmp_path / "etalons")
    assert not list((tmp_path / "etalons").glob("*/counter.py"))


def test_an_etalon_commit_rewritten_to_name_a_cached_tree_never_hands_that_checkout_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A context build finds the etalon's checkout by the tree its commit names, read from the
    clone's files: a commit rewritten under its id to name a tree already in the cache (one
    the agent had checked out there) must be refused, not looked up."""
    from trysquare.context import gather_facts
    from trysquare.errors import RunError
    from trysquare.runs import load_run

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    honest_run = build_run(tmp_path, "r1")
    honest = gather_facts(load_run(honest_run.path / "run.toml")).etalon_checkout
    assert honest is not None and honest.is_dir()
    run = build_run(tmp_path, "r2")
    clone = run.repo.path

    def git(*args: str, data: bytes | None = None) -> bytes:
        return subprocess.run(
            ["git", *args], cwd=clone, check=True, capture_output=True, input=data
        ).stdout

    etalon = git("rev-parse", "etalon-v1^{commit}").decode().strip()
    loose = clone / ".git" / "objects" / etalon[:2] / etalon[2:]
    if not loose.exists():
        pytest.skip("the etalon commit is packed here")
    blob = git("hash-object", "-w", "--stdin", data=b"x = 'planted'\n").decode().strip()
    tree = git("mktree", data=f"100644 blob {blob}\tcounter.py\n".encode()).decode().strip()
    planted = materialise_etalon(clone, tree)  # a tree named directly: honestly its own
    assert (planted / "counter.py").read_text() == "x = 'planted'\n"
    body = zlib.decompress(loose.read_bytes()).split(b"\0", 1)[1]
    forged = b"tree " + tree.encode() + b"\n" + body.split(b"\n", 1)[1]
    os.chmod(loose, 0o644)
    loose.write_bytes(zlib.compress(b"commit %d\0" % len(forged) + forged))
    try:
        facts = gather_facts(load_run(run.path / "run.toml"))
    except RunError as refused:
        assert etalon in refused.message
        return
    assert facts.etalon_checkout == honest

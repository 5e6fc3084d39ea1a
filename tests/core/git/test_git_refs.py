"""``trysquare.git.refs`` and ``dotgit``: what a base names, and the errors that say so.

Expectations come from plain ``git`` calls made here (the oracle) or are written
by hand; never from trysquare's own output.
"""

from __future__ import annotations

import os
import subprocess
import zlib
from pathlib import Path

import pytest
from trysquare.errors import RepoError
from trysquare.git import shadow
from trysquare.git.changes import changed_files, touched_and_files, working_files
from trysquare.git.dotgit import _peeled_without_git, is_git_repo
from trysquare.git.etalon import materialise_etalon
from trysquare.git.patch import diff_patch
from trysquare.git.refs import git, resolve_commit
from trysquare.testing import GitRepo

from tests.core.git.oracle import BASE_FILES


def test_base_as_tag_short_sha_and_expression(g: GitRepo) -> None:
    base = g.head()
    g.write("src/app.py", "agent\n")
    agent = g.commit("agent")
    g.write("later.txt", "x\n")
    expected = {"src/app.py", "later.txt"}
    for rev in ("etalon-v1", base[:8], base, "main~1", "HEAD^"):
        assert changed_files(g.path, rev) == expected, rev
    assert changed_files(g.path, agent[:10]) == {"later.txt"}
    assert resolve_commit(g.path, "etalon-v1") == base
    assert resolve_commit(g.path, base[:7]) == base


def test_a_full_id_of_a_loose_commit_resolves_without_git(g: GitRepo, monkeypatch) -> None:
    base = g.head()
    tree = g.git("rev-parse", "HEAD^{tree}").strip()

    def no_git(*_: object) -> None:
        raise AssertionError("git was run")

    with monkeypatch.context() as patched:
        patched.setattr(shadow, "_Refs", no_git)  # git runs in a shadow: none is made
        assert resolve_commit(g.path, base) == base
    # Not a commit (a tree), or packed: git decides, as before.
    with pytest.raises(RepoError, match="does not resolve to a commit"):
        resolve_commit(g.path, tree)
    g.git("gc", "-q")
    assert not (g.path / ".git" / "objects" / base[:2] / base[2:]).exists()
    assert resolve_commit(g.path, base) == base


def test_names_read_without_git_resolve_as_git_resolves_them(g: GitRepo, monkeypatch) -> None:
    base = g.head()
    g.write("b.txt", "b\n")
    second = g.commit("second")
    g.git("tag", "light", base)
    g.git("tag", "-a", "-m", "annotated", "heavy", second)
    g.git("tag", "-a", "-m", "of a tag", "layered", "heavy")
    g.git("branch", "light", second)  # refs/tags/light wins over refs/heads/light, as in git
    g.git("branch", "feature/x", base)
    g.git("update-ref", "refs/remotes/origin/main", second)
    g.git("symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main")
    g.git("update-ref", "refs/tags/cafe", base)  # a name that is also a short id
    names = [
        "light",
        "heavy",
        "layered",
        "feature/x",
        "heads/feature/x",
        "tags/heavy",
        "refs/tags/light",
        "origin/main",
        "remotes/origin/main",
        "origin",
        "cafe",
        "etalon-v1",
        "main",
        "HEAD",
        "main~1",
        "no-such-name",
        base,
        second,
        base[:10],
    ]
    trees = {}
    for name in names:
        for want in (b"commit", b"tree"):
            plain = (
                subprocess.run(
                    ["git", "rev-parse", "--verify", "--quiet", f"{name}^{{{want.decode()}}}"],
                    cwd=g.path,
                    capture_output=True,
                    text=True,
                    check=False,
                ).stdout.strip()
                or None
            )
            fast = _peeled_without_git(g.path, name, want)
            assert fast is None or fast == plain, (name, want, fast, plain)
            trees[name, want] = fast
    # The plain names were answered without git; expressions, short ids, HEAD were not.
    for name in [
        "light",
        "heavy",
        "layered",
        "feature/x",
        "tags/heavy",
        "origin/main",
        "origin",
        base,
    ]:
        assert trees[name, b"commit"] is not None and trees[name, b"tree"] is not None, name
    for name in ["HEAD", "main~1", base[:10], "cafe", "no-such-name"]:
        assert trees[name, b"commit"] is None, name
    with monkeypatch.context() as patched:
        patched.setattr(
            shadow, "_Refs", lambda *_: (_ for _ in ()).throw(AssertionError("git was run"))
        )
        assert resolve_commit(g.path, "layered") == second
    # Packed objects: git is asked, and answers the same.
    g.git("gc", "-q")
    assert _peeled_without_git(g.path, "heavy", b"commit") is None
    assert resolve_commit(g.path, "heavy") == second


def test_a_loose_object_that_does_not_hash_to_its_id_is_left_to_git(g: GitRepo) -> None:
    base = g.head()
    # The agent rewrites the base's loose object: a well-formed commit, another content.
    path = g.path / ".git" / "objects" / base[:2] / base[2:]
    forged = b"commit 7\0forged!"
    os.chmod(path, 0o644)
    path.write_bytes(zlib.compress(forged))
    assert _peeled_without_git(g.path, base, b"commit") is None  # never trusted without its id
    with pytest.raises(RepoError):
        resolve_commit(g.path, base)  # and git refuses it too


# --- errors and small helpers ----------------------------------------------------------


def test_errors_name_the_repository_and_the_base(g: GitRepo, tmp_path: Path) -> None:
    with pytest.raises(RepoError) as caught:
        changed_files(g.path, "no-such-tag")
    assert "no-such-tag" in str(caught.value) and str(g.path) in str(caught.value)
    for call in (diff_patch, touched_and_files, resolve_commit):
        with pytest.raises(RepoError, match="does not resolve"):
            call(g.path, "deadbeef")  # type: ignore[operator]
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(RepoError, match=f"{plain} is not a git repository"):
        changed_files(plain, "HEAD")
    with pytest.raises(RepoError) as caught:
        git(g.path, "cat-file", "-p", "nope")
    assert str(g.path) in str(caught.value) and "cat-file" in str(caught.value)
    with pytest.raises(RepoError, match="etalon 'v9' does not resolve"):
        materialise_etalon(g.path, "v9", tmp_path / "cache")


def test_an_option_is_never_taken_for_a_base(g: GitRepo, tmp_path: Path) -> None:
    target = tmp_path / "written"
    with pytest.raises(RepoError):
        changed_files(g.path, f"--output={target}")
    with pytest.raises(RepoError):
        diff_patch(g.path, f"--output={target}")
    assert not target.exists()


def test_is_git_repo(g: GitRepo, tmp_path: Path) -> None:
    assert is_git_repo(g.path)
    assert not is_git_repo(g.path / "src")  # inside one, not the top of one
    assert not is_git_repo(g.path / ".git")
    assert not is_git_repo(tmp_path / "absent")
    assert not is_git_repo(g.path / "README.md")


def test_inherited_git_variables_do_not_redirect(
    g: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = GitRepo.init(tmp_path / "other", {"elsewhere.txt": "x\n"})
    monkeypatch.setenv("GIT_DIR", str(other.path / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(other.path / ".git/index"))
    assert working_files(g.path) == set(BASE_FILES)


def _refs_by_os_walk(common: Path) -> dict[str, bytes]:
    """The clone's loose refs as a plain top-down ``os.walk`` finds them, links to folders
    not followed: what ``_clone_refs`` must read, in the same order (a symbolic ref resolves
    through those read before it)."""
    from trysquare.git.dotgit import _HEX, _good_ref
    from trysquare.git.hostile import _read_small

    found: dict[str, bytes] = {}
    symbolic: dict[str, str] = {}
    for current, folders, files in os.walk(common / "refs"):
        folders[:] = [f for f in folders if not (Path(current) / f).is_symlink()]
        for file in files:
            name = (Path(current) / file).relative_to(common).as_posix()
            if not _good_ref(name.encode("utf-8", "surrogateescape")):
                continue
            text = (_read_small(Path(current) / file) or b"").strip()
            if _HEX.match(text):
                found[name] = text
            elif text.startswith(b"ref: "):
                symbolic[name] = text[5:].decode("utf-8", "replace")
    for name, target in symbolic.items():
        if target in found:
            found[name] = found[target]
    return {name: oid for name, oid in found.items() if not name.startswith("refs/replace/")}


def test_the_refs_read_in_python_are_those_a_walk_of_the_refs_folder_finds(
    g: GitRepo, tmp_path: Path
) -> None:
    from trysquare.git.dotgit import _clone_refs

    base = g.head()
    common = g.path / ".git"
    g.git("branch", "deep/er/still", base)
    g.git("symbolic-ref", "refs/heads/alias", "refs/heads/deep/er/still")
    g.git("symbolic-ref", "refs/heads/alias2", "refs/heads/alias")  # through another symbolic
    g.git("symbolic-ref", "refs/heads/dangling", "refs/heads/none")
    (common / "refs" / "heads" / "bad name").write_text(base + "\n")  # not a good ref: skipped
    (common / "refs" / "heads" / "junk").write_text("not an id\n")
    outside = tmp_path / "outside"
    (outside / "tags").mkdir(parents=True)
    (outside / "tags" / "planted").write_text(base + "\n")
    (common / "refs" / "linked").symlink_to(outside)  # a link to a folder: not followed
    (common / "refs" / "tags" / "file-link").symlink_to(outside / "tags" / "planted")
    (common / "refs" / "replace").mkdir(exist_ok=True)
    (common / "refs" / "replace" / base).write_text(base + "\n")  # never read
    refs, head = _clone_refs(common, common)
    loose = {n: o for n, o in refs.items() if (common / n).exists() or (common / n).is_symlink()}
    assert loose == _refs_by_os_walk(common)
    assert refs["refs/heads/alias"] == refs["refs/heads/deep/er/still"] == base.encode()
    assert not any(name.startswith(("refs/linked/", "refs/replace/")) for name in refs)
    assert "refs/tags/file-link" not in refs  # read without following: no id
    assert head.startswith(b"ref: ")

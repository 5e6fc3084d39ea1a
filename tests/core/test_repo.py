"""trysquare.repo against real repositories, checked against git itself.

Expectations come from plain ``git`` calls made here (the oracle) or are written
by hand; never from trysquare's own output.
"""

from __future__ import annotations

import hashlib
import io
import os
import random
import shutil
import stat
import subprocess
import threading
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from trysquare.errors import RepoError
from trysquare.git import refs
from trysquare.git.changes import changed_files, touched_and_files, working_files
from trysquare.git.dotgit import _peeled_without_git, is_git_repo
from trysquare.git.etalon import materialise_etalon
from trysquare.git.patch import context_facts, diff_patch
from trysquare.git.refs import git, resolve_commit
from trysquare.git.shadow import _SHADOW_ROOTS, prune_shadows
from trysquare.git.suite_copy import copy_tree
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


@pytest.fixture
def g(tmp_path: Path) -> GitRepo:
    repo = GitRepo.init(tmp_path / "clone", BASE_FILES)
    (repo.path / "run.sh").chmod(0o755)
    repo.commit("base with exec bit")
    repo.tag("etalon-v1")
    return repo


# --- touched and files: hand-written cases, each also checked against git ---------------


def test_clean_clone_touches_nothing(g: GitRepo) -> None:
    touched, files = check_against_git(g, "HEAD")
    assert touched == set()
    assert files == set(BASE_FILES)


def test_every_kind_of_change(g: GitRepo) -> None:
    g.ignore("*.log", "build/")
    base = g.commit("ignore rules at base")
    g.write("src/app.py", "def main():\n    return 2\n")  # unstaged
    g.write("src/util.py", "X = 2\n")
    g.stage("src/util.py")  # staged
    g.delete("docs/guide.md")  # deleted, not staged
    g.git("rm", "-q", "tests/test_app.py")  # deleted, staged
    g.rename("README.md", "README.rst")  # renamed: both paths
    g.write("src/new.py", "new\n")  # untracked
    g.ignore("*.tmp")  # the agent's own ignore rule hides nothing
    g.write("hidden.tmp", "agent work\n")
    g.write("debug.log", "noise\n")  # ignored
    g.write("build/out.bin", b"\0\1")  # ignored folder
    touched, files = check_against_git(g, base)
    assert touched == {
        "src/app.py", "src/util.py", "docs/guide.md", "tests/test_app.py",
        "README.md", "README.rst", "src/new.py", ".gitignore", "hidden.tmp",
    }  # fmt: skip
    assert files == {
        "README.rst",
        "src/app.py",
        "src/util.py",
        "run.sh",
        "src/new.py",
        ".gitignore",
        "hidden.tmp",
    }


def test_agent_commits_count_and_a_reverted_one_does_not(g: GitRepo) -> None:
    base = g.head()
    g.write("src/app.py", "changed\n")
    g.write("src/extra.py", "extra\n")
    g.commit("agent work")
    g.write("src/util.py", "reverted soon\n")
    g.commit("agent change")
    g.write("src/util.py", BASE_FILES["src/util.py"])  # put back in the working tree
    touched, _ = check_against_git(g, base)
    assert touched == {"src/app.py", "src/extra.py"}


def test_a_file_committed_then_deleted_is_not_touched(g: GitRepo) -> None:
    base = g.head()
    g.write("tmp.txt", "scratch\n")
    g.commit("agent scratch")
    g.git("rm", "-q", "tmp.txt")
    g.commit("agent cleanup")
    touched, files = check_against_git(g, base)
    assert touched == set()
    assert "tmp.txt" not in files


def test_staged_then_removed_from_disk_is_neither_touched_nor_a_file(g: GitRepo) -> None:
    base = g.head()
    g.write("ghost.py", "x\n")
    g.stage("ghost.py")
    g.delete("ghost.py")
    touched, files = check_against_git(g, base)
    assert touched == set()
    assert "ghost.py" not in files


def test_stale_stat_info_alone_touches_nothing(g: GitRepo) -> None:
    # Every tracked file looks changed to the index (new mtimes); git must read them.
    for rel in BASE_FILES:
        os.utime(g.path / rel, ns=(10**9, 10**9))
    g.write("src/util.py", "X = 9\n")
    assert touched_and_files(g.path, "HEAD") == ({"src/util.py"}, set(BASE_FILES))
    assert changed_files(g.path, "HEAD") == {"src/util.py"}
    assert chunk_paths(diff_patch(g.path, "HEAD")) == ["src/util.py"]
    check_against_git(g, "HEAD")  # (the oracle's porcelain diff refreshes the index)


def test_mode_change_only_is_touched(g: GitRepo) -> None:
    (g.path / "src/app.py").chmod(0o755)
    (g.path / "run.sh").chmod(0o644)
    touched, _ = check_against_git(g, "etalon-v1")
    assert touched == {"src/app.py", "run.sh"}


def test_unstaged_plain_move_counts_both_paths(g: GitRepo) -> None:
    os.rename(g.path / "src/util.py", g.path / "src/helpers.py")
    touched, files = check_against_git(g, "HEAD")
    assert touched == {"src/util.py", "src/helpers.py"}
    assert "src/helpers.py" in files and "src/util.py" not in files


def test_removed_from_the_index_but_left_on_disk(g: GitRepo) -> None:
    # `git rm --cached`: exists at base and in the tree. Same content and mode: not
    # touched (git diff alone would call it deleted). Content or mode differs: touched.
    g.git("rm", "-q", "--cached", "src/util.py", "src/app.py", "run.sh")
    g.write("src/app.py", "different now\n")
    (g.path / "run.sh").chmod(0o644)
    assert changed_files(g.path, "HEAD") == {"src/app.py", "run.sh"}
    assert working_files(g.path) == set(BASE_FILES)
    assert touched_and_files(g.path, "HEAD") == ({"src/app.py", "run.sh"}, set(BASE_FILES))


def test_removed_from_the_index_and_ignored_after_base_is_still_a_file(g: GitRepo) -> None:
    # The index and the agent's own ignore rules say nothing: the file is on disk,
    # unchanged since base. Only the .gitignore edit is the agent's work.
    g.git("rm", "-q", "--cached", "docs/guide.md")
    g.ignore("docs/")
    touched, files = touched_and_files(g.path, "HEAD")
    assert touched == {".gitignore"}
    assert "docs/guide.md" in files


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
        patched.setattr(refs, "_Refs", no_git)
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
    names = ["light", "heavy", "layered", "feature/x", "heads/feature/x", "tags/heavy",
             "refs/tags/light", "origin/main", "remotes/origin/main", "origin", "cafe", "etalon-v1",
             "main", "HEAD", "main~1", "no-such-name", base, second, base[:10]]
    trees = {}
    for name in names:
        for want in (b"commit", b"tree"):
            plain = subprocess.run(
                ["git", "rev-parse", "--verify", "--quiet", f"{name}^{{{want.decode()}}}"],
                cwd=g.path, capture_output=True, text=True,
            ).stdout.strip() or None
            fast = _peeled_without_git(g.path, name, want)
            assert fast is None or fast == plain, (name, want, fast, plain)
            trees[name, want] = fast
    # The plain names were answered without git; expressions, short ids, HEAD were not.
    for name in ["light", "heavy", "layered", "feature/x", "tags/heavy", "origin/main", "origin", base]:
        assert trees[name, b"commit"] is not None and trees[name, b"tree"] is not None, name
    for name in ["HEAD", "main~1", base[:10], "cafe", "no-such-name"]:
        assert trees[name, b"commit"] is None, name
    with monkeypatch.context() as patched:
        patched.setattr(refs, "_Refs", lambda *_: (_ for _ in ()).throw(AssertionError("git was run")))
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


def test_awkward_paths(g: GitRepo) -> None:
    names = [
        "with space.txt", "unicodé/naïve.py", "tab\there.txt", "new\nline.txt",
        'quote"d.txt', "back\\slash.txt", "-dash.txt", ":colon.txt", "*star?.txt",
    ]  # fmt: skip
    for name in names:
        g.write(name, "x\n")
    g.commit("awkward base")
    base = g.head()
    for name in names[::2]:
        g.write(name, "changed\n")
    g.write("brand new ✓.md", "y\n")
    touched, files = check_against_git(g, base)
    assert touched == set(names[::2]) | {"brand new ✓.md"}
    assert set(names) <= files


def test_symlinks(g: GitRepo) -> None:
    os.symlink("src/app.py", g.path / "link")
    os.symlink("missing-target", g.path / "dangling")
    g.commit("links")
    base = g.head()
    (g.path / "link").unlink()
    os.symlink("src/util.py", g.path / "link")  # retargeted
    (g.path / "src/app.py").unlink()
    os.symlink("util.py", g.path / "src/app.py")  # file became a link
    os.symlink("README.md", g.path / "new-link")  # untracked link
    touched, files = check_against_git(g, base)
    assert touched == {"link", "src/app.py", "new-link"}
    assert {"dangling", "link", "new-link"} <= files


def test_tracked_file_replaced_by_a_folder(g: GitRepo) -> None:
    (g.path / "src/util.py").unlink()
    g.write("src/util.py/__init__.py", "pkg\n")
    touched, files = touched_and_files(g.path, "HEAD")
    assert touched == oracle_touched(g.path, "HEAD") == {"src/util.py", "src/util.py/__init__.py"}
    # `git ls-files --deleted` calls the folder present; it is no longer a file.
    assert files == oracle_files(g.path) - {"src/util.py"}
    assert "src/util.py/__init__.py" in files


def test_nested_repository_is_one_path(g: GitRepo) -> None:
    inner = GitRepo.init(g.path / "vendor/lib", {"a.c": "int a;\n", "b.c": "int b;\n"})
    touched, files = check_against_git(g, "HEAD")
    assert touched == {"vendor/lib"}
    assert "vendor/lib" in files and not any(p.startswith("vendor/lib/") for p in files)
    assert inner.head()


def test_submodule_gitlink_is_one_path(g: GitRepo, tmp_path: Path) -> None:
    upstream = GitRepo.init(tmp_path / "upstream", {"lib.py": "v1\n"})
    g.git(
        "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(upstream.path), "deps/lib"
    )
    g.commit("add submodule")
    base = g.head()
    assert check_against_git(g, base)[0] == set()
    sub = GitRepo(g.path / "deps/lib")
    sub.write("lib.py", "v2\n")
    sub.commit("bump")
    touched, files = check_against_git(g, base)
    assert touched == {"deps/lib"}
    assert "deps/lib" in files and ".gitmodules" in files


def test_empty_repository(tmp_path: Path) -> None:
    g = GitRepo.init(tmp_path / "empty")
    assert is_git_repo(g.path)
    assert working_files(g.path) == set()
    g.write("first.txt", "1\n")
    assert working_files(g.path) == {"first.txt"}
    with pytest.raises(RepoError, match=r"base 'HEAD' does not resolve .*empty"):
        changed_files(g.path, "HEAD")


@pytest.mark.parametrize("seed", range(8))
def test_random_histories_agree_with_git(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    files = {f"d{rng.randrange(4)}/f{i}.txt": f"{i}\n" * rng.randrange(1, 4) for i in range(40)}
    g = GitRepo.init(tmp_path / "r", files)
    g.ignore("*.tmp")
    g.commit("ignore tmp")
    base = g.head()
    live = sorted(files)
    ops: list[Callable[[str], None]] = [
        lambda p: g.write(p, f"edit {rng.random()}\n"),
        lambda p: (g.write(p, "staged\n"), g.stage(p)),
        lambda p: g.delete(p),
        lambda p: g.git("rm", "-q", p),
        lambda p: g.rename(p, p + ".moved"),
        lambda p: (g.path / p).chmod(0o755),
        lambda p: g.write(p + ".tmp", "ignored\n"),
        lambda p: g.write(f"new/{rng.randrange(99)}/{Path(p).name}", "fresh\n"),
    ]
    for _round in range(3):
        for _ in range(rng.randrange(3, 10)):
            path = live.pop(rng.randrange(len(live)))
            rng.choice(ops)(path)
        if rng.random() < 0.5:
            g.commit("agent step")
    check_against_git(g, base)


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


# --- diff.patch --------------------------------------------------------------------------


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


def checkout_base_and_apply(g: GitRepo, base: str, patch: str, dest: Path) -> None:
    """A fresh checkout of base made with plain git, the patch applied with `git apply`."""
    dest.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(g.path), "archive", base], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    subprocess.run(["git", "init", "-q", str(dest)], check=True)
    (dest / "change.patch").write_text(patch, encoding="utf-8")
    done = subprocess.run(
        ["git", "-C", str(dest), "apply", "--whitespace=nowarn", "change.patch"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    (dest / "change.patch").unlink()


def test_patch_applies_to_base_and_reproduces_the_tree(g: GitRepo, tmp_path: Path) -> None:
    g.ignore("*.log")
    base = g.commit("ignore logs at base")
    g.write("src/app.py", "def main():\n    return 2\n")
    g.commit("agent commit")
    g.write("src/util.py", "X = 3\n")
    g.stage("src/util.py")
    g.write("README.md", "# demo\nmore\n")
    g.delete("docs/guide.md")
    g.rename("tests/test_app.py", "tests/test_main.py")
    (g.path / "run.sh").chmod(0o644)
    g.write("new/module.py", "print('new')")  # no final newline
    g.write("new/empty.txt", "")
    g.write("tool.sh", "#!/bin/sh\n", mode=0o755)
    g.write("with space/und ünïcode.txt", "ü\r\nwindows line\r\n")
    g.write("tab\tname.txt", "t\n")
    os.symlink("src/app.py", g.path / "shortcut")
    g.write("skip.log", "never in the patch\n")
    patch = diff_patch(g.path, base)
    assert "skip.log" not in patch
    assert chunk_paths(patch) == sorted(chunk_paths(patch), key=os.fsencode)
    applied = tmp_path / "applied"
    checkout_base_and_apply(g, base, patch, applied)
    expected = oracle_files(g.path)
    got = {
        str(p.relative_to(applied)) for p in applied.rglob("*") if not p.is_dir() or p.is_symlink()
    }
    got = {p for p in got if not p.startswith(".git/")}
    assert got == expected
    assert tree_state(applied, expected) == tree_state(g.path, expected)
    assert diff_patch(g.path, base) == patch  # stable


def test_patch_of_a_clean_clone_is_empty(g: GitRepo) -> None:
    assert diff_patch(g.path, "HEAD") == ""


def test_patch_skips_a_file_only_removed_from_the_index(g: GitRepo, tmp_path: Path) -> None:
    g.git("rm", "-q", "--cached", "src/util.py", "src/app.py")
    g.write("src/app.py", "rewritten\n")
    patch = diff_patch(g.path, "HEAD")
    assert "src/util.py" not in patch
    assert chunk_paths(patch) == ["src/app.py"]  # the index is not read: a modification
    applied = tmp_path / "applied"
    checkout_base_and_apply(g, "HEAD", patch, applied)
    assert (applied / "src/app.py").read_text() == "rewritten\n"
    assert (applied / "src/util.py").read_text() == BASE_FILES["src/util.py"]


def test_binary_files_are_shown_as_git_shows_them(g: GitRepo) -> None:
    g.write("blob.bin", b"\x00\x01binary")
    g.commit("binary")
    base = g.head()
    g.write("blob.bin", b"\x00\x02changed")
    g.write("fresh.bin", b"PK\x00\x00zip")
    patch = diff_patch(g.path, base)
    assert "Binary files a/blob.bin and b/blob.bin differ\n" in patch
    assert "Binary files /dev/null and b/fresh.bin differ\n" in patch
    assert "zip" not in patch


UNTRACKED_CASES: dict[str, bytes | str] = {
    "plain.txt": "one\ntwo\n",
    "no-newline.txt": "one\ntwo",
    "single.txt": "only\n",
    "empty.txt": "",
    "crlf.txt": "a\r\nb\r\n",
    "blank-lines.txt": "\n\n\n",
    "binary.dat": b"abc\x00def",
    "late-nul.dat": b"x" * 9000 + b"\x00",  # a NUL past git's 8000-byte sniff: text
    "space name.txt": "s\n",
    "tab\tname.txt": "t\n",
    "line\nbreak.txt": "n\n",
    'quo"te\\back.txt': "q\n",
    "ünïcødé/файл.txt": "u\n",
    "bell\x07del\x7f.txt": "c\n",
    "forced-binary.txt": "looks like text\n",
    "forced-text.dat": b"nul\x00inside\n",
}


def test_untracked_files_render_exactly_as_git_diff_no_index(g: GitRepo) -> None:
    for name, content in UNTRACKED_CASES.items():
        g.write(name, content)
    g.write("exec.sh", "#!/bin/sh\n", mode=0o755)
    os.symlink("plain.txt", g.path / "link")
    # Attributes count as they are at base (the work tree's are the agent's).
    g.write(".gitattributes", "forced-binary.txt -diff\nforced-text.dat diff\n")
    g.stage(".gitattributes")
    g.commit("attributes at base", all=False)
    patch = diff_patch(g.path, "HEAD").encode("utf-8")
    names = [*UNTRACKED_CASES, "exec.sh", "link"]
    for name in names:
        done = subprocess.run(
            ["git", "-c", "core.quotepath=off", "diff", "--no-index", "--no-color", "--abbrev=12",
             "--", "/dev/null", name],
            cwd=g.path, capture_output=True,
        )  # fmt: skip
        assert done.returncode == 1, done.stderr  # 1: "there were differences"
        assert done.stdout in patch, name
    assert patch.count(b"diff --git ") == len(names)


def test_untracked_nested_repository_in_patch(g: GitRepo) -> None:
    inner = GitRepo.init(g.path / "vendor/lib", {"a.c": "int a;\n"})
    patch = diff_patch(g.path, "HEAD")
    assert f"+Subproject commit {inner.head()}\n" in patch
    assert "int a;" not in patch


def test_patch_of_tracked_changes_is_git_diff(g: GitRepo) -> None:
    base = g.head()
    g.write("src/app.py", "def main():\n    return 3\n")
    g.git("rm", "-q", "docs/guide.md")
    expected = plain_git(g.path, "diff", "--no-renames", "--abbrev=12", "--no-color", base).decode()
    assert diff_patch(g.path, base) == expected


# --- the measured clone is never written -------------------------------------------------


def snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every entry under root, .git included: mode, mtime (for .git), content hash."""
    seen: dict[str, tuple[int, int, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = Path(dirpath, name)
            rel = str(full.relative_to(root))
            info = full.lstat()
            in_git = rel == ".git" or rel.startswith(".git/")
            mtime = info.st_mtime_ns if in_git or not stat.S_ISDIR(info.st_mode) else 0
            if stat.S_ISLNK(info.st_mode):
                digest = os.readlink(full)
            elif stat.S_ISREG(info.st_mode):
                digest = hashlib.sha256(full.read_bytes()).hexdigest()
            else:
                digest = "dir"
            seen[rel] = (info.st_mode, mtime, digest)
    return seen


def test_validation_writes_nothing_into_the_clone(g: GitRepo, tmp_path: Path) -> None:
    base = g.head()
    g.write("src/app.py", "agent\n")
    g.commit("agent")
    g.write("src/util.py", "unstaged\n")
    g.write("staged.py", "s\n")
    g.stage("staged.py")
    g.write("untracked.txt", "u\n")
    g.git("rm", "-q", "--cached", "docs/guide.md")
    # Stat-dirty but unchanged: exactly what tempts git into refreshing the index.
    os.utime(g.path / "README.md", ns=(1, 1))
    os.utime(g.path / "tests/test_app.py")
    before = snapshot(g.path)
    index_mtime = (g.path / ".git/index").stat().st_mtime_ns
    is_git_repo(g.path)
    resolve_commit(g.path, "etalon-v1")
    changed_files(g.path, base)
    working_files(g.path)
    touched_and_files(g.path, base)
    diff_patch(g.path, base)
    materialise_etalon(g.path, "etalon-v1", tmp_path / "cache")
    copy_tree(g.path, tmp_path / "copy")
    assert (g.path / ".git/index").stat().st_mtime_ns == index_mtime
    assert snapshot(g.path) == before
    worktrees = plain_git(g.path, "worktree", "list", "--porcelain").decode()
    assert worktrees.count("worktree ") == 1


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


def test_orphan_branch_with_no_commit_yet(g: GitRepo) -> None:
    base = g.head()
    g.git("checkout", "-q", "--orphan", "fresh")  # HEAD now names no commit
    g.write("src/app.py", "orphan edit\n")
    g.delete("docs/guide.md")
    touched, _ = check_against_git(g, base)
    assert touched == {"src/app.py", "docs/guide.md"}


def test_nested_gitignore_at_base_ignores_as_git_does(g: GitRepo) -> None:
    # The base's .gitignore files are anchored to their folders in one exclude file;
    # with the work tree's .gitignore untouched, git's own reading must agree.
    g.write(".gitignore", "*.log\n/top-only.txt\nbuild/\n")
    g.write("src/.gitignore", "*.tmp\n!keep.tmp\n/anchored.txt\ndeep/x.txt\ncache/\n")
    g.write("src/pkg/.gitignore", "!*.log\n*.gen\n")
    g.commit("ignore rules at base")
    base = g.head()
    for rel in [
        "a.log", "src/b.log", "src/pkg/c.log", "top-only.txt", "src/top-only.txt",
        "build/out.o", "src/build/out.o", "src/x.tmp", "src/keep.tmp", "src/pkg/y.tmp",
        "src/anchored.txt", "src/pkg/anchored.txt", "src/deep/x.txt", "src/pkg/deep/x.txt",
        "src/cache/z", "src/pkg/cache/z", "cache/z", "src/pkg/w.gen", "w.gen", "[x]/y.txt",
    ]:  # fmt: skip
        g.write(rel, "agent\n")
    touched, files = touched_and_files(g.path, base)
    expected = z_paths(plain_git(g.path, "ls-files", "-z", "--others", "--exclude-standard"))
    assert touched == expected
    assert files == expected | set(BASE_FILES) | {".gitignore", "src/.gitignore", "src/pkg/.gitignore"}
    assert "src/pkg/c.log" in touched and "src/keep.tmp" in touched and "a.log" not in touched


def test_a_sha256_repository(tmp_path: Path) -> None:
    g = GitRepo(tmp_path / "sha256")
    g.path.mkdir()
    g.git("init", "-q", "--object-format=sha256", "-b", "main")
    g.write_files(BASE_FILES)
    base = g.commit("base")
    assert len(base) == 64
    g.write("src/app.py", "changed\n")
    g.write("new.txt", "n\n")
    assert changed_files(g.path, base) == {"src/app.py", "new.txt"}
    patch = diff_patch(g.path, base)
    assert chunk_paths(patch) == ["new.txt", "src/app.py"]


def test_a_linked_worktree_is_read_through_its_gitfile(g: GitRepo, tmp_path: Path) -> None:
    g.git("worktree", "add", "-q", "-b", "agent", str(tmp_path / "linked"), "etalon-v1")
    linked = tmp_path / "linked"
    assert is_git_repo(linked)
    (linked / "src/app.py").write_text("agent\n")
    (linked / "extra.py").write_text("x\n")
    assert changed_files(linked, "etalon-v1") == {"src/app.py", "extra.py"}
    assert resolve_commit(linked, "HEAD") == g.git("rev-parse", "etalon-v1^{commit}").strip()


# --- the shadow cache is pruned -------------------------------------------------------------


def test_shadows_unused_for_thirty_days_are_pruned_and_rebuilt_when_needed(tmp_path: Path, monkeypatch) -> None:
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


def test_a_gitattributes_link_is_read_as_a_file_of_the_tree_not_as_a_refusal(tmp_path: Path) -> None:
    # git >= 2.32 does not follow a .gitattributes link and warns; the shadow's own
    # attributes decide every read here, so the warning must not refuse the run.
    g = GitRepo.init(tmp_path / "clone", {"a.py": "a = 1\n", "attrs": "*.py text\n", "sub/b.py": "b = 1\n"})
    os.symlink("attrs", g.path / ".gitattributes")
    base = g.commit("a committed link")
    g.write("a.py", "a = 2\n")
    os.symlink("../attrs", g.path / "sub" / ".gitattributes")  # the agent's new link
    patch = io.BytesIO()
    touched, files = context_facts(g.path, base, patch)
    assert touched == {"a.py", "sub/.gitattributes"}
    assert {".gitattributes", "sub/.gitattributes", "a.py", "sub/b.py"} <= files
    text = patch.getvalue().decode()
    assert "+a = 2" in text and "new file mode 120000" in text

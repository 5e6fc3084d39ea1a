"""``trysquare.git.changes``: touched and files, checked against git itself.

Expectations come from plain ``git`` calls made here (the oracle) or are written
by hand; never from trysquare's own output.
"""

from __future__ import annotations

import hashlib
import io
import os
import random
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from trysquare.errors import RepoError
from trysquare.git.changes import changed_files, touched_and_files, working_files
from trysquare.git.dotgit import is_git_repo
from trysquare.git.etalon import materialise_etalon
from trysquare.git.patch import context_facts, diff_patch
from trysquare.git.refs import resolve_commit
from trysquare.git.suite_copy import copy_tree
from trysquare.testing import GitRepo

from tests.core.git.oracle import (
    BASE_FILES,
    check_against_git,
    chunk_paths,
    oracle_files,
    oracle_touched,
    plain_git,
    z_paths,
)

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


def test_awkward_paths(g: GitRepo) -> None:
    names = [
        "with space.txt", "unicodé/naïve.py", "tab\there.txt", "new\nline.txt",
        'quote"d.txt', "back\\slash.txt", "-dash.txt", ":colon.txt", "*star?.txt",
        # A name holding " b/" cannot split a "diff --git a/<p> b/<p>" header anywhere else.
        "spoof b/spoof b/x.txt", "spoof b/x.txt",
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
    assert files == expected | set(BASE_FILES) | {
        ".gitignore",
        "src/.gitignore",
        "src/pkg/.gitignore",
    }
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


def test_a_gitattributes_link_is_read_as_a_file_of_the_tree_not_as_a_refusal(
    tmp_path: Path,
) -> None:
    # git >= 2.32 does not follow a .gitattributes link and warns; the shadow's own
    # attributes decide every read here, so the warning must not refuse the run.
    g = GitRepo.init(
        tmp_path / "clone", {"a.py": "a = 1\n", "attrs": "*.py text\n", "sub/b.py": "b = 1\n"}
    )
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

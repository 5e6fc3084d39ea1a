"""``trysquare.git.patch``: diff.patch, applied to the base it reproduces the tree.

Expectations come from plain ``git`` calls made here (the oracle) or are written
by hand; never from trysquare's own output.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from trysquare.git.patch import diff_patch
from trysquare.testing import GitRepo

from tests.core.git.oracle import BASE_FILES, chunk_paths, oracle_files, plain_git, tree_state

# --- diff.patch --------------------------------------------------------------------------


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
        check=False,
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
            check=False,
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

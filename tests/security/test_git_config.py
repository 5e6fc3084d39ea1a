"""The measured clone's ``.git`` is the agent's: nothing in it runs or changes what we read.

Each test builds a clone in which the agent did the same work as in a clean clone
(same base commit, same files), then plants one thing in the hostile clone's
``.git`` or work tree: a program named by config, an index flag, an exclude file,
a replace ref. The planted program writes a marker when it runs; the test asserts
it never ran and that every fact trysquare reads (touched, files, diff.patch, the
clone picture, the etalon) equals the clean clone's.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from trysquare.git.changes import changed_files, touched_and_files, working_files, worktree_status
from trysquare.git.etalon import materialise_etalon
from trysquare.git.patch import diff_patch
from trysquare.git.refs import resolve_commit
from trysquare.git.suite_copy import copy_tree
from trysquare.testing import GitRepo

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare.git.shadow", "trysquare.git.running")


BASE = {
    "counter.py": "def count():\n    return 1\n",
    "tests/test_counter.py": "from counter import count\n\ndef test():\n    assert count() == 1\n",
    "README.md": "# counter\n",
}


def agent_work(g: GitRepo) -> None:
    """What the agent did, identically in both clones."""
    g.write("counter.py", "def count():\n    return 2\n")
    g.write("tests/test_counter.py", "def test():\n    assert True\n")  # a test that always passes
    g.write("evil.py", "print('out of scope')\n")


class Pair:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.clean = GitRepo.init(tmp_path / "clean", BASE)
        self.base = self.clean.head()
        self.clean.tag("etalon-v1")
        subprocess.run(
            ["git", "clone", "-q", str(self.clean.path), str(tmp_path / "hostile")],
            check=True, capture_output=True,
        )  # fmt: skip
        self.hostile = GitRepo(tmp_path / "hostile")
        self.hostile.git("config", "commit.gpgsign", "false")
        self.marker = tmp_path / "ran"
        self.script = tmp_path / "evil.sh"
        # Passes its input through (as a filter must), and leaves a mark.
        self.script.write_text(f"#!/bin/sh\necho \"$0 $*\" >> '{self.marker}'\ncat\n")
        self.script.chmod(0o755)
        agent_work(self.clean)
        agent_work(self.hostile)

    def config(self, *pairs: str) -> None:
        for pair in pairs:
            key, _, value = pair.partition("=")
            self.hostile.git("config", key, value)

    def facts(self, g: GitRepo) -> tuple[object, ...]:
        touched, files = touched_and_files(g.path, self.base)
        return (
            sorted(touched),
            sorted(files),
            diff_patch(g.path, self.base),
            sorted(changed_files(g.path, "etalon-v1")),
            sorted(working_files(g.path)),
            sorted(worktree_status(g.path).items()),
            resolve_commit(g.path, "etalon-v1"),
        )

    def check(self) -> None:
        hostile = self.facts(self.hostile)
        etalon = materialise_etalon(self.hostile.path, "etalon-v1", self.tmp / "etalons")
        copy = copy_tree(self.hostile.path, Path(tempfile.mkdtemp(dir=self.tmp)) / "copy")
        assert not self.marker.exists(), self.marker.read_text()
        assert hostile == self.facts(self.clean)
        assert {"counter.py", "evil.py", "tests/test_counter.py"} <= set(hostile[0])
        assert (etalon / "counter.py").read_text() == BASE["counter.py"]
        assert (copy / "tests/test_counter.py").read_text() == "def test():\n    assert True\n"
        assert not self.marker.exists(), self.marker.read_text()


@pytest.fixture
def pair(tmp_path: Path) -> Pair:
    return Pair(tmp_path)


def test_filter_clean_via_info_attributes(pair: Pair) -> None:
    (pair.hostile.path / ".git/info/attributes").write_text("* filter=fix\n")
    pair.config(f"filter.fix.clean={pair.script}", "filter.fix.required=true")
    pair.check()


def test_filter_smudge_via_info_attributes(pair: Pair) -> None:
    (pair.hostile.path / ".git/info/attributes").write_text("* filter=fix\n")
    pair.config(f"filter.fix.smudge={pair.script}", f"filter.fix.clean={pair.script}")
    pair.check()


def test_filter_process_via_gitattributes_in_the_work_tree(pair: Pair) -> None:
    pair.hostile.write(".gitattributes", "* filter=fix\n")
    pair.clean.write(".gitattributes", "* filter=fix\n")
    pair.config(f"filter.fix.process={pair.script}", "filter.fix.required=true")
    pair.check()


def test_filter_clean_via_gitattributes_committed_by_the_agent(pair: Pair) -> None:
    for g in (pair.hostile, pair.clean):
        g.write(".gitattributes", "*.py filter=fix\n")
    pair.hostile.commit("agent: attributes")  # the agent's commit, after base
    pair.clean.commit("the same work, committed")
    pair.config(f"filter.fix.clean={pair.script}")
    pair.check()


def test_diff_textconv(pair: Pair) -> None:
    (pair.hostile.path / ".git/info/attributes").write_text("* diff=conv\n")
    pair.config(f"diff.conv.textconv={pair.script}")
    pair.check()


def test_diff_command(pair: Pair) -> None:
    (pair.hostile.path / ".git/info/attributes").write_text("* diff=conv\n")
    pair.config(f"diff.conv.command={pair.script}")
    pair.check()


def test_diff_external(pair: Pair) -> None:
    pair.config(f"diff.external={pair.script}")
    pair.check()


def test_core_fsmonitor(pair: Pair) -> None:
    pair.config(f"core.fsmonitor={pair.script}")
    pair.check()


def test_core_pager(pair: Pair) -> None:
    pair.config(f"core.pager={pair.script}", f"pager.status={pair.script}")
    pair.check()


def test_core_hookspath_and_hooks(pair: Pair) -> None:
    hooks = pair.tmp / "hooks"
    hooks.mkdir()
    for name in ("post-index-change", "reference-transaction", "post-checkout"):
        for folder in (hooks, pair.hostile.path / ".git/hooks"):
            (folder / name).write_text(f"#!/bin/sh\ntouch '{pair.marker}'\n")
            (folder / name).chmod(0o755)
    pair.check()
    pair.config(f"core.hooksPath={hooks}")
    pair.check()


def test_include_path(pair: Pair) -> None:
    included = pair.tmp / "included.config"
    included.write_text(
        f"[core]\n\tfsmonitor = {pair.script}\n[diff]\n\texternal = {pair.script}\n"
    )
    pair.config(f"include.path={included}")
    pair.check()


def test_include_path_to_a_fifo_does_not_hang(pair: Pair) -> None:
    fifo = pair.tmp / "fifo"
    os.mkfifo(fifo)
    pair.config(f"include.path={fifo}")
    pair.check()  # a git reading the clone's config would block here forever


def test_core_excludes_file(pair: Pair) -> None:
    hide = pair.tmp / "hide"
    hide.write_text("evil.py\n")
    pair.config(f"core.excludesFile={hide}")
    pair.check()


def test_info_exclude(pair: Pair) -> None:
    (pair.hostile.path / ".git/info/exclude").write_text("evil.py\n")
    pair.check()


def test_assume_unchanged(pair: Pair) -> None:
    pair.hostile.git("update-index", "--assume-unchanged", "tests/test_counter.py")
    pair.check()


def test_skip_worktree(pair: Pair) -> None:
    pair.hostile.git("update-index", "--skip-worktree", "tests/test_counter.py")
    pair.check()


def test_replace_base_with_the_agents_commit(pair: Pair) -> None:
    pair.hostile.commit("agent: everything")
    pair.clean.commit("the same work, committed")
    pair.hostile.git("replace", pair.base, "HEAD")
    pair.check()


def test_grafts_hide_the_agents_commit(pair: Pair) -> None:
    # info/grafts giving the agent's commit no parent: history reads differently,
    # what the files are against base must not.
    head = pair.hostile.commit("agent: everything")
    pair.clean.commit("the same work, committed")
    (pair.hostile.path / ".git/info/grafts").write_text(f"{head}\n")
    pair.check()


def test_forged_index(pair: Pair) -> None:
    # The index claims the agent's test file is the base blob, with stat info that
    # matches the file on disk: git believes it unchanged without reading it.
    g = pair.hostile
    past = 1_000_000_000  # well before the index is written: no racy-git re-read
    os.utime(g.path / "tests/test_counter.py", (past, past))
    g.stage("tests/test_counter.py")
    base_blob = g.git("rev-parse", f"{pair.base}:tests/test_counter.py").strip()
    forge_index_entry(g.path / ".git/index", b"tests/test_counter.py", bytes.fromhex(base_blob))
    assert "tests/test_counter.py" not in g.git("status", "--porcelain")
    pair.check()


def test_gitignore_edited_to_hide_a_file(pair: Pair) -> None:
    pair.hostile.ignore("evil.py")
    pair.clean.ignore("evil.py")  # the edit itself is the agent's work, seen in both
    touched, files = touched_and_files(pair.hostile.path, pair.base)
    assert "evil.py" in touched and ".gitignore" in touched and "evil.py" in files
    pair.check()


def forge_index_entry(index: Path, name: bytes, object_id: bytes) -> None:
    """Overwrite one entry's object id in a version-2 index, checksum redone."""
    data = bytearray(index.read_bytes())
    assert data[:4] == b"DIRC" and int.from_bytes(data[4:8], "big") == 2
    count = int.from_bytes(data[8:12], "big")
    at = 12
    for _ in range(count):
        flags = int.from_bytes(data[at + 60 : at + 62], "big")
        length = flags & 0xFFF
        entry_name = bytes(data[at + 62 : at + 62 + length])
        if entry_name == name:
            data[at + 40 : at + 60] = object_id
        size = 62 + length
        at += size + (8 - size % 8)  # NUL padding to a multiple of 8, at least one
    data[-20:] = hashlib.sha1(bytes(data[:-20])).digest()
    index.write_bytes(bytes(data))

"""Scratch folders (``api.scratch_folder``): empty and private for each task, reused only
when that cannot let one task's leftovers or processes reach the next."""

from __future__ import annotations

import os
import stat
import sys
import threading
from pathlib import Path

import pytest
from trysquare import _scratch
from trysquare.api import scratch_folder

pytestmark = pytest.mark.fast

needs_linux = pytest.mark.skipif(
    sys.platform != "linux", reason="folders are reused where strays are ended: Linux"
)


@pytest.fixture(autouse=True)
def _own_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_scratch, "_free", {})
    monkeypatch.delenv("TRYSQUARE_SANDBOX", raising=False)


def _leave_a_mess(folder: Path) -> None:
    (folder / "out.txt").write_text("x")
    locked = folder / "locked" / "deep"
    locked.mkdir(parents=True)
    (locked / "f").write_text("y")
    locked.chmod(0o500)  # read-only: its file can only go once it is opened up
    (folder / "link").symlink_to("/etc/passwd")


@needs_linux
def test_a_folder_is_emptied_and_serves_the_next_task() -> None:
    with scratch_folder("t-") as first:
        folder = Path(first)
        assert list(folder.iterdir()) == [] and stat.S_IMODE(folder.stat().st_mode) == 0o700
        _leave_a_mess(folder)
    with scratch_folder("t-") as second:
        assert second == first and list(Path(second).iterdir()) == []
    _scratch.remove_kept()
    assert not Path(first).exists()


@needs_linux
def test_a_folder_opened_up_or_replaced_by_its_task_is_removed_not_reused(tmp_path: Path) -> None:
    with scratch_folder("t-") as first:
        os.chmod(first, 0o777)
    assert not Path(first).exists()
    with scratch_folder("t-") as second:
        os.rmdir(second)
        os.symlink(tmp_path, second)  # the agent's clone, say: never handed to another task
    with scratch_folder("t-") as third:
        assert third != second and not Path(third).is_symlink()
    assert not os.path.lexists(second) and tmp_path.is_dir()  # the link went, not what it named


def test_no_folder_is_reused_where_strays_may_outlive_their_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TRYSQUARE_SANDBOX", "off")
    with scratch_folder("t-") as first:
        Path(first, "out.txt").write_text("x")
    assert not Path(first).exists()
    with scratch_folder("t-") as second:
        assert second != first
    assert not Path(second).exists()


def test_remove_tree_survives_a_tree_deeper_than_path_max_shut_folders_and_links(
    tmp_path: Path,
) -> None:
    """What the agent's code may leave in its scratch copy: 5000 nested folders (past
    PATH_MAX and the recursion limit), folders it shut (mode 0), a link to a folder outside."""
    from trysquare._scratch import remove_tree

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept.txt").write_text("kept")
    top = tmp_path / "copy"
    top.mkdir()
    (top / "out").symlink_to(outside)
    fd = os.open(top, os.O_RDONLY)
    try:
        for _ in range(5000):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.mkdir("shut", dir_fd=fd)
        (Path(f"/proc/self/fd/{fd}") / "shut" / "f").write_text("x")
        os.chmod("shut", 0, dir_fd=fd)
    finally:
        os.close(fd)
    remove_tree(str(top))
    assert not top.exists() and (outside / "kept.txt").read_text() == "kept"


@needs_linux
def test_a_folder_its_task_left_empty_is_listed_once_before_reuse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with scratch_folder("t-") as first:
        pass
    listed: list[object] = []
    scandir = os.scandir

    def counted(path: object) -> object:
        listed.append(path)
        return scandir(path)  # type: ignore[call-overload]

    monkeypatch.setattr(os, "scandir", counted)
    with scratch_folder("t-") as second:
        assert second == first
    monkeypatch.setattr(os, "scandir", scandir)
    assert listed == [first]  # nothing left: no second look after removing nothing
    with scratch_folder("t-") as third:
        assert third == first
    _scratch.remove_kept()


@needs_linux
def test_a_workers_folder_is_emptied_once_its_next_child_started_and_never_handed_out_before(
    tmp_path: Path,
) -> None:
    """Emptying a folder is not on the way from one validator's exit to the next one's start:
    a worker's next task gets another folder, and the first is emptied once that task's child
    has started, then serves the task after it."""
    from trysquare import _start_first
    from trysquare._process import run_process

    seen: dict[str, object] = {}

    def worker() -> None:
        _start_first.worker_thread()
        try:
            with scratch_folder("t-") as first:
                run_process(["true"], cwd=first, timeout=30)
                Path(first, "left.txt").write_text("x")
            seen["first"] = first
            seen["left until the next start"] = sorted(os.listdir(first))
            with scratch_folder("t-") as second:
                seen["second"] = second
                run_process(["true"], cwd=second, timeout=30)
                seen["left once it started"] = sorted(os.listdir(first))
            with scratch_folder("t-") as third:
                seen["third"] = third
                seen["third holds"] = sorted(os.listdir(third))
        finally:
            _start_first.child_started()  # as a pool's worker ends: what it put off goes
            _start_first.worker_ended()

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen["left until the next start"] == ["left.txt"]
    assert seen["second"] != seen["first"]
    assert seen["left once it started"] == []
    assert seen["third"] == seen["first"] and seen["third holds"] == []
    assert not _start_first._between
    _scratch.remove_kept()
    assert not Path(str(seen["first"])).exists() and not Path(str(seen["second"])).exists()


@needs_linux
def test_a_folder_whose_leftovers_cannot_go_is_never_handed_out_and_tried_again_at_exit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Put off, emptying may run after the task's result went: a folder that cannot be
    emptied raises into no other task; it is never handed out, and is tried again at exit."""
    monkeypatch.setattr(_scratch, "_stuck", [])
    real_remove = _scratch._remove

    def refused(path: str) -> None:
        raise PermissionError(13, "Permission denied", path)

    with scratch_folder("t-") as first:
        Path(first, "left.txt").write_text("x")
        monkeypatch.setattr(_scratch, "_remove", refused)
    with scratch_folder("t-") as second:
        assert second != first
    monkeypatch.setattr(_scratch, "_remove", real_remove)
    assert _scratch._stuck == [first]
    _scratch.remove_kept()
    assert not Path(first).exists() and _scratch._stuck == []


def test_opening_up_a_folder_never_changes_what_a_link_put_in_its_place_leads_to(
    tmp_path: Path,
) -> None:
    """remove_tree looked at a shut folder, and the agent (a process of its still alive, or
    another jail holding a handle) puts a link to a folder of the machine in its place before
    the folder is opened up: the machine's folder keeps its mode."""
    machine = tmp_path / "machine"
    machine.mkdir(mode=0o500)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "shut").symlink_to(machine)  # a folder a moment ago, mode 0o000
    held = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _scratch._open_up("shut", stat.S_IFDIR, held)
    finally:
        os.close(held)
    assert stat.S_IMODE(machine.stat().st_mode) == 0o500
    machine.chmod(0o700)

"""``trysquare._start_first``: background work waits while a worker starts its next child.

What is shown: a waiting thread is held while a worker is between two children and freed the
moment the child started; the wait is bounded; a real child start clears the worker's mark;
and the local pool records a result only once the next child has started (or the bound ran
out), never before.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest
from trysquare import _start_first, execute, executors
from trysquare._process import run_process

pytestmark = pytest.mark.fast


def _waited_in_background() -> tuple[threading.Thread, list[float]]:
    """A thread that calls ``after_starts`` and notes when it returned."""
    returned: list[float] = []

    def wait() -> None:
        _start_first.after_starts()
        returned.append(time.monotonic())

    return threading.Thread(target=wait), returned


def test_background_work_waits_until_the_worker_started_its_child(monkeypatch) -> None:
    monkeypatch.setattr(_start_first, "WAIT_AT_MOST", 30.0)
    marked = threading.Event()
    start_now = threading.Event()

    def worker() -> None:
        _start_first.between_children()
        marked.set()
        start_now.wait(30)
        _start_first.child_started()

    working = threading.Thread(target=worker)
    working.start()
    assert marked.wait(30)
    waiting, returned = _waited_in_background()
    waiting.start()
    waiting.join(0.3)
    assert returned == []  # held while the worker is between children
    started_at = time.monotonic()
    start_now.set()
    waiting.join(30)
    working.join(30)
    assert len(returned) == 1 and returned[0] >= started_at  # freed by the start, not the bound
    assert not _start_first._between


def test_the_wait_is_bounded_and_nothing_waits_when_no_worker_is_between(monkeypatch) -> None:
    monkeypatch.setattr(_start_first, "WAIT_AT_MOST", 0.2)
    began = time.monotonic()
    _start_first.after_starts()
    assert time.monotonic() - began < 0.1  # nobody between children: no wait

    _start_first.between_children()  # this thread, and it never starts a child
    try:
        waiting, returned = _waited_in_background()
        began = time.monotonic()
        waiting.start()
        waiting.join(30)
        assert returned and 0.2 <= returned[0] - began < 10
    finally:
        _start_first.child_started()
    assert not _start_first._between


def test_a_real_child_start_clears_the_mark(tmp_path) -> None:
    _start_first.between_children()
    done = run_process([sys.executable, "-c", "pass"], cwd=tmp_path, timeout=60)
    assert done.returncode == 0
    assert not _start_first._between


class _ChildTask(str):
    """A fake task whose validation starts its validator as a child (the script mode's)."""

    task = SimpleNamespace(validation=SimpleNamespace(starts_a_child=True))


@pytest.mark.parametrize("bound", [30.0, 0.0])
def test_the_pool_records_a_result_once_the_next_child_started(monkeypatch, bound) -> None:
    # --jobs 1: t0's result is handed over; its recording must wait for t1's child, which
    # starts 0.3 s into t1's task (a slow jail, say), not run beside the start. With no bound
    # on the recording's wait (0.0), only the hand-over put off until that start holds it.
    monkeypatch.setattr(_start_first, "WAIT_AT_MOST", bound)
    child_of: dict[str, float] = {}
    recorded_at: dict[str, float] = {}

    def evaluate_one(task: str, *, interrupted: Any) -> Any:
        if task == "t1":
            time.sleep(0.3)
        child_of[task] = time.monotonic()
        _start_first.child_started()  # what run_process says once its child is started
        return SimpleNamespace(task=task, outcome=SimpleNamespace(state="valid"))

    def record_one(evaluated: Any) -> tuple[str, dict[str, str]]:
        recorded_at[evaluated.task] = time.monotonic()
        return evaluated.task, {}

    monkeypatch.setattr(execute, "evaluate_task", evaluate_one)
    monkeypatch.setattr(execute, "record_task", record_one)
    pool = executors.get("local", {}, jobs=1)
    tasks = [_ChildTask("t0"), _ChildTask("t1")]
    done = [task for task, _ in pool.run(tasks, should_stop=lambda: False)]
    assert done == ["t0", "t1"]
    assert recorded_at["t0"] >= child_of["t1"]
    assert not _start_first._between  # no worker left marked once the pool is done


def test_taking_a_built_task_tells_the_builder_of_room_only_once_the_child_started(
    monkeypatch,
) -> None:
    # Taking an entry while waiting for it wakes the builder waiting for room; woken while the
    # worker is between two children, it takes the interpreter from the start. The room is
    # told after the start.
    from trysquare import _planned_tasks
    from trysquare._planned_tasks import built_ahead

    events: list[str] = []

    class Watched(_planned_tasks._Waiting):
        def __init__(self, size: int) -> None:
            super().__init__(size)
            told = self.room.notify

            def notify(n: int = 1) -> None:
                events.append("room told")
                told(n)

            self.room.notify = notify  # type: ignore[method-assign]

    monkeypatch.setattr(_planned_tasks, "_Waiting", Watched)
    built = threading.Event()

    def items() -> Any:
        yield "t0"
        built.set()  # the builder is past t0 and waits for room for t1
        yield "t1"

    closing = threading.Event()
    taken = built_ahead(items(), 1, closing)
    assert built.wait(30)
    _start_first.between_children()
    try:
        assert next(taken) == "t0"
        events.append("child started")
    finally:
        _start_first.child_started()
    assert next(taken) == "t1"
    closing.set()
    assert events[:2] == ["child started", "room told"]


def test_a_result_goes_before_a_validation_that_starts_no_child(monkeypatch) -> None:
    # A judge starts no child: t0's result must not wait for t1's request (paid, slow).
    monkeypatch.setattr(_start_first, "WAIT_AT_MOST", 30.0)
    recorded = threading.Event()
    seen_recorded: list[bool] = []

    def evaluate_one(task: str, *, interrupted: Any) -> Any:
        if task == "t1":
            seen_recorded.append(recorded.wait(30))
        else:
            _start_first.child_started()  # t0 started its child
        return SimpleNamespace(task=task, outcome=SimpleNamespace(state="valid"))

    def record_one(evaluated: Any) -> tuple[str, dict[str, str]]:
        recorded.set()
        return evaluated.task, {}

    monkeypatch.setattr(execute, "evaluate_task", evaluate_one)
    monkeypatch.setattr(execute, "record_task", record_one)
    pool = executors.get("local", {}, jobs=1)
    done = [task for task, _ in pool.run([_ChildTask("t0"), "t1"], should_stop=lambda: False)]
    assert done == ["t0", "t1"]
    assert seen_recorded == [True]


def test_results_put_off_by_other_workers_go_before_an_invalid_one(monkeypatch) -> None:
    # --jobs 2: v is valid and its worker goes on to w (its hand-over put off until w's child
    # starts); i, on the other worker, is invalid. -x stops reading at i: v, finished first,
    # must be handed over before it, not dropped behind it.
    monkeypatch.setattr(_start_first, "WAIT_AT_MOST", 0.0)
    v_done = threading.Event()
    i_taken = threading.Event()
    i_recorded = threading.Event()
    recorded: list[str] = []

    def evaluate_one(task: str, *, interrupted: Any) -> Any:
        if task == "v":
            assert i_taken.wait(30)  # i is on the other worker
            v_done.set()
        elif task == "i":
            i_taken.set()
            assert v_done.wait(30)
        else:  # w: its child starts only once i is recorded (or the bound ran out)
            i_recorded.wait(5)
            _start_first.child_started()
        state = "invalid" if task == "i" else "valid"
        return SimpleNamespace(task=task, outcome=SimpleNamespace(state=state))

    def record_one(evaluated: Any) -> tuple[str, dict[str, str]]:
        recorded.append(evaluated.task)
        if evaluated.task == "i":
            i_recorded.set()
        return evaluated.task, {}

    monkeypatch.setattr(execute, "evaluate_task", evaluate_one)
    monkeypatch.setattr(execute, "record_task", record_one)
    pool = executors.get("local", {}, jobs=2)
    tasks = [_ChildTask("v"), _ChildTask("i"), _ChildTask("w")]
    for _ in pool.run(tasks, should_stop=lambda: False):
        pass
    assert recorded.index("v") < recorded.index("i")


def test_a_worker_is_between_children_from_its_childs_exit_until_its_next_start(tmp_path) -> None:
    """A worker's child exited: what it puts off from then on waits for its next start, also
    past the end of that task; after a task that started no child it goes at once."""
    done: list[str] = []
    seen: dict[str, object] = {}

    def worker() -> None:
        _start_first.worker_thread()
        try:
            run_process([sys.executable, "-c", "pass"], cwd=tmp_path, timeout=30)
            seen["between after the exit"] = threading.get_ident() in _start_first._between
            _start_first.when_started(lambda: done.append("after the exit"))
            _start_first.task_ended()  # its task started a child: nothing goes yet
            seen["held past the task"] = list(done)
            run_process([sys.executable, "-c", "pass"], cwd=tmp_path, timeout=30)
            seen["once the next started"] = list(done)
            _start_first.task_ended()
            _start_first.between_children(lambda: done.append("handed over"))
            _start_first.task_ended()  # the next task started none: it goes now
            seen["after a task that started none"] = list(done)
        finally:
            _start_first.child_started()
            _start_first.worker_ended()

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen["between after the exit"] is True
    assert seen["held past the task"] == []
    assert seen["once the next started"] == ["after the exit"]
    assert seen["after a task that started none"] == ["after the exit", "handed over"]
    assert not _start_first._between


def test_a_child_exit_puts_nothing_off_in_a_thread_that_is_no_worker(tmp_path) -> None:
    run_process([sys.executable, "-c", "pass"], cwd=tmp_path, timeout=30)
    assert threading.get_ident() not in _start_first._between
    ran: list[bool] = []
    _start_first.when_started(lambda: ran.append(True))
    assert ran == [True]


def test_nothing_waits_where_every_core_has_a_worker(monkeypatch) -> None:
    # A worker on every core: one or another is between children as often as not, and holding
    # the recording and planning back only made them wait out the bound. With a core left,
    # they wait as before.
    monkeypatch.setattr(_start_first, "WAIT_AT_MOST", 30.0)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(_start_first, "_workers", [2])
    _start_first.between_children()
    try:
        began = time.monotonic()
        waiting, returned = _waited_in_background()
        waiting.start()
        waiting.join(30)
        assert returned and returned[0] - began < 10  # not held: every core has a worker
        monkeypatch.setattr(_start_first, "_workers", [1])
        held, held_returned = _waited_in_background()
        held.start()
        held.join(0.3)
        assert held_returned == []  # a core is left: held while this worker is between
    finally:
        _start_first.child_started()
    held.join(30)
    assert held_returned


def test_the_pool_counts_its_workers_while_they_run(monkeypatch) -> None:
    seen: list[int] = []
    before = _start_first._workers[0]

    def evaluate_one(task: str, *, interrupted: Any) -> Any:
        seen.append(_start_first._workers[0])
        _start_first.child_started()
        return SimpleNamespace(task=task, outcome=SimpleNamespace(state="valid"))

    def record_one(evaluated: Any) -> tuple[str, dict[str, str]]:
        return evaluated.task, {}

    monkeypatch.setattr(execute, "evaluate_task", evaluate_one)
    monkeypatch.setattr(execute, "record_task", record_one)
    pool = executors.get("local", {}, jobs=2)
    done = sorted(
        task
        for task, _ in pool.run([_ChildTask(f"t{n}") for n in range(6)], should_stop=lambda: False)
    )
    assert done == [f"t{n}" for n in range(6)]
    assert seen and all(count >= before + 1 for count in seen)
    assert _start_first._workers[0] == before  # each worker said it ended

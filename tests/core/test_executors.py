"""``trysquare.executors``: choosing where tasks run, and the built-in local pool.

The tasks here are stand-ins (the pool only hands them to ``evaluate_task`` and
``record_task``, the two halves of ``execute_task``), so what is shown is the pool's
own promise: at most ``jobs`` at once, every result yielded, nothing started once a
stop is asked for, and the next validator started while a result is written.
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest
from trysquare import execute, executors
from trysquare.errors import UsageError

pytestmark = pytest.mark.fast


def test_the_local_executor_is_registered_and_an_unknown_one_is_named() -> None:
    assert callable(executors.get("local", {}, jobs=2).run)
    with pytest.raises(UsageError) as refused:
        executors.get("nowhere", {}, jobs=2)
    assert refused.value.message.startswith(
        "--executor nowhere: no installed plugin provides executor 'nowhere'"
    )
    assert "local" in refused.value.message


def test_the_local_executor_takes_no_options() -> None:
    with pytest.raises(
        UsageError, match="--executor-option workers: the local executor takes no options"
    ):
        executors.get("local", {"workers": "2"}, jobs=2)


def fake_tasks(
    monkeypatch: pytest.MonkeyPatch,
    count: int,
    delay: float = 0.05,
    state: str = "valid",
    recording: Any = None,
    delays: dict[str, float] | None = None,
    states: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``count`` stand-in tasks; ``evaluate_task`` records the peak of those running at once,
    ``record_task`` calls ``recording(task)`` first."""
    seen: dict[str, Any] = {"now": 0, "peak": 0, "started": []}
    lock = threading.Lock()

    def evaluate_one(task: Any, *, interrupted: Any) -> Any:
        with lock:
            seen["now"] += 1
            seen["peak"] = max(seen["peak"], seen["now"])
            seen["started"].append(task)
        time.sleep((delays or {}).get(task, delay))
        with lock:
            seen["now"] -= 1
        return SimpleNamespace(
            task=task, outcome=SimpleNamespace(state=(states or {}).get(task, state))
        )

    def record_one(evaluated: Any) -> tuple[Any, dict[str, Any]]:
        if recording is not None:
            recording(evaluated.task)
        return evaluated.task, {"task": evaluated.task}  # what the pool yields, untouched

    monkeypatch.setattr(execute, "evaluate_task", evaluate_one)
    monkeypatch.setattr(execute, "record_task", record_one)
    seen["tasks"] = [f"t{number}" for number in range(count)]
    return seen


def test_the_pool_runs_at_most_jobs_at_once_and_yields_every_result(monkeypatch) -> None:
    seen = fake_tasks(monkeypatch, 7)
    pool = executors.get("local", {}, jobs=3)
    done = list(pool.run(seen["tasks"], should_stop=lambda: False))
    assert sorted(task for task, _ in done) == sorted(seen["tasks"])
    assert all(document == {"task": task} for task, document in done)
    assert 1 < seen["peak"] <= 3


def test_a_stop_starts_nothing_more(monkeypatch) -> None:
    seen = fake_tasks(monkeypatch, 10)
    stop = threading.Event()
    pool = executors.get("local", {}, jobs=2)
    finished = []
    for task, _ in pool.run(seen["tasks"], should_stop=stop.is_set):
        finished.append(task)
        stop.set()
    # What had started finishes (and is yielded); nothing after the stop starts: at most the
    # two first tasks and the two started while their results were written (the stop is
    # asked for at the first result handed over).
    assert len(seen["started"]) <= 4 and len(finished) == len(seen["started"])


@pytest.mark.parametrize("state", ["valid", "invalid"])
def test_the_next_validator_starts_while_a_result_is_written_unless_it_is_invalid(
    monkeypatch, state: str
) -> None:
    # --jobs 1 on two cores: writing a result need not hold the one validator slot. After an
    # invalid outcome nothing starts before it is handed over, so -x can stop first.
    started_meanwhile: list[bool] = []
    started: list[str] = []

    def recording(task: str) -> None:
        if task == "t0":
            deadline = time.monotonic() + 0.5  # t1 starts within milliseconds when it may
            while "t1" not in started and time.monotonic() < deadline:
                time.sleep(0.005)
            started_meanwhile.append("t1" in started)

    seen = fake_tasks(monkeypatch, 2, delay=0.01, state=state, recording=recording)
    started = seen["started"]
    done = list(executors.get("local", {}, jobs=1).run(seen["tasks"], should_stop=lambda: False))
    assert [task for task, _ in done] == ["t0", "t1"] and seen["peak"] == 1
    assert started_meanwhile == [state == "valid"]


def test_no_task_starts_while_an_invalid_result_waits_to_be_handed_over(monkeypatch) -> None:
    # --jobs 2: t0 is invalid and is being written when t1 (valid) ends; t1's thread must not
    # take t2 before t0 is handed over, or -x could not stop it.
    started_meanwhile: list[list[str]] = []
    started: list[str] = []

    def recording(task: str) -> None:
        if task == "t0":
            deadline = time.monotonic() + 30  # t1 starts and ends meanwhile, however loaded
            while "t1" not in started and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.3)  # t1 (0.05 s) is over: its thread could take t2 now, and must not
            started_meanwhile.append(list(started))

    seen = fake_tasks(
        monkeypatch,
        4,
        recording=recording,
        delays={"t0": 0.01, "t1": 0.05},
        states={"t0": "invalid"},
    )
    started = seen["started"]
    done = list(executors.get("local", {}, jobs=2).run(seen["tasks"], should_stop=lambda: False))
    assert started_meanwhile == [["t0", "t1"]]
    assert sorted(task for task, _ in done) == ["t0", "t1", "t2", "t3"]


def test_workers_wait_while_results_pile_up_unrecorded(monkeypatch) -> None:
    # Validators far quicker than the recording thread: without a bound, the workers would run
    # the whole matrix ahead and its results would wait in memory. With one, no more than
    # 2 x jobs results wait, besides one being recorded and one being evaluated per worker.
    recorded: list[str] = []
    ahead: list[int] = []

    def recording(task: str) -> None:
        ahead.append(len(started) - len(recorded))
        time.sleep(0.02)
        recorded.append(task)

    seen = fake_tasks(monkeypatch, 40, delay=0.0005, recording=recording)
    started = seen["started"]
    done = list(executors.get("local", {}, jobs=2).run(seen["tasks"], should_stop=lambda: False))
    assert sorted(task for task, _ in done) == sorted(seen["tasks"])
    assert max(ahead) <= 2 * 2 + 1 + 2, ahead


def test_a_worker_taking_a_task_may_wait_for_another_result_to_be_recorded(monkeypatch) -> None:
    # Taking a task may wait for what another worker ran to be recorded (a suspect of an
    # earlier crash runs alone). Counting that result as waiting to be recorded must not need
    # the taking worker's turn, or neither goes on.
    recorded = threading.Event()
    seen = fake_tasks(monkeypatch, 2, delay=0.05, recording=lambda task: recorded.set())
    waited: list[bool] = []

    def tasks() -> Any:
        yield "t0"
        waited.append(recorded.wait(10))  # taken by the second worker while t0 runs
        yield "t1"

    class Tasks:
        def __iter__(self) -> Any:
            return tasks()

        def __len__(self) -> int:
            return 2

    done = list(executors.get("local", {}, jobs=2).run(Tasks(), should_stop=lambda: False))
    assert waited == [True]
    assert sorted(task for task, _ in done) == seen["tasks"]

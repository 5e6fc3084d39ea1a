"""``trysquare._ahead`` and the local pool: the next task is prepared while a child runs, and
started only at its go.

What is shown, with stand-in tasks whose evaluation takes its gate as ``run_process`` does (and
with a real confined start): a task is prepared while another runs, yet no more than ``jobs``
run at once; tasks go in the order taken; after an invalid result nothing goes, and what was
prepared is given up (``NotStarted``); a task that starts no child (a judge's) is not prepared
ahead; and a confined start whose go never comes leaves no thread, descriptor or child behind.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from trysquare import _ahead, execute, executors
from trysquare._process import run_process
from trysquare.sandbox import Sandbox, sandbox_enabled

pytestmark = pytest.mark.fast

needs_landlock = pytest.mark.skipif(
    sys.platform != "linux" or not sandbox_enabled(), reason="prepared ahead where Landlock is"
)


class _Task(str):
    """A stand-in task; ``child``: its validation starts a child (the script mode's)."""

    child = True

    @property
    def task(self) -> Any:
        return SimpleNamespace(validation=SimpleNamespace(starts_a_child=self.child), context={})


class _NoChild(_Task):
    child = False


def _pool(
    monkeypatch: pytest.MonkeyPatch, states: dict[str, str] | None = None, run_for: float = 0.05
) -> dict[str, Any]:
    """Stand-in evaluation: prepared (its gate taken, as run_process takes it) then, after the
    go, a child 'running' ``run_for`` seconds; what happened is noted."""
    seen: dict[str, Any] = {"now": 0, "peak": 0, "went": [], "prepared_beside": 0, "gave_up": []}
    lock = threading.Lock()

    def evaluate_one(task: _Task, *, interrupted: Any) -> Any:
        gate = _ahead.take()
        with lock:
            if seen["now"]:
                seen["prepared_beside"] += 1  # prepared while another child ran
        if gate is not None:
            try:
                gate.go()
            except _ahead.NotStarted:
                seen["gave_up"].append(task)
                raise
        with lock:
            seen["now"] += 1
            seen["peak"] = max(seen["peak"], seen["now"])
            seen["went"].append(task)
        if gate is not None:
            gate.started()
        time.sleep(run_for)
        with lock:
            seen["now"] -= 1
        state = (states or {}).get(task, "valid")
        return execute.Evaluated(task, SimpleNamespace(state=state), False, run_for)  # type: ignore[arg-type]

    monkeypatch.setattr(execute, "evaluate_task", evaluate_one)
    monkeypatch.setattr(execute, "record_task", lambda evaluated: evaluated.task)
    return seen


@needs_landlock
@pytest.mark.parametrize("jobs", [1, 2])
def test_tasks_are_prepared_beside_a_child_yet_no_more_than_jobs_run(monkeypatch, jobs) -> None:
    seen = _pool(monkeypatch)
    tasks = [_Task(f"t{n}") for n in range(10)]
    done = list(executors.get("local", {}, jobs=jobs).run(tasks, should_stop=lambda: False))
    assert sorted(done) == sorted(tasks)
    assert seen["peak"] == jobs
    assert seen["prepared_beside"] >= 3  # the next task was made ready while one ran
    if jobs == 1:
        assert done == tasks == seen["went"]  # in the order taken, one at a time


@needs_landlock
@pytest.mark.parametrize("jobs", [1, 2])
def test_nothing_goes_after_an_invalid_result_and_what_was_prepared_is_given_up(
    monkeypatch, jobs
) -> None:
    seen = _pool(monkeypatch, states={"t2": "invalid"})
    tasks = [_Task(f"t{n}") for n in range(8)]
    stop = threading.Event()
    done = []
    for evaluated in executors.get("local", {}, jobs=jobs).run(tasks, should_stop=stop.is_set):
        done.append(evaluated)
        if evaluated == "t2":
            stop.set()  # -x
            break
    went = seen["went"]
    # Nothing went after t2's invalid result was known: only what was already running
    # beside it (at two jobs, one task) went after it was taken.
    assert went.index("t2") >= len(went) - jobs, went
    assert seen["gave_up"], seen  # a task was prepared for the go that never came
    assert not set(seen["gave_up"]) & set(went)


@needs_landlock
def test_a_task_that_starts_no_child_waits_for_its_go_before_anything(monkeypatch) -> None:
    seen = _pool(monkeypatch)
    began: list[tuple[str, int]] = []
    real = execute.evaluate_task

    def noted(task: Any, *, interrupted: Any) -> Any:
        began.append((task, seen["now"]))  # how many children ran as it began
        return real(task, interrupted=interrupted)

    monkeypatch.setattr(execute, "evaluate_task", noted)
    tasks = [_NoChild(f"j{n}") for n in range(6)]
    done = list(executors.get("local", {}, jobs=1).run(tasks, should_stop=lambda: False))
    assert done == tasks
    assert [count for _, count in began] == [0] * 6  # never begun beside another


@needs_landlock
def test_a_confined_start_whose_go_never_comes_leaves_nothing(tmp_path: Path) -> None:
    class Never:
        def go(self) -> None:
            raise _ahead.NotStarted

        def started(self) -> None:
            raise AssertionError("nothing started")

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    proof = scratch / "ran"
    # With no gate the same start works; it opens what every start shares once (/dev/null,
    # the device rules), so that what is counted next is the prepared task's alone.
    done = run_process(
        [sys.executable, "-c", f"open({str(proof)!r}, 'w')"],
        cwd=scratch,
        timeout=30,
        sandbox=Sandbox([scratch]),
    )
    assert done.returncode == 0 and proof.exists()
    proof.unlink()
    tasks_before = len(os.listdir("/proc/self/task"))
    fds_before = sorted(os.listdir("/proc/self/fd"))
    with _ahead.gated(Never()), pytest.raises(_ahead.NotStarted):
        run_process(
            [sys.executable, "-c", f"open({str(proof)!r}, 'w')"],
            cwd=scratch,
            timeout=30,
            sandbox=Sandbox([scratch]),
        )
    assert _ahead.take() is None  # the gate was taken once
    deadline = time.monotonic() + 5
    while len(os.listdir("/proc/self/task")) > tasks_before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(os.listdir("/proc/self/task")) == tasks_before  # the confined thread ended
    assert sorted(os.listdir("/proc/self/fd")) == fds_before  # pipes and ruleset closed
    assert not proof.exists()  # no child started


def test_nothing_is_prepared_ahead_where_children_are_not_confined(monkeypatch) -> None:
    # Unconfined, the validator running could write into the next task's scratch folder.
    monkeypatch.setenv("TRYSQUARE_SANDBOX", "off")
    seen = _pool(monkeypatch)
    tasks = [_Task(f"t{n}") for n in range(6)]
    done = list(executors.get("local", {}, jobs=1).run(tasks, should_stop=lambda: False))
    assert done == tasks
    assert seen["prepared_beside"] == 0


class _Flight:
    """What the pool asks of the in-flight markers, noted (a stand-in for InFlight)."""

    def __init__(self) -> None:
        self.noted: list[tuple[str, str]] = []

    def suspect(self, task: Any) -> bool:
        return False

    def taken(self, task: Any) -> None:
        self.noted.append(("taken", task))

    def start(self, task: Any, *, taken: bool = False) -> None:
        self.noted.append(("marked", task))

    def exited(self, run: Any, name: str) -> None:
        self.noted.append(("exited", run))

    def not_started(self, task: Any) -> None:
        self.noted.append(("not started", task))


class _RunTask(_Task):
    @property
    def run(self) -> str:
        return str(self)

    @property
    def validation(self) -> Any:
        return SimpleNamespace(name="v")


class _NoChildRun(_RunTask):
    child = False


@needs_landlock
@pytest.mark.parametrize("exitfirst", [False, True])
def test_without_x_the_next_task_goes_once_the_child_is_gone_not_its_outcome(
    monkeypatch, exitfirst
) -> None:
    from trysquare import _inflight

    flight = _Flight()
    went_at: dict[str, float] = {}
    outcome_done: dict[str, float] = {}

    def evaluate_one(task: _RunTask, *, interrupted: Any) -> Any:
        gate = _ahead.take()
        assert gate is not None
        gate.go()
        went_at[task] = time.monotonic()
        gate.started()
        time.sleep(0.02)  # the child runs
        gate.ended()  # reaped, strays ended, output read
        time.sleep(0.2)  # its outcome worked out, slowly (longer than the next child runs)
        outcome_done[task] = time.monotonic()
        return execute.Evaluated(task, SimpleNamespace(state="valid"), False, 0.2)  # type: ignore[arg-type]

    monkeypatch.setattr(execute, "evaluate_task", evaluate_one)
    monkeypatch.setattr(execute, "record_task", lambda evaluated: evaluated.task)
    tasks = [_RunTask(f"t{n}") for n in range(4)]
    deferred = _inflight.Deferred(
        tasks, flight, alone=True, stop=lambda: False, stops_at_first_invalid=exitfirst
    )  # type: ignore[arg-type]
    done = list(executors.get("local", {}, jobs=1).run(deferred, should_stop=lambda: False))
    assert done == tasks  # in the order they went, whichever outcome was worked out first
    overlapped = [went_at[b] < outcome_done[a] for a, b in itertools.pairwise(tasks)]
    # Without -x the next child starts while the outcome is worked out; with -x only after.
    assert overlapped == [not exitfirst] * 3
    # Each marker goes (exited) before the next one is written.
    events = [event for event in flight.noted if event[0] in {"marked", "exited"}]
    assert events == [(kind, t) for t in tasks for kind in ("marked", "exited")]


@needs_landlock
@pytest.mark.parametrize("jobs", [1, 2])
def test_results_of_slots_given_up_early_come_in_order_whatever_their_outcome(
    monkeypatch, jobs
) -> None:
    # Valid and invalid outcomes, some worked out slowly, at one and two jobs: every result
    # comes (nothing waits for ever on another's hand-over), each after those gone before it.
    from trysquare import _inflight

    slow = {"t1", "t4", "t5"}
    states = {"t2": "invalid", "t5": "invalid", "t6": "invalid"}

    def evaluate_one(task: _RunTask, *, interrupted: Any) -> Any:
        gate = _ahead.take()
        if gate is not None:
            gate.go()
            gate.started()
        time.sleep(0.01)
        if gate is not None:
            gate.ended()
        time.sleep(0.1 if task in slow else 0.0)
        state = states.get(task, "valid")
        return execute.Evaluated(task, SimpleNamespace(state=state), False, 0.1)  # type: ignore[arg-type]

    monkeypatch.setattr(execute, "evaluate_task", evaluate_one)
    monkeypatch.setattr(execute, "record_task", lambda evaluated: evaluated.task)
    # Every third task starts no child: its result waits for the next start (put off).
    tasks = [(_NoChildRun if n % 3 == 2 else _RunTask)(f"t{n}") for n in range(12)]
    deferred = _inflight.Deferred(
        tasks, _Flight(), alone=True, stop=lambda: False, stops_at_first_invalid=False
    )  # type: ignore[arg-type]
    done: list[str] = []

    def consume() -> None:
        done.extend(executors.get("local", {}, jobs=jobs).run(deferred, should_stop=lambda: False))

    reading = threading.Thread(target=consume, daemon=True)
    reading.start()
    reading.join(60)
    assert not reading.is_alive(), f"stuck after {done}"
    assert sorted(done) == sorted(tasks)
    if jobs == 1:
        assert done == tasks

"""Planning beside the first tasks: only where nothing a validator runs can write
into a clone that is not pictured yet (Landlock enforced, the local pool, modes that
confine what they start); everywhere else, every clone is pictured first."""

from __future__ import annotations

import io
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from trysquare import _planned_tasks, _pool, executors, planning, runner
from trysquare.modes import Validation
from trysquare.runner import Summary, ValidateOptions, validate
from trysquare.runs import discover
from trysquare.sandbox import SWITCH, sandbox_enabled
from trysquare.scenario import load_scenario
from trysquare.testing import build_matrix

from tests.helpers import threads_started, write_scenario, write_script

pytestmark = pytest.mark.fast

SCORE = """\
import json, sys
print(json.dumps({"metrics": {"changed": True}, "reasons": {}}))
"""
RUNS = [(f"r{n}", "c", n) for n in range(1, 5)]


def script_matrix(
    tmp_path: Path, source: str, runs: list[tuple[str, str, int]]
) -> tuple[Path, Path]:
    """One script validator ``score`` running ``source``, over ``runs``: scenario, experiment."""
    folder = tmp_path / "scn"
    write_script(folder, "score.py", source)
    scenario = write_scenario(
        folder,
        """
        [[validation]]
        name = "score"
        mode = "script"
        command = "score.py"
        metrics = ["changed"]
    """,
    )
    experiment = tmp_path / "exp"
    build_matrix(experiment, runs, base={"a.py": "a = 1\n"}, changes={"a.py": "a = 2\n"})
    return scenario, experiment


@pytest.fixture
def matrix(tmp_path: Path) -> tuple[Path, Path]:
    return script_matrix(tmp_path, SCORE, RUNS)


def validate_all(scenario: Path, experiment: Path, *, jobs: int) -> Summary:
    """``validate`` of every run of ``experiment``, no progress, its lines kept from the output."""
    return validate(
        load_scenario(scenario),
        discover([experiment]),
        ValidateOptions(progress=False, jobs=jobs),
        out=io.StringIO(),
    )


def first_result_before_last_plan(
    scenario: Path, experiment: Path, monkeypatch: pytest.MonkeyPatch, *, patience: float
) -> bool:
    """Validate, holding the last run's planning until the third run's result is written
    (at most ``patience`` seconds); whether that result came first. (Every result is
    recorded as it comes: none waits for the total its progress line needs.)"""
    first = experiment / "runs" / "r3" / "validation" / "score.json"
    came_first: list[bool] = []
    plan_run = planning._plan_run

    def held(scenario_, run, *args, **kwargs):  # type: ignore[no-untyped-def]
        if run.id == "r4":
            deadline = time.monotonic() + patience
            while not first.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            came_first.append(first.exists())
        return plan_run(scenario_, run, *args, **kwargs)

    monkeypatch.setattr(planning, "_plan_run", held)
    out = io.StringIO()
    summary = validate(
        load_scenario(scenario),
        discover([experiment]),
        ValidateOptions(progress=False, jobs=1),
        out=out,
    )
    assert summary.exit_code == 0 and summary.executed == 4
    # The lines are the same either way: their total is known when they are printed.
    counted = [line.split()[0] for line in out.getvalue().splitlines() if line.startswith("[")]
    assert counted == ["[1/4]", "[2/4]", "[3/4]", "[4/4]"]
    return came_first == [True]


@pytest.mark.skipif(not sandbox_enabled(), reason="needs Landlock: only then may tasks start early")
def test_under_landlock_the_first_tasks_run_while_later_runs_are_planned(
    matrix, monkeypatch
) -> None:
    assert first_result_before_last_plan(*matrix, monkeypatch, patience=30)


def test_without_the_sandbox_every_clone_is_pictured_before_the_first_task(
    matrix, monkeypatch
) -> None:
    monkeypatch.setenv(SWITCH, "off")
    assert not first_result_before_last_plan(*matrix, monkeypatch, patience=1.5)


@attrs.frozen(kw_only=True)
class Unconfined(Validation):
    """A plugin mode that says nothing of what it starts."""


def test_only_modes_that_confine_what_they_start_overlap_planning(matrix) -> None:
    scenario = load_scenario(matrix[0])
    local = executors.get("local", {}, jobs=1)
    confined = list(scenario.validations)
    unconfined = [*confined, Unconfined(mode="x", metrics=("m",), name="x")]
    assert runner._may_overlap_planning(local, confined) is sandbox_enabled()
    assert runner._may_overlap_planning(local, unconfined) is False
    # An executor from a plugin (a cluster's workers) keeps every clone pictured first.
    assert runner._may_overlap_planning(object(), confined) is False


def test_items_built_ahead_come_in_order_and_an_error_where_it_arose() -> None:
    closing = threading.Event()

    def items() -> Iterator[int]:
        yield from range(5)
        raise ValueError("the sixth could not be built")

    taken = _planned_tasks.built_ahead(items(), 2, closing)
    assert [next(taken) for _ in range(5)] == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="sixth"):
        next(taken)


def test_items_built_ahead_stop_being_built_once_closed() -> None:
    closing = threading.Event()
    built: list[int] = []

    def items() -> Iterator[int]:
        for n in range(1000):
            built.append(n)
            yield n

    taken = _planned_tasks.built_ahead(items(), 2, closing)
    assert next(taken) == 0
    closing.set()
    time.sleep(0.3)
    settled = len(built)
    time.sleep(0.2)
    # At most the queue's two and the one waiting to go in were built beyond the one taken.
    assert len(built) == settled <= 4


WAIT_FOR_GO = """\
import json, os, sys, time
context = json.load(open(sys.argv[1]))
if context["cell"] == "last":
    go = os.path.join(os.path.dirname(os.path.dirname(context["repo"])), "..", "go")
    deadline = time.monotonic() + 20
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.01)
print(json.dumps({"metrics": {"changed": True}, "reasons": {}}))
"""


@pytest.mark.skipif(
    not sandbox_enabled(), reason="needs Landlock: only then is a clone checked early"
)
def test_under_landlock_a_run_is_checked_once_its_tasks_are_back_beside_those_still_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario, experiment = script_matrix(
        tmp_path, WAIT_FOR_GO, [("r1", "first", 1), ("r2", "last", 1)]
    )
    go = experiment / "go"  # the last run's validator finishes only once it exists
    checked: list[str] = []
    clone_changes = planning.RunPlan.clone_changes

    def checking(plan, spill, **held):  # type: ignore[no-untyped-def]
        checked.append(plan.run.id)
        if plan.run.id == "r1":
            go.touch()
        return clone_changes(plan, spill, **held)

    monkeypatch.setattr(planning.RunPlan, "clone_changes", checking)
    started = time.monotonic()
    summary = validate_all(scenario, experiment, jobs=2)
    assert summary.exit_code == 0 and checked == ["r1", "r2"]
    assert time.monotonic() - started < 15  # r2's validator was let go by r1's check


@pytest.mark.skipif(
    not sandbox_enabled(), reason="needs Landlock: only then are clones checked early"
)
def test_clones_checked_early_are_checked_by_the_thread_taking_results_back(
    matrix, monkeypatch
) -> None:
    scenario, experiment = matrix
    started = threads_started(monkeypatch)
    checked: list[str] = []
    changes = planning.RunPlan.clone_changes

    def clone_changes(plan, spill, **held):  # type: ignore[no-untyped-def]
        checked.append(threading.current_thread().name)
        return changes(plan, spill, **held)

    monkeypatch.setattr(planning.RunPlan, "clone_changes", clone_changes)
    summary = validate_all(scenario, experiment, jobs=1)
    assert summary.exit_code == 0 and summary.executed == 4
    # Each clone checked as its run came back, where results are taken back: no thread
    # of its own took every run over (four checks, none left to the late ones).
    assert checked == [threading.current_thread().name] * 4
    assert not [name for name in started if "check" in name]


@pytest.mark.skipif(
    not sandbox_enabled(), reason="needs Landlock: only then are clones checked early"
)
def test_a_clone_checked_early_is_held_to_the_picture_its_tasks_were_built_with(
    matrix, monkeypatch
) -> None:
    """Each run's record is read back from the spill once, to build its tasks: the check
    after them compares the clone with the picture held since (not read back again)."""
    from trysquare import _spill

    scenario, experiment = matrix
    loaded: list[int] = []
    real = _spill.Spill.load

    def load(spill, number):  # type: ignore[no-untyped-def]
        loaded.append(number)
        return real(spill, number)

    monkeypatch.setattr(_spill.Spill, "load", load)
    checked: list[object] = []
    changes = planning.RunPlan.clone_changes

    def clone_changes(plan, spill, **held):  # type: ignore[no-untyped-def]
        checked.append(held.get("before"))
        return changes(plan, spill, **held)

    monkeypatch.setattr(planning.RunPlan, "clone_changes", clone_changes)
    summary = validate_all(scenario, experiment, jobs=2)
    assert summary.exit_code == 0 and summary.executed == 4
    assert sorted(loaded) == [0, 1, 2, 3]  # once a run
    assert len(checked) == 4 and all(before is not None for before in checked)


SLOW_SCORE = """\
import json, time
time.sleep(0.1)
print(json.dumps({"metrics": {"changed": True}, "reasons": {}}))
"""
FAILING_SCORE = "import sys\nsys.exit(3)\n"


needs_overlap = pytest.mark.skipif(
    not sandbox_enabled(), reason="needs Landlock: only then is planning overlapped"
)


def validate_once(
    scenario: Path, experiment: Path, out: io.StringIO | None = None, **options: object
) -> runner.Summary:
    """``validate`` with no progress bar and ``options``; its lines go to ``out``."""
    replay = bool(options.get("replay", False))
    return validate(
        load_scenario(scenario),
        discover([experiment], replay=replay),
        ValidateOptions(progress=False, **options),  # type: ignore[arg-type]
        out=io.StringIO() if out is None else out,
    )


def held_back_matrix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, runs: int
) -> tuple[Path, Path]:
    """``runs`` runs scored by ``source``, planning kept at most two runs ahead: scenario,
    experiment."""
    monkeypatch.setattr(_planned_tasks, "PLANNED_AHEAD_AT_MOST", 2)
    return script_matrix(tmp_path, source, [(f"r{n:02d}", "c", n) for n in range(1, runs + 1)])


def results_written_as_each_run_is_planned(
    experiment: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, int]:
    """Each run's id, and how many results were written when its planning began."""
    seen: dict[str, int] = {}
    plan_run = planning._plan_run

    def counted(scenario_, run, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen[run.id] = len(list((experiment / "runs").glob("*/validation/score.json")))
        return plan_run(scenario_, run, *args, **kwargs)

    monkeypatch.setattr(planning, "_plan_run", counted)
    return seen


@needs_overlap
def test_planning_keeps_a_bounded_lead_and_progress_starts_before_the_total_is_known(
    tmp_path, monkeypatch
) -> None:
    # Planning may be only two runs ahead of the tasks taken: a run's clone is pictured
    # shortly before its validator runs and its check after, never minutes before.
    scenario, experiment = held_back_matrix(tmp_path, monkeypatch, SLOW_SCORE, 12)
    first = validate_once(scenario, experiment, jobs=1)
    assert first.exit_code == 0 and first.executed == 12
    for result in (experiment / "runs").glob("*/validation/score.json"):
        result.unlink()  # counted again below, as the replay writes each
    # A replay plans in one thread, a run at a time (a first validate plans a few at once).
    seen = results_written_as_each_run_is_planned(experiment, monkeypatch)
    out = io.StringIO()
    summary = validate_once(scenario, experiment, out, jobs=1, replay=True, force=True)
    assert summary.exit_code == 0 and summary.executed == 12
    # Planning r12 waits until r10 is taken: r08 is running or done by then, and the runs
    # before it recorded (one validator at a time, a tenth of a second each; one record may
    # lag on a loaded machine). Unbounded, all twelve are planned while the first validator
    # sleeps, and none is recorded.
    assert seen["r12"] >= 5, seen
    counted = [line.split()[0] for line in out.getvalue().splitlines() if line.startswith("[")]
    assert len(counted) == 12 and counted[-1] == "[12/12]", counted
    # Lines said before planning ended carry the tasks known so far, marked with a "+".
    assert counted[0].endswith("+]") and int(counted[0][3:-2]) < 12, counted


@needs_overlap
def test_a_stop_at_the_first_invalid_result_does_not_wait_on_planning_held_back(
    tmp_path, monkeypatch
) -> None:
    scenario, experiment = held_back_matrix(tmp_path, monkeypatch, FAILING_SCORE, 8)
    finished: list[runner.Summary] = []
    worker = threading.Thread(
        target=lambda: finished.append(validate_once(scenario, experiment, jobs=1, exitfirst=True)),
        daemon=True,
    )
    worker.start()
    worker.join(60)
    assert finished, "validate -x hung on planning held back"
    summary = finished[0]
    # Every run was planned in the end: what did not start is counted.
    assert summary.executed + summary.not_started == 8 and summary.not_started >= 1


NICE = """\
import json, os
print(json.dumps({"metrics": {"changed": True, "nice": os.getpriority(os.PRIO_PROCESS, 0)}}))
"""


@pytest.mark.skipif(not sandbox_enabled(), reason="needs Landlock: only then may tasks start early")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own priority: Linux")
def test_a_replays_planning_beside_the_tasks_runs_at_the_lowest_priority_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    if ours == 19:
        pytest.skip("this process runs at the lowest priority already")
    scenario, experiment = script_matrix(tmp_path, NICE, RUNS)
    scenario.write_text(scenario.read_text().replace('["changed"]', '["changed", "nice"]'))
    planned_at: list[int] = []
    plan_run = planning._plan_run

    def noted(*args, **kwargs):  # type: ignore[no-untyped-def]
        planned_at.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return plan_run(*args, **kwargs)

    monkeypatch.setattr(planning, "_plan_run", noted)

    def validated(*, replay: bool) -> list[int]:
        planned_at.clear()
        summary = validate(
            load_scenario(scenario),
            discover([experiment], replay=replay),
            ValidateOptions(progress=False, jobs=2, replay=replay, force=True),
            out=io.StringIO(),
        )
        assert summary.exit_code == 0 and summary.executed == 4
        # The validators, started by the workers, keep trysquare's own priority.
        return [
            json.loads((experiment / "runs" / run_id / "validation" / "score.json").read_text())[
                "metrics"
            ]["nice"]
            for run_id, _, _ in RUNS
        ]

    # A fresh validate's planning starts git: it keeps its priority.
    assert validated(replay=False) == [ours] * 4
    assert planned_at == [ours] * 4
    assert validated(replay=True) == [ours] * 4
    assert planned_at == [19] * 4
    # The caller's thread keeps its own.
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == ours


@pytest.mark.skipif(not sandbox_enabled(), reason="needs Landlock: only then may tasks start early")
@pytest.mark.parametrize(
    ("cores", "jobs", "builds_ahead"), [(4, 2, True), (2, 2, False), (2, 3, False)]
)
def test_tasks_are_built_in_a_thread_of_their_own_only_where_a_core_is_left_for_it(
    matrix, monkeypatch: pytest.MonkeyPatch, cores: int, jobs: int, builds_ahead: bool
) -> None:
    """Beside as many validators as there are cores, each worker builds the task it takes: a
    thread building them ahead would only take turns with the validators and hand each task
    over. Every task runs and is recorded either way."""
    scenario, experiment = matrix
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    started = threads_started(monkeypatch)
    built_by: list[str] = []
    tasks = planning.RunPlan.tasks

    def noted(plan, *args, **kwargs):  # type: ignore[no-untyped-def]
        for task in tasks(plan, *args, **kwargs):
            built_by.append(threading.current_thread().name)
            yield task

    monkeypatch.setattr(planning.RunPlan, "tasks", noted)
    summary = validate_all(scenario, experiment, jobs=jobs)
    assert summary.exit_code == 0 and summary.executed == 4
    assert ("trysquare-task-builder" in started) is builds_ahead
    if builds_ahead:
        assert built_by == ["trysquare-task-builder"] * 4
    else:
        assert built_by and all(name.startswith("trysquare-task-") for name in built_by)
        assert "trysquare-task-builder" not in built_by


def test_a_core_is_left_beside_fewer_validators_than_the_cores_this_process_may_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    assert _pool.core_left_beside(2)
    assert not _pool.core_left_beside(3)
    assert not _pool.core_left_beside(8)


@pytest.mark.skipif(not sandbox_enabled(), reason="needs Landlock: only then may tasks start early")
def test_a_worker_waiting_for_planning_hands_its_last_result_over_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no thread building tasks ahead, a worker waits for planning itself: the result it
    put off until its next start is recorded meanwhile, not once the next run is planned."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    runs = [(f"r{n}", "c", n) for n in range(1, 6)]
    scenario, experiment = script_matrix(tmp_path, SCORE, runs)
    recorded = [experiment / "runs" / r / "validation" / "score.json" for r in ("r3", "r4")]
    plan_run = planning._plan_run
    waited: list[float] = []

    def held(scenario_, run, *args, **kwargs):  # type: ignore[no-untyped-def]
        if run.id == "r5":  # planned once r3's and r4's results are recorded (10 s at most)
            began = time.monotonic()
            while not all(path.exists() for path in recorded) and time.monotonic() - began < 10:
                time.sleep(0.01)
            waited.append(time.monotonic() - began)
        return plan_run(scenario_, run, *args, **kwargs)

    monkeypatch.setattr(planning, "_plan_run", held)
    summary = validate_all(scenario, experiment, jobs=2)
    assert summary.exit_code == 0 and summary.executed == 5
    assert len(waited) == 1 and waited[0] < 5

"""The runner's records: one task type, the TaskResult handed on, options and summary apart."""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import attrs
import pytest
from trysquare import modes, runner
from trysquare import scenario as scenarios
from trysquare.errors import ScenarioError
from trysquare.execute import PlannedTask, TaskResult, execute_task
from trysquare.modes import ValidationTask
from trysquare.runs import discover
from trysquare.scenario import load_scenario
from trysquare.testing import RunBuilder

from tests.helpers import write_scenario, write_script

SCRIPT = """
import json, sys
context = json.load(open(sys.argv[1]))
sys.stderr.write("looked\\n")
print(json.dumps({"metrics": {"changed": bool(context["touched"])}, "reasons": {"changed": "seen"}}))
"""


def _matrix(tmp_path: Path) -> tuple[Path, Path]:
    run = RunBuilder(tmp_path / "exp" / "runs" / "r1", cell="plain", repetition=1)
    run.base({"a.py": "a = 1\n"})
    run.repo.write("a.py", "a = 2\n")
    run.finish()
    write_script(tmp_path / "scenario", "check.py", SCRIPT)
    scenario = write_scenario(
        tmp_path / "scenario",
        """
        [[validation]]
        mode = "script"
        name = "check"
        command = "check.py"
        metrics = ["changed"]
    """,
    )
    return scenario, tmp_path / "exp"


def _one_task(tmp_path: Path) -> ValidationTask:
    scenario_path, experiment = _matrix(tmp_path)
    scenario = load_scenario(scenario_path)
    runs = discover([experiment])[0].runs
    errors: list = []
    with ThreadPoolExecutor(max_workers=2) as pool:
        tasks = runner.plan(
            scenario, runs, scenario.validations, runner.ValidateOptions(jobs=1), errors, pool
        )
    assert errors == [] and len(tasks) == 1
    return tasks[0]


def test_one_task_type_and_no_old_names() -> None:
    assert not hasattr(modes, "Job")
    assert not hasattr(runner, "Task")
    assert not hasattr(runner, "LOCK_FILE")  # the lock lives in trysquare.lock alone
    # The scenario's [task] table is another thing, and another class.
    assert scenarios.Task is not ValidationTask


def test_a_mode_is_handed_no_runner_bookkeeping(tmp_path: Path) -> None:
    planned = _one_task(tmp_path)
    assert isinstance(planned, PlannedTask) and isinstance(planned.task, ValidationTask)
    handed = {field.name for field in attrs.fields(ValidationTask)}
    kept = {"clone_before", "digest", "context_digest", "declared_elsewhere", "rerun_suite"}
    assert handed & kept == set()
    assert kept <= {field.name for field in attrs.fields(PlannedTask)}
    assert planned.run is planned.task.run and planned.validation is planned.task.validation


def test_execute_task_returns_the_record_it_wrote(tmp_path: Path) -> None:
    task = _one_task(tmp_path)
    assert task.task.archive == task.run.validation_dir / "check"
    result = execute_task(task)
    assert isinstance(result, TaskResult) and result.recorded
    written = json.loads((task.run.validation_dir / "check.json").read_text(encoding="utf-8"))
    assert json.loads(json.dumps(result.document)) == written
    assert result.outcome.metrics == {"changed": True} == written["metrics"]
    assert result.outcome.reasons == {"changed": "seen"}
    # The stderr went to its file; the record travels without it.
    assert result.outcome.stderr is None
    assert (task.run.validation_dir / "check.stderr").read_text() == "looked\n"


def test_a_document_sent_back_from_afar_becomes_the_same_record(tmp_path: Path) -> None:
    task = _one_task(tmp_path)
    result = execute_task(task)
    assert result is not None
    again = TaskResult.from_document(task, json.loads(json.dumps(result.document)))
    assert again.outcome == result.outcome
    assert again.recorded and not again.no_space_left


def test_from_document_is_strict_and_names_the_validator(tmp_path: Path) -> None:
    task = _one_task(tmp_path)
    good = {
        "metrics": {"changed": False},
        "reasons": {},
        "state": "valid",
        "error": None,
        "notes": ["dropped metric 'x'"],
        "validator": {"name": "check"},
        "duration": 0.1,
    }
    outcome = TaskResult.from_document(task, good).outcome
    assert outcome.notes == ("dropped metric 'x'",) and outcome.state == "valid"
    with pytest.raises(ScenarioError, match="validator 'check'.*state"):
        TaskResult.from_document(task, {**good, "state": "excellent"})
    with pytest.raises(ScenarioError, match="validator 'check'.*metrics"):
        TaskResult.from_document(task, {**good, "metrics": ["changed"]})
    unrecorded = TaskResult.from_document(
        task, {**good, "state": "invalid", "error": "disk", "unrecorded": True}
    )
    assert not unrecorded.recorded and not unrecorded.no_space_left
    full = {
        **good,
        "state": "invalid",
        "error": "no space",
        "unrecorded": True,
        "no_space_left": True,
    }
    assert TaskResult.from_document(task, full).no_space_left


def test_observers_are_told_the_recorded_outcome(tmp_path: Path) -> None:
    task = _one_task(tmp_path)
    result = execute_task(task)
    assert result is not None
    told: list[dict] = []
    runner._notify(lambda **kwargs: told.append(kwargs), result)
    assert told == [{"run": task.run, "validation": task.validation, "outcome": result.outcome}]


def test_validate_writes_to_the_stdout_of_its_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # capsys replaces sys.stdout after trysquare.runner was imported: a default bound
    # at import would write to the old stream, and nothing would be captured.
    scenario_path, experiment = _matrix(tmp_path)
    assert sys.stdout is not sys.__stdout__
    summary = runner.validate(
        load_scenario(scenario_path),
        discover([experiment]),
        runner.ValidateOptions(jobs=1, progress=False),
    )
    assert summary.exit_code == 0 and summary.executed == 1
    assert "[1/1] r1 (plain #1) check: valid" in capsys.readouterr().out

"""The runner called directly (``trysquare.runner.validate``), without the command line.

The CLI tests show what a user sees; these show what the runner itself promises a
caller such as a plugin command or a notebook: what runs, what is reused, what is
written, and that one failure never stops the matrix.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from trysquare.runner import ValidateOptions, validate
from trysquare.runs import discover
from trysquare.scenario import load_scenario
from trysquare.testing import build_matrix

from tests.helpers import write_scenario, write_script

pytestmark = pytest.mark.fast

SCORE = """\
import json, sys
context = json.load(open(sys.argv[1]))
if context["cell"] == "broken":
    sys.exit("this cell's validator fails on purpose")
print(json.dumps({"metrics": {"changed": bool(context["touched"])}, "reasons": {}}))
"""


@pytest.fixture
def matrix(tmp_path: Path) -> tuple[Path, Path]:
    """Two cells of copied runs and one script validator; the scenario and the experiment."""
    folder = tmp_path / "scn"
    write_script(folder, "score.py", SCORE)
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
    build_matrix(
        experiment, [("a1", "plain", 1), ("a2", "plain", 2), ("b1", "broken", 1)],
        base={"counter.py": "count = 1\n"}, changes={"counter.py": "count = 0\n"},
    )  # fmt: skip
    return scenario, experiment


def run_validate(scenario: Path, experiment: Path, **options: object) -> tuple[object, str]:
    out = io.StringIO()
    summary = validate(
        load_scenario(scenario),
        discover([experiment]),
        ValidateOptions(progress=False, **options),
        out=out,
    )
    return summary, out.getvalue()


def result(experiment: Path, run_id: str) -> dict:
    return json.loads((experiment / "runs" / run_id / "validation" / "score.json").read_text())


def test_every_run_is_scored_and_a_failing_one_does_not_stop_the_others(matrix) -> None:
    summary, out = run_validate(*matrix, jobs=2)
    _, experiment = matrix
    assert result(experiment, "a1")["metrics"] == {"changed": True}
    assert result(experiment, "a2")["state"] == "valid"
    broken = result(experiment, "b1")
    assert broken["state"] == "invalid" and "exited with code 1" in broken["error"]
    assert summary.exit_code == 1 and summary.executed == 3
    assert summary.closing_line() == "3 runs: 2 valid, 1 invalid (cell 'broken' is not publishable)"
    # Plain progress lines go to the stream the caller handed in, nowhere else.
    assert "[3/3]" in out and "b1 (broken #1) score: invalid" in out
    rows = {row["id"]: row for row in json.loads((experiment / "measures.json").read_text())}
    assert rows["a1"]["state"] == "valid" and rows["b1"]["state"] == "invalid"


def test_an_up_to_date_result_is_reused_and_force_runs_it_again(matrix) -> None:
    scenario, experiment = matrix
    run_validate(scenario, experiment)
    first = result(experiment, "a1")
    again, out = run_validate(scenario, experiment)
    assert (again.executed, again.reused) == (0, 3) and "[1/" not in out
    assert result(experiment, "a1") == first
    forced, _ = run_validate(scenario, experiment, force=True)
    assert forced.executed == 3
    history = (experiment / "runs" / "a1" / "validation" / "score.history.jsonl").read_text()
    assert [json.loads(line) for line in history.splitlines()] == [first]


def test_stopping_before_the_first_task_records_nothing(matrix) -> None:
    scenario, experiment = matrix
    summary = validate(
        load_scenario(scenario), discover([experiment]), ValidateOptions(progress=False, jobs=1),
        out=io.StringIO(), should_stop=lambda: True,
    )  # fmt: skip
    assert summary.interrupted and summary.executed == 0
    assert not list(experiment.glob("runs/*/validation/score.json"))


def test_validate_writes_to_sys_stdout_as_it_is_at_the_call(matrix, capsys) -> None:
    # The default stream is looked up when validate runs, not bound when the module was imported.
    scenario, experiment = matrix
    validate(
        load_scenario(scenario), discover([experiment]), ValidateOptions(progress=False, jobs=1)
    )
    assert "[3/3]" in capsys.readouterr().out


def test_measures_that_cannot_be_written_are_said_and_every_run_still_counted(
    matrix: tuple[Path, Path],
) -> None:
    scenario, experiment = matrix
    (experiment / "measures.json").mkdir()  # a folder where the file goes: the write fails
    summary, out = run_validate(scenario, experiment)
    assert f"{experiment / 'measures.json'} not written" in out
    assert summary.runs == 3 and summary.states["valid"] == 2 and summary.states["invalid"] == 1
    assert summary.stopped and summary.exit_code == 1


def test_each_validator_is_prepared_once_and_one_failing_to_is_said(
    matrix: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from trysquare_script.mode import ScriptValidation

    prepared: list[str] = []

    def prepare(self: ScriptValidation) -> None:
        prepared.append(self.name)
        raise RuntimeError("no network here")

    monkeypatch.setattr(ScriptValidation, "prepare", prepare)
    scenario, experiment = matrix
    summary, out = run_validate(scenario, experiment)
    assert prepared == ["score"]
    assert "validator 'score' could not get ready: RuntimeError: no network here" in out
    assert summary.states == {"valid": 2, "invalid": 1, "pending": 0}  # the matrix ran all the same

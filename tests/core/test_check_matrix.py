"""Issue 14.6: typos that change the table are named by `check` and refused by validate/report."""

from __future__ import annotations

from pathlib import Path

import pytest
from trysquare._matrix import one_edit_apart

from tests.helpers import write_scenario, write_script

pytestmark = pytest.mark.fast  # the inner loop: `uv run pytest -m fast -n 0`

SCORE = 'import json\nprint(json.dumps({"metrics": {"ok": True}}))\n'


def scenario_with(tmp_path: Path, verdict: str = "") -> Path:
    folder = tmp_path / "scenario"
    write_script(folder, "score.py", SCORE)
    return write_scenario(
        folder,
        f"""
[[validation]]
mode = "script"
name = "score"
command = "score.py"
metrics = ["ok"]
{verdict}
""",
    )


def runs(make_run, cells: list[tuple[str, str, int]]) -> None:
    for run_id, cell, repetition in cells:
        run = make_run(run_id, cell=cell, repetition=repetition)
        run.base({"a.py": "x = 1\n"})
        run.finish()


@pytest.mark.parametrize(
    ("first", "second", "near"),
    [
        ("prob", "probe", True),
        ("probe", "prbe", True),
        ("plain", "plian", True),
        ("plain", "plane", False),
        ("rule", "rule", False),
        ("a", "b", True),
        ("nothing", "rule", False),
    ],
)
def test_one_edit_apart(first: str, second: str, near: bool) -> None:
    assert one_edit_apart(first, second) is near
    assert one_edit_apart(second, first) is near


def test_check_names_a_reference_that_is_no_runs_cell(cli, make_run, tmp_path: Path) -> None:
    scenario = scenario_with(tmp_path, '[verdict]\nreference = "plane"\n')
    runs(make_run, [("r1", "plain", 1), ("r2", "probe", 1)])
    done = cli("check", scenario, tmp_path / "exp")
    assert done.returncode == 1
    assert "verdict.reference 'plane' is no run's cell (did you mean 'plain'?)" in done.stderr


def test_check_names_a_cell_one_edit_away_from_another(cli, make_run, tmp_path: Path) -> None:
    scenario = scenario_with(tmp_path)
    runs(make_run, [("r1", "probe", 1), ("r2", "probe", 2), ("r3", "prob", 3)])
    done = cli("check", scenario, tmp_path / "exp")
    assert done.returncode == 1
    assert "cell 'prob' (1 run(s):" in done.stderr and "did you mean 'probe'?" in done.stderr
    assert str(tmp_path / "exp" / "runs" / "r3") in done.stderr


def test_check_accepts_declared_cells_one_edit_apart(cli, make_run, tmp_path: Path) -> None:
    scenario = scenario_with(tmp_path, "[variants.r1]\n[variants.r2]\n")
    runs(make_run, [("a", "r1", 1), ("b", "r2", 1)])
    done = cli("check", scenario, tmp_path / "exp")
    assert done.returncode == 0, done.stderr


def test_check_names_a_duplicate_cell_and_repetition_by_path(cli, make_run, tmp_path: Path) -> None:
    scenario = scenario_with(tmp_path)
    runs(make_run, [("r1", "plain", 1), ("r2", "plain", 1)])
    done = cli("check", scenario, tmp_path / "exp")
    assert done.returncode == 1
    assert "cell 'plain' repetition 1 is claimed by two runs" in done.stderr
    assert str(tmp_path / "exp" / "runs" / "r1" / "run.toml") in done.stderr
    assert str(tmp_path / "exp" / "runs" / "r2" / "run.toml") in done.stderr


@pytest.mark.parametrize("command", ["validate", "report"])
def test_validate_and_report_refuse_a_duplicate_cell_and_repetition(
    cli, make_run, tmp_path: Path, command: str
) -> None:
    scenario = scenario_with(tmp_path)
    runs(make_run, [("r1", "plain", 1), ("r2", "plain", 1), ("r3", "plain", 2)])
    done = cli(command, scenario, tmp_path / "exp")
    assert done.returncode == 2
    assert "claimed by two runs" in done.stderr
    assert str(tmp_path / "exp" / "runs" / "r2" / "run.toml") in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "exp" / "measures.json").exists()

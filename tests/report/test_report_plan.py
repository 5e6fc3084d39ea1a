"""``trysquare plan`` and the ``[verdict]`` keys of issue 33, at the command line."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from tests.helpers import write_scenario, write_script

SCORE = """
import json, sys
context = json.load(open(sys.argv[1]))
touched = set(context["touched"])
print(json.dumps({"metrics": {"in_scope": touched <= {"counter.py"}}}))
"""

SCENARIO = """
[scenario]
name = "plan-cli"

[axes]
rule = ["nothing", "rule"]

[[validation]]
mode = "script"
name = "score"
command = "score.py"
metrics = ["in_scope"]

[verdict]
reference = "nothing"
{extra}
"""


def build(make_run, tmp_path: Path, extra: str = "") -> tuple[Path, Path]:
    """4 runs per cell: "rule" stays in scope 4 times, "nothing" 3 times (a gap of +0.25)."""
    folder = tmp_path / "scenario"
    write_script(folder, "score.py", SCORE)
    scenario = write_scenario(folder, SCENARIO.format(extra=extra))
    for index in range(8):
        cell = "rule" if index < 4 else "nothing"
        run = make_run(f"r{index}", cell=cell, repetition=index % 4 + 1)
        run.base({"counter.py": "x = 1\n", "README.md": "hello\n"})
        run.repo.write("counter.py", f"x = {index + 10}\n")
        if index == 4:
            run.repo.write("README.md", "changed too\n")
        run.finish()
    return scenario, tmp_path / "exp"


@pytest.fixture
def validated(cli, make_run, tmp_path: Path) -> tuple[Path, Path]:
    scenario, experiment = build(make_run, tmp_path)
    assert cli("validate", scenario, experiment, "--no-progress").returncode == 0
    return scenario, experiment


def test_report_prints_the_runs_needed_and_the_procedure(cli, validated) -> None:
    scenario, experiment = validated
    done = cli("report", scenario, experiment)
    assert done.returncode == 0, done.stderr
    # 4/4 against 3/4: (1.96 + 0.84)^2 * 0.1875 / 0.0625 = 23.5.
    assert "- **rule** · `in_scope`: ≈ 24 runs per cell (you have 4)" in done.stdout
    assert "Procedure: fixed-sample." in done.stdout
    assert "1 gap(s) tested, no correction" in done.stdout


def test_plan_says_how_many_more_runs_each_cell_needs(cli, validated) -> None:
    scenario, experiment = validated
    before = (experiment / "measures.json").read_bytes()
    table = cli("plan", scenario, experiment)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert (
        "80%" in lines[0] and "fixed-sample procedure, no correction, 1 gap(s) tested" in lines[0]
    )
    assert lines[1].split() == ["cell", "counted", "more", "for"]
    assert lines[2].split()[:4] == ["nothing", "(reference)", "4", "20"]
    assert lines[3].split()[:3] == ["rule", "4", "20"]
    assert "rule · in_scope: ≈ 24 per cell" in lines[3]
    assert (experiment / "measures.json").read_bytes() == before  # plan writes nothing

    harness = cli("plan", scenario, experiment, "--format", "toml")
    assert tomllib.loads(harness.stdout) == {"more": {"nothing": 20, "rule": 20}}

    data = json.loads(cli("plan", scenario, experiment, "--format", "json").stdout)
    assert data["schema_version"] == 1
    assert [(c["cell"], c["have"], c["more"]) for c in data["cells"]] == [
        ("nothing", 4, 20),
        ("rule", 4, 20),
    ]
    assert data["cells"][1]["because"] == {
        "cell": "rule",
        "criterion": "in_scope",
        "runs_per_cell": 24,
    }


def test_plan_spreads_a_budget(cli, validated) -> None:
    scenario, experiment = validated
    done = cli("plan", scenario, experiment, "--budget", "10", "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    # "rule" is 4/4: its observed rate does not vary, so the reference's runs buy the certainty.
    assert {c["cell"]: c["budget"] for c in data["cells"]} == {"nothing": 10, "rule": 0}
    expected = data["expected_established"]
    assert expected["open_gaps"] == 1 and expected["with_budget"] > expected["now"]
    harness = tomllib.loads(
        cli("plan", scenario, experiment, "--budget", "10", "--format", "toml").stdout
    )
    assert harness == {"more": {"nothing": 10, "rule": 0}}
    assert "of the budget (10)" in cli("plan", scenario, experiment, "--budget", "10").stdout


def test_plan_needs_a_reference_and_a_budget_of_at_least_one(cli, make_run, tmp_path: Path) -> None:
    scenario, experiment = build(make_run, tmp_path)
    text = scenario.read_text().replace('reference = "nothing"', "")
    scenario.write_text(text)
    done = cli("plan", scenario, experiment)
    assert done.returncode == 2
    assert done.stderr.strip().endswith(
        "plan needs [verdict] reference, the cell every gap is measured against"
    )
    assert "Traceback" not in done.stderr
    zero = cli("plan", scenario, experiment, "--budget", "0")
    assert zero.returncode == 2 and "--budget: must be at least 1" in zero.stderr


def test_a_cell_name_cannot_break_the_harness_toml(cli, make_run, tmp_path: Path) -> None:
    scenario, experiment = build(make_run, tmp_path)
    for index, name in enumerate(['evil"] = 1\n[x', "back\\slash"]):
        run = make_run(f"odd{index}", cell=name, repetition=1)
        run.base({"counter.py": "x = 1\n"})
        run.repo.write("counter.py", "x = 2\n")
        run.finish()
    assert cli("validate", scenario, experiment, "--no-progress").returncode == 0
    done = cli("plan", scenario, experiment, "--format", "toml")
    assert set(tomllib.loads(done.stdout)["more"]) == {
        "nothing",
        "rule",
        'evil"] = 1\n[x',
        "back\\slash",
    }


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ('stopping = "peek"', 'verdict.stopping is \'peek\'; use "fixed" or "anytime"'),
        ('correction = "bonferroni"', 'verdict.correction is \'bonferroni\'; use "none" or "holm"'),
    ],
)
def test_an_unknown_verdict_procedure_is_refused_at_load(
    cli, make_run, tmp_path: Path, extra: str, said: str
) -> None:
    scenario, _experiment = build(make_run, tmp_path, extra)
    done = cli("check", scenario)
    assert done.returncode == 2
    assert done.stderr.strip() == f"trysquare: scenario.toml: {said}"


def test_anytime_and_holm_are_read_from_the_verdict(cli, make_run, tmp_path: Path) -> None:
    scenario, experiment = build(make_run, tmp_path, 'stopping = "anytime"\ncorrection = "holm"')
    assert cli("validate", scenario, experiment, "--no-progress").returncode == 0
    report = json.loads(cli("report", scenario, experiment, "--format", "json").stdout)
    assert (report["gaps"]["stopping"], report["gaps"]["correction"]) == ("anytime", "holm")
    assert "Procedure: anytime-valid." in cli("report", scenario, experiment).stdout
    plan = cli("plan", scenario, experiment).stdout
    assert "anytime-valid procedure, Holm's correction, 1 gap(s) tested" in plan

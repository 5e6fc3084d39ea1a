"""validate's numbers say what they mean: unjudged counted, --fail-on, --only, unmeasured cells (issue 30)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import write_scenario, write_script

# ok: judged in repetition 0 only; tests: never judged (the suite's runner is absent).
SCORE = r"""
import json, sys
context = json.load(open(sys.argv[1]))
rep = context["repetition"]
metrics = {"ok": True if rep == 0 else None, "passes": None}
reasons = {"passes": "the suite ran nothing\nnpm: command not found"}
if rep:
    reasons["ok"] = "no response was recorded"
print(json.dumps({"metrics": metrics, "reasons": reasons}))
"""
BROKEN = r"""
import sys
sys.exit(1)
"""


def build(make_run, tmp_path: Path, verdict: str = "") -> tuple[Path, Path]:
    for index in range(2):
        run = make_run(f"run{index}", cell="alpha", repetition=index)
        run.base({"counter.py": "x = 1\n"})
        run.repo.write("counter.py", f"x = {index + 2}\n")
        run.finish()
    write_script(tmp_path / "s", "score.py", SCORE)
    write_script(tmp_path / "s", "broken.py", BROKEN)
    scenario = write_scenario(
        tmp_path / "s",
        """
        [[validation]]
        name = "score"
        mode = "script"
        command = "score.py"
        metrics = ["ok", "passes"]

        [[validation]]
        name = "broken"
        mode = "script"
        command = "broken.py"
        metrics = ["other"]
    """
        + verdict,
    )
    return scenario, tmp_path / "exp"


def test_progress_and_closing_lines_count_unjudged(cli, make_run, tmp_path: Path) -> None:
    scenario, experiment = build(make_run, tmp_path)
    done = cli("validate", scenario, experiment, "--only", "score", "--no-progress", "--jobs", "1")
    lines = done.stdout.splitlines()
    assert lines, done.stderr
    run1 = next(line for line in lines if "run1 (alpha #1) score" in line)
    assert (
        "valid, 2 unjudged: ok (no response was recorded); passes (the suite ran nothing…)" in run1
    )
    closing = lines[-1]
    assert closing.startswith("2 runs: 2 valid; 2 runs with unjudged metrics (ok 1, passes 2)"), (
        closing
    )
    assert done.returncode == 0, (
        done.stderr
    )  # --only score: broken's results are not this command's

    quiet = cli("validate", scenario, experiment, "--only", "score", "-q")
    assert "2 runs with unjudged metrics (ok 1, passes 2)" in quiet.stdout


def test_fail_on_unjudged_makes_the_exit_code_1(cli, make_run, tmp_path: Path) -> None:
    scenario, experiment = build(make_run, tmp_path)
    assert cli("validate", scenario, experiment, "--only", "score", "-q").returncode == 0
    failing = cli(
        "validate", scenario, experiment, "--only", "score", "-q", "--fail-on", "unjudged"
    )
    assert failing.returncode == 1
    assert "unjudged" in failing.stdout
    assert "--fail-on" in cli("validate", "--help").stdout


def test_exit_code_counts_only_the_selected_validators(cli, make_run, tmp_path: Path) -> None:
    scenario, experiment = build(make_run, tmp_path)
    everything = cli("validate", scenario, experiment, "-q")
    assert everything.returncode == 1  # broken is invalid in every run
    xml = tmp_path / "j.xml"
    only = cli(
        "validate", scenario, experiment, "--only", "score", "--junit-xml", xml, "--format", "json"
    )
    document = json.loads(only.stdout)
    assert document["results"]["failed"] == 0
    assert only.returncode == 0 and document["exit_code"] == 0
    assert document["states"] == {"valid": 2, "invalid": 0, "pending": 0}
    assert 'failures="0"' in xml.read_text()
    # The other way round, the invalid results are this command's.
    assert cli("validate", scenario, experiment, "--only", "broken", "-q").returncode == 1


def test_a_cell_whose_criteria_have_no_judged_value_is_not_publishable(
    cli, make_run, tmp_path: Path
) -> None:
    scenario, experiment = build(
        make_run,
        tmp_path,
        verdict="""
        [verdict]
        criteria = ["ok", "passes"]
    """,
    )
    done = cli("validate", scenario, experiment, "--only", "score", "-q")
    assert done.returncode == 1
    assert (
        "cell 'alpha' is not publishable: no run has a judged value of passes (a verdict rests on it)"
        in done.stdout
    )
    document = json.loads(
        cli("validate", scenario, experiment, "--only", "score", "--format", "json").stdout
    )
    assert document["unmeasured"] == {"alpha": ["passes"]} and document["unpublishable"] == [
        "alpha"
    ]
    assert document["exit_code"] == 1
    report = cli("report", scenario, experiment)
    assert report.returncode == 1
    assert "every cell is publishable" not in report.stdout
    assert "no run has a judged value of passes" in report.stdout
    assert "the suite ran nothing" in report.stdout
    html = tmp_path / "report.html"
    assert cli("report", scenario, experiment, "--format", "html", "-o", html).returncode == 1
    assert "cell alpha not publishable: unmeasured: no run has a judged value of passes" in (
        html.read_text(encoding="utf-8")
    )
    data = json.loads(cli("report", scenario, experiment, "--format", "json").stdout)
    alpha = next(cell for cell in data["cells"] if cell["cell"] == "alpha")
    assert not alpha["publishable"]
    assert alpha["why_not"][-1]["run"] is None


TYPO = r"""
from trysquare.assay import validator

@validator
def evaluate(run):
    return {"added_test": True}

raise SystemExit(evaluate.cli())
"""


def test_by_run_names_the_validators_own_error_and_the_typo(cli, make_run, tmp_path: Path) -> None:
    run = make_run("r1", cell="alpha", repetition=1)
    run.base({"counter.py": "x = 1\n"})
    run.finish()
    write_script(tmp_path / "s", "checks.py", TYPO)
    scenario = write_scenario(
        tmp_path / "s",
        """
        [[validation]]
        name = "checks"
        mode = "script"
        command = "checks.py"
        metrics = ["added_tset"]
    """,
    )
    experiment = tmp_path / "exp"
    assert cli("validate", scenario, experiment, "-q").returncode == 1
    report = cli("report", scenario, experiment)
    by_run = report.stdout[report.stdout.index("### By run") :].replace("\\_", "_")
    assert (
        "script checks.py exited with code 1: checks.py: evaluate() did not return the declared "
        "metric 'added_tset'; it returned undeclared 'added_test' (did you mean 'added_tset'?)"
        in by_run
    )


def test_a_criterion_typo_gets_a_did_you_mean(cli, make_run, tmp_path: Path) -> None:
    scenario, _ = build(
        make_run,
        tmp_path,
        verdict="""
        [verdict]
        criteria = ["passse"]
    """,
    )
    done = cli("check", scenario)
    assert done.returncode == 2
    assert (
        "verdict.criteria: 'passse' is not a metric any validator declares (did you mean 'passes'?)"
        in done.stderr
    )


ECHO = r"""
import json, sys
context = json.load(open(sys.argv[1]))
print(json.dumps({"metrics": {name: True for name in context["declared"]}, "reasons": {}}))
"""


def test_replay_reads_the_scenario_as_it_is_now(cli, make_run, tmp_path: Path) -> None:
    run = make_run("r1", cell="alpha", repetition=1)
    run.base({"counter.py": "x = 1\n"})
    run_dir = run.finish()
    write_script(tmp_path / "s", "echo.py", ECHO)
    table = """
        [[validation]]
        name = "echo"
        mode = "script"
        command = "echo.py"
        metrics = [{}]
    """
    scenario = write_scenario(tmp_path / "s", table.format('"added_tset"'))
    assert cli("validate", scenario, tmp_path / "exp", "-q").returncode == 0
    scenario = write_scenario(tmp_path / "s", table.format('"added_test"'))  # the typo fixed
    done = cli("validate", scenario, tmp_path / "exp", "--replay", "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((run_dir / "validation" / "echo.json").read_text())
    assert result["metrics"] == {"added_test": True}
    assert "the scenario is read as it is now" in " ".join(cli("validate", "--help").stdout.split())


def test_a_script_in_any_language_returning_a_typo_gets_a_did_you_mean(
    cli, make_run, tmp_path: Path
) -> None:
    run = make_run("r1", cell="alpha", repetition=1)
    run.base({"counter.py": "x = 1\n"})
    run.finish()
    write_script(tmp_path / "s", "checks.py", 'print(\'{"metrics": {"added_test": true}}\')\n')
    scenario = write_scenario(
        tmp_path / "s",
        """
        [[validation]]
        name = "checks"
        mode = "script"
        command = "checks.py"
        metrics = ["added_tset"]
    """,
    )
    done = cli("validate", scenario, tmp_path / "exp", "--no-progress")
    assert done.returncode == 1
    assert (
        "script checks.py omitted declared metric 'added_tset'; it returned undeclared "
        "'added_test' (did you mean 'added_tset'?)"
    ) in done.stdout

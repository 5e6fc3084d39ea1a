"""Issue 14.8: the report never hides unjudged or pending values, and says why by run."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from trysquare.report import Layout, build_report, render

from tests.helpers import write_scenario, write_script


def row(run_id: str, cell: str, metrics: dict[str, Any], **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": run_id,
        "cell": cell,
        "repetition": 1,
        "state": "valid",
        "metrics": metrics,
        "reasons": {},
        "errors": [],
        "pending": [],
    }
    return {**base, **extra}


LAYOUT = Layout(
    name="demo",
    metrics=("tests", "note"),
    owners={"tests": "score", "note": "form"},
)
ROWS = [
    row(
        "r1",
        "c",
        {"tests": None},
        reasons={"tests": "the suite ran nothing, so nobody judged it"},
        state="pending",
        pending=["note"],
    ),
    row(
        "r2",
        "c",
        {"tests": None},
        reasons={"tests": "prepare failed"},
        state="pending",
        pending=["note"],
    ),
    row("r3", "c", {"tests": True, "note": True}),
    row(
        "r4",
        "c",
        {},
        state="invalid",
        errors=[
            {"validator": "score", "error": "script score.py exited with code 1"},
            {"validator": "form", "error": "later error"},
        ],
    ),
]


def test_unjudged_everywhere_does_not_look_like_pending() -> None:
    unjudged = [row(f"u{i}", "u", {"tests": None}, reasons={"tests": "no suite"}) for i in range(3)]
    pending = [row(f"p{i}", "p", {}, state="pending", pending=["tests"]) for i in range(3)]
    text = render(build_report(Layout(name="d", metrics=("tests",)), unjudged + pending), "md")
    assert "| u | 3 | 0/0 \u00b7 3 unjudged |" in text
    assert "| p (not publishable) | 3 | 0/0 \u00b7 3 pending |" in text


def test_every_score_cell_shows_unjudged_and_pending_counts() -> None:
    report = build_report(LAYOUT, ROWS)
    cell = report["cells"][0]
    assert cell["scores"]["tests"] == {"true": 1, "n": 1, "unjudged": 2, "pending": 0}
    assert cell["scores"]["note"] == {"true": 1, "n": 1, "unjudged": 0, "pending": 2}
    text = render(report, "md")
    assert (
        "| c (not publishable) | 4 (1 invalid) | 1/1 \u00b7 2 unjudged | 1/1 \u00b7 2 pending |"
        in text
    )


def test_json_and_csv_carry_the_counts() -> None:
    report = build_report(LAYOUT, ROWS)
    as_json = json.loads(render(report, "json"))
    assert as_json["cells"][0]["scores"]["tests"]["unjudged"] == 2
    table = list(csv.DictReader(io.StringIO(render(report, "csv"))))
    score = next(r for r in table if r["table"] == "score" and r["metric"] == "note")
    assert (score["true"], score["n"], score["unjudged"], score["pending"]) == ("1", "1", "0", "2")


def test_each_run_with_an_unknown_is_listed_with_validator_metric_and_reason() -> None:
    report = build_report(LAYOUT, ROWS)
    by_run = {d["run"]: d for d in report["by_run"]}
    assert set(by_run) == {"r1", "r2", "r4"}  # r3 judged everything
    assert by_run["r1"]["unjudged"] == [
        {
            "metric": "tests",
            "validator": "score",
            "reason": "the suite ran nothing, so nobody judged it",
        }
    ]
    assert by_run["r1"]["pending"] == [{"metric": "note", "validator": "form"}]
    text = render(report, "md")
    section = text[text.index("### By run") :]
    assert "run `r1` (#1): pending" in section
    assert "`tests` (score) unjudged: the suite ran nothing, so nobody judged it" in section
    assert "`note` (form) pending: no value yet" in section
    # An invalid run's line names its first error; the others follow.
    assert (
        "run `r4` (#1): invalid, first error: score: script score.py exited with code 1" in section
    )
    assert "invalid: form: later error" in section


def test_the_per_run_list_in_csv_and_runs_only() -> None:
    from trysquare.report.render import render_runs

    report = build_report(LAYOUT, ROWS)
    table = list(csv.DictReader(io.StringIO(render(report, "csv"))))
    runs = [
        (r["run"], r["metric"], r["state"], r["validator"]) for r in table if r["table"] == "run"
    ]
    assert ("r1", "tests", "unjudged", "score") in runs
    assert ("r4", "", "invalid", "score") in runs
    assert "run `r2` (#1): pending" in render_runs(report, "md")
    assert [d["run"] for d in json.loads(render_runs(report, "json"))] == ["r1", "r2", "r4"]


SCORE = """
import json, sys
print(json.dumps({"metrics": {"probe": None}, "reasons": {"probe": "no probe was given"}}))
"""


def test_report_runs_on_the_command_line(cli, make_run, tmp_path) -> None:
    folder = tmp_path / "scenario"
    write_script(folder, "score.py", SCORE)
    scenario = write_scenario(
        folder,
        """
[[validation]]
mode = "script"
name = "score"
command = "score.py"
metrics = ["probe"]
""",
    )
    run = make_run("r1", cell="c", repetition=1)
    run.base({"a.py": "x = 1\n"})
    run.finish()
    experiment = tmp_path / "exp"
    assert cli("validate", scenario, experiment, "--no-progress").returncode == 0
    done = cli("report", scenario, experiment, "--runs")
    assert done.returncode == 0, done.stderr
    assert "run `r1` (#1): valid" in done.stdout
    assert "`probe` (score) unjudged: no probe was given" in done.stdout
    assert "### Scores" not in done.stdout
    assert "0/0 \u00b7 1 unjudged" in (experiment / "synthesis.md").read_text(encoding="utf-8")

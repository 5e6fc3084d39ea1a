"""``trysquare report`` over small real matrices, in a subprocess as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

from trysquare.scenario import load_scenario
from trysquare.testing import write_result

from tests.helpers import write_scenario, write_script

SCORE = """
import json, sys
context = json.load(open(sys.argv[1]))
touched = set(context["touched"])
print(json.dumps({"metrics": {
    "delivered": "counter.py" in touched,
    "in_scope": touched <= {"counter.py"},
    "changed": len(touched),
    "touched": sorted(touched),
}}))
"""

SCENARIO = """
[scenario]
name = "report-cli"

[axes]
rule = ["nothing", "rule"]

[[validation]]
mode = "script"
name = "score"
command = "score.py"
metrics = ["delivered", "in_scope", "changed", "touched"]

[verdict]
reference = "nothing"
criteria = ["in_scope"]
validity = ["delivered"]
"""


def build(make_run, tmp_path: Path) -> tuple[Path, Path]:
    folder = tmp_path / "scenario"
    write_script(folder, "score.py", SCORE)
    scenario = write_scenario(folder, SCENARIO)
    # "rule" stays in scope in all 4 runs; "nothing" strays in 3 of 4.
    for index in range(8):
        cell = "rule" if index < 4 else "nothing"
        run = make_run(f"r{index}", cell=cell, repetition=index % 4 + 1)
        run.base({"counter.py": "x = 1\n", "README.md": "hello\n"})
        run.repo.write("counter.py", f"x = {index + 10}\n")
        if cell == "nothing" and index % 4:
            run.repo.write("README.md", "changed too\n")
        run.finish()
    return scenario, tmp_path / "exp"


def test_report_over_a_validated_matrix(cli, make_run, tmp_path: Path) -> None:
    scenario, experiment = build(make_run, tmp_path)
    done = cli("validate", scenario, experiment, "--no-progress")
    assert done.returncode == 0, done.stderr

    first = cli("report", scenario, experiment)
    assert first.returncode == 0, first.stderr
    synthesis = (experiment / "synthesis.md").read_text(encoding="utf-8")
    assert first.stdout == synthesis
    # [axes] order: nothing before rule, though rule's runs are found first.
    assert synthesis.index("| nothing (reference) | 4 | 4/4 | 1/4 |") < synthesis.index(
        "| rule | 4 | 4/4 | 4/4 |"
    )
    assert "| rule | in_scope | 4/4 | 1/4 |" in synthesis
    assert "Diagnostics, recorded per run and never aggregated: `touched` (list)." in synthesis
    assert "### Numbers" in synthesis
    measures = json.loads((experiment / "measures.json").read_text(encoding="utf-8"))
    assert len(measures) == 8 and {row["state"] for row in measures} == {"valid"}

    again = cli("report", scenario, experiment)
    assert again.stdout == first.stdout
    assert (experiment / "synthesis.md").read_text(encoding="utf-8") == synthesis

    as_json = cli("report", scenario, experiment, "--format", "json")
    assert as_json.returncode == 0
    report = json.loads(as_json.stdout)
    assert [c["cell"] for c in report["cells"]] == ["nothing", "rule"]
    (gap,) = report["gaps"]["rows"]
    assert gap["gap"] == 0.75 and gap["state"] in ("established", "inconclusive")
    # synthesis.md is Markdown whatever --format prints.
    assert (experiment / "synthesis.md").read_text(encoding="utf-8") == synthesis

    as_csv = cli("report", scenario, experiment, "--format", "csv")
    assert as_csv.stdout.startswith(
        "table,cell,metric,true,n,estimate,low,high,state,unjudged,pending,run,validator,reason\n"
    )
    assert "score,rule,in_scope,4,4,,,,publishable" in as_csv.stdout


def test_an_invalid_run_makes_report_exit_one_and_says_why(cli, make_run, tmp_path: Path) -> None:
    scenario_path, experiment = build(make_run, tmp_path)
    scenario = load_scenario(scenario_path)
    digest = scenario.validation("score").digest()
    runs = sorted((experiment / "runs").iterdir())
    for run in runs:
        name = run.name
        document = {
            "metrics": {
                "delivered": True,
                "in_scope": True,
                "changed": 1,
                "touched": ["counter.py"],
            },
            "reasons": {},
            "state": "valid",
            "error": None,
            "validator": {"name": "score", "mode": "script", "digest": digest},
            "context_digest": None,
            "duration": 0.1,
        }
        if name == "r1":  # a rule run whose validator crashed
            document.update(metrics={}, state="invalid", error="exited with status 3")
        if name == "r5":  # a nothing run scored by an older validator
            document["validator"]["digest"] = "older"
        write_result(run, "score", document)  # as trysquare recorded it: signed

    done = cli("report", scenario_path, experiment)
    assert done.returncode == 1, done.stderr
    synthesis = (experiment / "synthesis.md").read_text(encoding="utf-8")
    assert "| rule (not publishable) | 4 (1 invalid) | 3/3 |" in synthesis
    assert "| rule | in_scope | 3/3 | 4/4 | – | not publishable |" in synthesis
    assert "run `r1` (#2): invalid, first error: score: exited with status 3" in synthesis
    assert "run `r5`: score" in synthesis  # stale, flagged by run
    assert "| nothing (reference) | 4 | 4/4 | 4/4 |" in synthesis
    measures = json.loads((experiment / "measures.json").read_text(encoding="utf-8"))
    assert {row["id"]: row["state"] for row in measures}["r1"] == "invalid"
    assert next(row for row in measures if row["id"] == "r5")["stale"] == ["score"]


def test_a_report_source_lists_run_folders_only_when_a_format_asks(tmp_path: Path) -> None:
    """The core's formats never read ``run_dirs``: no table of every run is built for them."""
    from collections.abc import Iterator
    from types import SimpleNamespace

    from trysquare.report import report_source

    class Runs:
        read = 0

        def __iter__(self) -> Iterator[SimpleNamespace]:
            Runs.read += 1
            return iter([SimpleNamespace(id="r1", dir=tmp_path / "r1")])

    source = report_source({"publishable": True}, [], SimpleNamespace(runs=Runs(), root=tmp_path))
    assert Runs.read == 0
    assert dict(source.run_dirs) == {"r1": tmp_path / "r1"} and source.run_dirs["r1"].name == "r1"
    assert Runs.read == 1

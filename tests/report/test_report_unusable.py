"""Issue 14.7: a run folder that names its cell but cannot be used counts there as invalid."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import write_scenario, write_script

SCORE = 'import json\nprint(json.dumps({"metrics": {"ok": True}}))\n'
SCENARIO = """
[[validation]]
mode = "script"
name = "score"
command = "score.py"
metrics = ["ok"]
"""


def build(make_run, tmp_path: Path) -> tuple[Path, Path]:
    folder = tmp_path / "scenario"
    write_script(folder, "score.py", SCORE)
    scenario = write_scenario(folder, SCENARIO)
    for index in range(3):
        run = make_run(f"r{index}", cell="plain", repetition=index + 1)
        run.base({"a.py": "x = 1\n"})
        if index == 2:
            run.extra["session"] = "missing-session.jsonl"  # named, never written
        run.finish()
    return scenario, tmp_path / "exp"


def test_a_run_naming_a_missing_session_counts_as_invalid_in_its_cell(
    cli, make_run, tmp_path: Path
) -> None:
    scenario, experiment = build(make_run, tmp_path)
    done = cli("validate", scenario, experiment, "--no-progress")
    assert done.returncode == 1
    assert "3 runs: 2 valid, 1 invalid (cell 'plain' is not publishable)" in done.stdout
    measures = json.loads((experiment / "measures.json").read_text(encoding="utf-8"))
    row = next(r for r in measures if r["id"] == "r2")
    assert (row["cell"], row["repetition"], row["state"]) == ("plain", 3, "invalid")
    assert "missing-session.jsonl" in row["errors"][0]["error"]

    report = cli("report", scenario, experiment, "--format", "json")
    assert report.returncode == 1
    plain = json.loads(report.stdout)["cells"][0]
    assert (plain["runs"], plain["invalid"], plain["publishable"]) == (3, 1, False)
    synthesis = (experiment / "synthesis.md").read_text(encoding="utf-8")
    assert "| plain (not publishable) | 3 (1 invalid) | 2/2 |" in synthesis
    assert (
        "run `r2` (#3): invalid, first error: run.toml: the run folder cannot be used" in synthesis
    )


def test_a_run_toml_naming_no_cell_belongs_to_no_cell(cli, make_run, tmp_path: Path) -> None:
    scenario, experiment = build(make_run, tmp_path)
    (experiment / "runs" / "r2" / "run.toml").write_text("cell = 3\n", encoding="utf-8")
    cli("validate", scenario, experiment, "--no-progress")
    measures = json.loads((experiment / "measures.json").read_text(encoding="utf-8"))
    assert [r["id"] for r in measures] == ["r0", "r1"]

"""``--cell GLOB`` / ``--run GLOB``, ``-x/--exitfirst`` and ``-q/--quiet`` (issue 16.2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trysquare.errors import RunError, UsageError
from trysquare.runs import Experiment, Run
from trysquare.selection import Selection

from tests.helpers import record_run, write_scenario, write_script


def fake_run(root: Path, run_id: str, cell: str) -> Run:
    return record_run(root / run_id, run_id, cell)


def test_globs_choose_runs_and_unreadable_folders(tmp_path: Path) -> None:
    broken = tmp_path / "b9"
    broken.mkdir()
    (broken / "run.toml").write_text('cell = "rule / high"\nrepetition = "x"\n')
    experiment = Experiment(
        root=tmp_path,
        runs=(
            fake_run(tmp_path, "a1", "rule / high"),
            fake_run(tmp_path, "a2", "rule / low"),
            fake_run(tmp_path, "n1", "nothing"),
        ),
        errors=(RunError("b9: bad repetition", run_dir=broken),),
    )
    (chosen,) = Selection(cells=("rule / *",)).apply([experiment])
    assert [r.id for r in chosen.runs] == ["a1", "a2"] and len(chosen.errors) == 1
    (chosen,) = Selection(cells=("rule / *",), runs=("a2", "n*")).apply([experiment])
    assert [r.id for r in chosen.runs] == ["a2"] and chosen.errors == ()
    (chosen,) = Selection(runs=("b9",)).apply([experiment])
    assert chosen.runs == () and len(chosen.errors) == 1  # an unreadable folder counts in its cell
    assert Selection().apply([experiment]) == [experiment]
    with pytest.raises(UsageError, match=r"--cell rul: matches no run"):
        Selection(cells=("rule / *", "rul")).apply([experiment])
    with pytest.raises(UsageError, match=r"--run zz\*: matches no run"):
        Selection(runs=("zz*",)).apply([experiment])
    with pytest.raises(UsageError, match="no run matches all of these together"):
        Selection(cells=("nothing",), runs=("a1",)).apply([experiment])


FAILS_ON_REPETITION = r"""
import json, sys
context = json.load(open(sys.argv[1]))
if context["repetition"] >= BAD:
    sys.stderr.write("\n".join(f"line {n}" for n in range(12)) + "\n")
    sys.exit(2)
print(json.dumps({"metrics": {"ok": True}}))
"""


def build(make_run, tmp_path: Path, bad: int) -> tuple[Path, Path]:
    for index, cell in enumerate(["rule / high", "rule / low", "nothing", "nothing"]):
        run = make_run(f"run{index}", cell=cell, repetition=index)
        run.base({"counter.py": "x = 1\n"})
        run.repo.write("counter.py", f"x = {index}\n")
        run.finish()
    write_script(tmp_path / "s", "score.py", FAILS_ON_REPETITION.replace("BAD", str(bad)))
    scenario = write_scenario(
        tmp_path / "s",
        """
        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["ok"]
    """,
    )
    return scenario, tmp_path / "exp"


def recorded(experiment: Path) -> set[str]:
    return {p.parents[1].name for p in experiment.glob("runs/*/validation/script.json")}


def test_cell_and_run_on_validate_and_report(cli, make_run, tmp_path: Path) -> None:
    scenario, experiment = build(make_run, tmp_path, bad=99)
    done = cli("validate", scenario, experiment, "--no-progress", "--cell", "rule / *")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "2 runs: 2 valid"
    assert recorded(experiment) == {"run0", "run1"}
    # measures.json still holds every run: the two left out are pending.
    rows = {
        row["id"]: row["state"] for row in json.loads((experiment / "measures.json").read_text())
    }
    assert rows == {"run0": "valid", "run1": "valid", "run2": "pending", "run3": "pending"}

    done = cli("validate", scenario, experiment, "--no-progress", "--run", "run3", "--run", "run0")
    assert recorded(experiment) == {"run0", "run1", "run3"}
    assert done.stdout.splitlines()[-1] == "2 runs: 2 valid; 1 result unchanged (reused)"

    report = cli("report", scenario, experiment, "--format", "json", "--cell", "rule / high")
    assert report.returncode == 0, report.stderr
    shown = json.loads(report.stdout)
    assert [cell["cell"] for cell in shown["cells"]] == ["rule / high"] and shown["runs"] == 1
    assert "nothing" in (experiment / "synthesis.md").read_text()  # the file covers every run

    wrong = cli("validate", scenario, experiment, "--cell", "rule/high")
    assert wrong.returncode == 2 and "--cell rule/high: matches no run" in wrong.stderr
    assert wrong.stdout == "" and "Traceback" not in wrong.stderr


def test_exitfirst_and_quiet(cli, make_run, tmp_path: Path) -> None:
    scenario, experiment = build(make_run, tmp_path, bad=0)  # every run is invalid
    done = cli("validate", scenario, experiment, "-x", "-q", "--jobs", "1")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    # -q: the one invalid result (with its stderr's last 10 lines) and the closing line.
    assert lines[0].startswith(
        "[1/4] run0 (rule / high #0) script: invalid: script score.py exited with code 2"
    )
    assert lines[1:11] == [f"    stderr: line {n}" for n in range(2, 12)]
    assert lines[-1] == (
        "4 runs: 1 invalid, 3 pending (cell 'rule / high' is not publishable); "
        "stopped at the first invalid result (-x): 3 task(s) not run"
    )
    assert len(lines) == 12
    assert recorded(experiment) == {"run0"}
    rows = {
        row["id"]: row["state"] for row in json.loads((experiment / "measures.json").read_text())
    }
    assert rows["run0"] == "invalid" and rows["run3"] == "pending"

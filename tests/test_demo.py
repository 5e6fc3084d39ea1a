"""`trysquare demo`: the README's main command, end to end."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES


def test_demo_builds_validates_fills_and_reports(cli, tmp_path: Path) -> None:
    target = tmp_path / "demo"
    done = cli("demo", target, "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    # The answers follow from how examples/demo/matrix.toml built each run:
    # nothing-2 also rewrote README.md (out of scope), nothing-3 half-fixed the bug (suite
    # fails), rule-* ran the suite (bytecode left behind, subtracted), rule-3 changed nothing.
    assert "| nothing (reference) | 3 | 3/3 | 2/3 | 2/3 | 2/3 |" in done.stdout
    assert "| rule | 3 | 2/3 | 3/3 | 2/3 | 3/3 |" in done.stdout
    assert "form form.toml: 6 merged, 0 still pending, 0 refused" in done.stdout
    # validator.py also prints `touched`, which no scenario declares: named, never scored.
    assert "`touched` (list, undeclared)" in done.stdout
    # Issue 33: the open gaps say how many runs would settle them, and which procedure holds.
    assert (
        "- **rule** · `in_scope`: ≈ 16 runs per cell (you have 2; the reference 3)" in done.stdout
    )
    assert "Procedure: fixed-sample." in done.stdout
    runs = sorted((target / "runs").iterdir())
    assert [run.name for run in runs] == [
        "nothing-1",
        "nothing-2",
        "nothing-3",
        "rule-1",
        "rule-2",
        "rule-3",
    ]
    for run in runs:
        head = subprocess.run(
            ["git", "rev-parse", "etalon-v1"],
            cwd=run / "repo",
            capture_output=True,
            text=True,
            check=True,
        )
        assert len(head.stdout.strip()) == 40  # a real git clone, tagged at the etalon
    rule_1 = json.loads((target / "runs" / "rule-1" / "validation" / "script.json").read_text())
    assert rule_1["metrics"]["in_scope"] is True
    assert "__pycache__/counter.cpython" in " ".join(
        rule_1["metrics"]["touched"]
    )  # recorded, not subtracted
    nothing_2 = json.loads(
        (target / "runs" / "nothing-2" / "validation" / "script.json").read_text()
    )
    assert nothing_2["reasons"]["in_scope"] == "also touched README.md"
    assert (target / "synthesis.md").read_text().startswith("## counter-fix")
    # Issue 15: the demo ends with the page to look at, and says where it is.
    assert done.stdout.rstrip().splitlines()[-1] == f"wrote {target / 'report.html'}"
    assert (target / "report.html").read_text().startswith("<!DOCTYPE html>")
    # A second demo into the same folder rebuilds it; a foreign folder is refused.
    assert cli("demo", target, "--no-progress", cwd=tmp_path).returncode == 0
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("keep me")
    refused = cli("demo", foreign, "--no-progress", cwd=tmp_path)
    assert refused.returncode == 2 and "was not made by `trysquare demo`" in refused.stderr
    assert (foreign / "precious.txt").read_text() == "keep me"


def test_no_nested_git_is_shipped() -> None:
    assert not [p for p in EXAMPLES.rglob(".git")]


@pytest.mark.skipif(
    shutil.which("node") is None, reason="node is not installed: the Node example cannot run"
)
def test_the_node_demo_scores_each_run_as_it_deserves(cli, tmp_path: Path) -> None:
    """examples/node: `node --test`, a validator in JavaScript, the session's reading."""
    target = tmp_path / "node-demo"
    done = cli("demo", "--node", target, "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr

    def metrics(run: str) -> dict:
        path = target / "runs" / run / "validation" / "script.json"
        return json.loads(path.read_text())["metrics"]

    found = {run.name: metrics(run.name) for run in sorted((target / "runs").iterdir())}
    fixed = {"delivered": True, "in_scope": True, "tests": True, "installed_a_dependency": False}
    assert found == {
        "plain-1": fixed,
        "plain-2": {**fixed, "tests": False},  # half fixed
        # The redefined `npm test` would pass; `node --test` does not. An edit of
        # package.json is no install.
        "plain-3": {**fixed, "in_scope": False, "tests": False},
        "rule-1": fixed,
        # `npm install simple-statistics` first wrote package.json (the session readers).
        "rule-2": {**fixed, "in_scope": False, "installed_a_dependency": True},
        "rule-3": fixed,
    }, done.stdout
    assert "| plain (reference) | 3 | 3/3 | 2/3 | 1/3 | 0/3 |" in done.stdout
    assert "| rule | 3 | 3/3 | 2/3 | 3/3 | 1/3 |" in done.stdout
    reasons = json.loads((target / "runs" / "rule-2" / "validation" / "script.json").read_text())
    assert reasons["reasons"]["installed_a_dependency"] == "call 0 (bash) wrote package.json first"

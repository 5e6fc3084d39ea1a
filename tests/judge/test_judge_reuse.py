"""A judge is never paid again for nothing: a verdict's identity is what the judge is shown (issue 30)."""

from __future__ import annotations

import shutil
import textwrap

from tests.helpers import write_script
from tests.judge.chatserver import error, script, verdict
from tests.judge.conftest import CELL_B, SCENARIO, JudgeLab

GOOD = {"note_usable": True, "cites_paths": False}
SCORE = r"""
import json, sys
context = json.load(open(sys.argv[1]))
print(json.dumps({"metrics": {"delivered": bool(context["touched"])}, "reasons": {}}))
"""


def _with_script(lab: JudgeLab, pieces: str = '["prompt", "response", "diff"]') -> None:
    write_script(lab.folder, "score.py", SCORE)
    lab.write_scenario(
        text=SCENARIO.format(thinking="off", pieces=pieces)
        + textwrap.dedent("""
        [[validation]]
        name = "score"
        mode = "script"
        command = "score.py"
        metrics = ["delivered"]
    """)
    )


def test_a_copied_experiment_revalidates_with_nothing_recomputed(lab: JudgeLab) -> None:
    _with_script(lab)
    lab.run("r1")
    lab.run("r2", cell=CELL_B)
    lab.respond(lambda _request: verdict(GOOD))
    assert lab.validate().returncode == 0
    asked = len(lab.server.received)
    assert asked == 2

    copy = lab.root / "mis"
    shutil.copytree(lab.exp, copy, symlinks=True)
    shutil.rmtree(lab.exp)  # moved, not only copied: nothing may point at the old place
    done = lab.cli("validate", lab.scenario, copy, "--no-progress")
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(lab.server.received) == asked  # no judge request
    assert "0 runs" not in done.stdout
    assert done.stdout.splitlines()[-1] == "2 runs: 2 valid; 4 results unchanged (reused)"


def test_a_judge_not_shown_the_response_is_not_asked_again_when_it_moves(lab: JudgeLab) -> None:
    lab.write_scenario(pieces='["diff"]')
    run = lab.run("r1")
    lab.respond(lambda _request: verdict(GOOD))
    assert lab.validate().returncode == 0
    asked = len(lab.server.received)
    # The response changes (and its file with it): the judge is shown the diff only.
    (run.path / "response.md").write_text("Another note entirely.\n", encoding="utf-8")
    done = lab.validate()
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(lab.server.received) == asked
    assert "1 result unchanged (reused)" in done.stdout


def test_rejudge_during_an_outage_keeps_the_previous_verdict(lab: JudgeLab) -> None:
    lab.run("r1")
    lab.respond(lambda _request: verdict(GOOD))
    assert lab.validate().returncode == 0
    paid = lab.result()
    lab.respond(script([error(503)] * 10))
    done = lab.validate("--rejudge")
    assert done.returncode == 1
    assert "kept the previous verdict" in done.stdout
    kept = lab.result()
    assert kept["state"] == "valid"
    assert kept["metrics"] == paid["metrics"]
    report = lab.cli("report", lab.scenario, lab.exp)
    assert report.returncode == 0, report.stdout  # the cell stays publishable

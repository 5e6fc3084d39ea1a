"""A suite outcome the agent planted (or edited) in `<run>/.trysquare/suite/` is never used.

The run folder is the agent's: it may write `.trysquare/` before trysquare first runs.
trysquare signs each recorded suite outcome with a key kept in its own cache, outside
every run; a forged "passed" — unsigned, signed with a guessed key, or a real entry
whose value was flipped — is ignored and the suite runs again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.assay.test_suite_cache import PYTHON, make_matrix, result, reused

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare._suitecache",)


# A validator that never runs the suite: whatever sits in its report file is not its report.
NO_SUITE = f"""#!{PYTHON}
from trysquare.assay import validator

@validator
def evaluate(run):
    return {{"tests": False}}

if __name__ == "__main__":
    evaluate.cli()
"""


def forgeries(genuine: dict) -> list[dict]:
    passed = {**genuine, "value": True, "reason": ""}
    return [
        {**passed, "mac": "0" * 64},  # signed with nothing trysquare knows
        passed,  # the real entry's signature over a flipped value
    ]


@pytest.mark.parametrize("forgery", range(2))
def test_a_planted_passed_suite_outcome_is_not_used(tmp_path: Path, cli, forgery: int) -> None:
    scenario, run_dir = make_matrix(tmp_path, fixed=False)  # the agent's code fails its suite
    first = cli("validate", scenario, run_dir.parent, "--no-progress")
    assert first.returncode == 0, first.stderr
    assert result(run_dir)["metrics"] == {"tests": False}
    [entry] = (run_dir / ".trysquare" / "suite").glob("*.json")
    genuine = json.loads(entry.read_text(encoding="utf-8"))
    assert genuine["value"] is False
    # The agent's file under the name trysquare will look for.
    entry.write_text(json.dumps(forgeries(genuine)[forgery]), encoding="utf-8")

    again = cli("validate", scenario, run_dir.parent, "--no-progress", "--replay", "--force")
    assert again.returncode == 0, again.stderr
    document = result(run_dir)
    assert document["metrics"] == {"tests": False}
    assert not reused(document)
    # The suite's real outcome replaced the forgery.
    assert json.loads(entry.read_text(encoding="utf-8"))["value"] is False


def test_a_planted_report_in_the_archive_folder_is_never_signed(tmp_path: Path, cli) -> None:
    """A suite report the agent left where validators once reported their suite is never
    read: the runner runs the suite itself (the suite service) and signs only what it saw."""
    scenario, run_dir = make_matrix(tmp_path, fixed=False, validator=NO_SUITE)
    archive = run_dir / "validation" / "score"
    archive.mkdir(parents=True)
    (archive / "suite-outcome.json").write_text(
        json.dumps({"value": True, "reason": ""}), encoding="utf-8"
    )
    done = cli("validate", scenario, run_dir.parent, "--no-progress")
    assert done.returncode == 0, done.stderr
    assert not list((run_dir / ".trysquare").glob("suite/*.json"))

"""Tasks that start while later runs are still planned cannot plant work in those runs.

Under Landlock, validate starts the first tasks before every clone is pictured. A
validator of the first run that writes into a later run's clone before its picture
(and its first measurement) is taken would have that write recorded as the later
agent's work: the write must fail at the write.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from trysquare import planning
from trysquare.sandbox import sandbox_enabled

from tests.security.guard_fixtures import attempts, build_run, result, run_validate, scenario

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare.sandbox",)


pytestmark = pytest.mark.skipif(
    not sandbox_enabled(), reason="needs Landlock: only then do tasks start early"
)


def test_a_validator_cannot_plant_work_in_a_clone_not_yet_pictured(
    tmp_path: Path, monkeypatch
) -> None:
    first, later = build_run(tmp_path, "r1"), build_run(tmp_path, "r2")
    planted = later.repo.path / "planted.py"
    body = f"""
if os.path.basename(os.path.dirname(repo)) == 'r1':
    attempt("plant", lambda: append({str(planted)!r}, "def solved(): return True\\n"))
"""
    # The later run is planned only once the first run's validator has finished.
    first_result = first.path / "validation" / "attack.json"
    plan_run = planning._plan_run

    def held(scenario_, run, *args, **kwargs):  # type: ignore[no-untyped-def]
        if run.id == "r2":
            deadline = time.monotonic() + 30
            while not first_result.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            assert first_result.exists(), "the first task did not run while r2 waited to be planned"
        return plan_run(scenario_, run, *args, **kwargs)

    monkeypatch.setattr(planning, "_plan_run", held)
    summary, out = run_validate(scenario(tmp_path / "s", body), tmp_path / "exp")
    assert attempts(first)["plant"].startswith("failed"), attempts(first)
    assert not planted.exists()
    context = json.loads((later.path / "validation" / "attack" / "context.json").read_text())
    assert "planted.py" not in context["touched"]
    assert result(later)["state"] == "valid" and summary.exit_code == 0, out

"""The runner's suite service: what a validator's run.tests() asks, and what it is told."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.security.guard_fixtures import run_validate
from tests.security.test_suite_control import _matrix, _result


def test_trysquare_failing_to_run_the_suite_makes_the_task_invalid_never_unjudged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash inside trysquare while it runs the suite (here: the suite runner raising) is
    trysquare's failure, said as such: the task is invalid, naming it, not a quiet unjudged."""
    from trysquare import _suite

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the disk vanished")

    monkeypatch.setattr(_suite, "run_suite", broken)
    scenario = _matrix(tmp_path, {"r1": {}})
    run_validate(scenario, tmp_path / "exp")
    result = _result(tmp_path, "r1")
    assert result["state"] == "invalid", json.dumps(result)
    assert "trysquare could not run the suite: RuntimeError: the disk vanished" in result["error"]

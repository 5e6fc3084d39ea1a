"""The form validator itself: load-time checks, and what ``validate`` records for it."""

from __future__ import annotations

from pathlib import Path

import pytest
from trysquare.errors import ScenarioError
from trysquare.modes import ValidationTask
from trysquare.scenario import load_scenario
from trysquare_form.mode import FormMode, FormValidation

from tests.helpers import write_scenario


def load(tmp_path: Path, pieces: str, metrics: str = '["clear", "usable"]') -> FormValidation:
    path = write_scenario(
        tmp_path,
        f"""\
        [[validation]]
        mode = "form"
        pieces = {pieces}
        metrics = {metrics}
    """,
    )
    (validation,) = load_scenario(path, modes={"form": FormMode()}).validations
    assert isinstance(validation, FormValidation)
    return validation


@pytest.mark.parametrize(
    ("pieces", "message"),
    [
        ("[]", "pieces: names no piece"),
        ('["diff", "diff"]', "pieces: names a piece twice"),
        ('["diff", "session"]', "pieces: unknown piece 'session'"),
    ],
)
def test_pieces_are_refused_at_load(tmp_path: Path, pieces: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        load(tmp_path, pieces)


def task(validation: FormValidation, previous: dict | None) -> ValidationTask:
    return ValidationTask(
        run=None,  # type: ignore[arg-type] - the form reads nothing of the run
        validation=validation,
        context={},
        context_path=Path("/nonexistent/context.json"),
        archive=Path("/nonexistent"),
        previous=previous,
    )


def test_evaluate_keeps_the_humans_values(tmp_path: Path) -> None:
    form = load(tmp_path, '["diff"]')
    assert form.evaluate(task(form, None)).state == "pending"
    assert form.evaluate(task(form, None)).metrics == {}
    origin = {"by": "ana", "at": "2026-01-02T03:04:05+00:00"}
    previous = {
        "metrics": {"clear": False, "usable": True, "dropped": True},
        "reasons": {"clear": "too terse"},
        "provenance": {"clear": origin, "usable": origin, "dropped": origin},
        "state": "valid",
    }
    outcome = form.evaluate(task(form, previous))
    # A metric no longer declared is left out; the history still holds it.
    assert dict(outcome.metrics) == {"clear": False, "usable": True}
    assert dict(outcome.reasons) == {"clear": "too terse"}
    assert {k: dict(v) for k, v in outcome.provenance.items()} == {
        "clear": origin,
        "usable": origin,
    }
    assert outcome.state == "valid"

    partial = {"metrics": {"clear": True}, "provenance": {"clear": origin}, "state": "pending"}
    outcome = form.evaluate(task(form, partial))
    assert dict(outcome.metrics) == {"clear": True}
    assert outcome.state == "pending"
    # A value without provenance did not come from a form: it is not carried.
    assert form.evaluate(task(form, {"metrics": {"clear": True}})).metrics == {}

"""The form mode's table, and what ``validate`` records for it.

Nothing here computes a metric: a human does, through a form that is exported
(:mod:`trysquare_form.export`) and read back (:mod:`trysquare_form.ingest`).
``validate`` only carries the human's values forward, so re-validating a run
never loses one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
from trysquare.api import Outcome, TableSource, Validation, ValidationTask, check_pieces

if TYPE_CHECKING:
    from trysquare.api import Scenario

__all__ = [
    "FormMode",
    "FormValidation",
    "ManualValue",
    "form_validation",
    "manual_values",
    "outcome_for",
]


@attrs.frozen(kw_only=True)
class FormValidation(Validation):
    """``[[validation]] mode = "form"``: ``metrics`` a human fills, over ``pieces``."""

    pieces: tuple[str, ...]

    confines_what_it_runs: ClassVar[bool] = True  # it starts no process

    def evaluate(self, task: ValidationTask) -> Outcome:
        # A re-validation (a changed digest, a changed diff, --force) must keep
        # what a human filled: the only source of these values is an ingest.
        return outcome_for(self, manual_values(task.previous))


@attrs.frozen
class ManualValue:
    """One metric a human filled: its value, its reason, and who filled it when."""

    value: Any
    by: str
    at: str
    reason: str = ""
    form: str = ""  # the form's file name it came from
    form_id: str = ""  # that export's id (its key)
    exported: str = ""  # when that form was exported
    accepted: str = ""  # why it would have been refused, when taken with --accept-stale

    def provenance(self) -> dict[str, str]:
        """Who filled it, when, from which form exported when (the fields that are known)."""
        found = {
            "by": self.by,
            "at": self.at,
            "form": self.form,
            "form_id": self.form_id,
            "exported": self.exported,
            "accepted": self.accepted,
        }
        return {key: value for key, value in found.items() if value or key in ("by", "at")}


def manual_values(result: Mapping[str, Any] | None) -> dict[str, ManualValue]:
    """The values of a recorded result that came from a form (those with provenance)."""
    if not result:
        return {}
    metrics = result.get("metrics") or {}
    reasons = result.get("reasons") or {}
    provenance = result.get("provenance") or {}
    values = {}
    for metric, origin in provenance.items():
        if metric in metrics and isinstance(origin, Mapping):
            values[metric] = ManualValue(
                value=metrics[metric],
                by=str(origin.get("by", "")),
                at=str(origin.get("at", "")),
                reason=str(reasons.get(metric, "")),
                form=str(origin.get("form", "")),
                form_id=str(origin.get("form_id", "")),
                exported=str(origin.get("exported", "")),
                accepted=str(origin.get("accepted", "")),
            )
    return values


def outcome_for(validation: FormValidation, values: Mapping[str, ManualValue]) -> Outcome:
    """The outcome of ``validation`` given the human's values: pending while one is missing."""
    kept = {m: values[m] for m in validation.metrics if m in values}
    missing = [m for m in validation.metrics if m not in kept]
    return Outcome(
        metrics={m: v.value for m, v in kept.items()},
        reasons={m: v.reason for m, v in kept.items() if v.reason},
        state="pending" if missing else "valid",
        provenance={m: v.provenance() for m, v in kept.items()},
    )


def form_validation(scenario: Scenario, name: str | None = None) -> FormValidation:
    """The form validator ``name`` of ``scenario`` (default: its first), or a UsageError."""
    from trysquare.api import UsageError

    forms = [v for v in scenario.validations if isinstance(v, FormValidation)]
    if name is None:
        if not forms:
            raise UsageError(f'{scenario.path.name} declares no [[validation]] with mode = "form"')
        return forms[0]
    for validation in scenario.validations:
        if validation.name == name:
            if not isinstance(validation, FormValidation):
                raise UsageError(
                    f"validator '{name}' of {scenario.path.name} is a {validation.mode}, not a form"
                )
            return validation
    names = ", ".join(v.name for v in forms) or "none"
    raise UsageError(
        f"{scenario.path.name} has no form validator named '{name}' (its forms: {names})"
    )


class FormMode:
    name = "form"

    def load(self, table: Mapping[str, Any], source: TableSource) -> FormValidation:
        form = source.structure(table, FormValidation)
        check_pieces(source, form.pieces)  # at load, as the judge does
        return form

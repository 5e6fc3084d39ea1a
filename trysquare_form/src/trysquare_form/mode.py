"""The form mode's table. Export and ingest arrive with the form issue."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from trysquare.modes import Job, Outcome, TableSource, Validation


@attrs.frozen(kw_only=True)
class FormValidation(Validation):
    pieces: tuple[str, ...]

    def evaluate(self, job: Job) -> Outcome:
        # Nothing to compute: every metric waits for a human until a form is ingested.
        return Outcome(state="pending")


class FormMode:
    name = "form"

    def load(self, table: Mapping[str, Any], source: TableSource) -> FormValidation:
        return source.structure(table, FormValidation)

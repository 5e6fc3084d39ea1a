"""The judge mode's table. Its behaviour arrives with the judge issue."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from trysquare.modes import Job, Outcome, TableSource, Validation


@attrs.frozen(kw_only=True)
class JudgeValidation(Validation):
    provider: str
    model: str
    thinking: str
    rubric: str
    pieces: tuple[str, ...]

    withheld_context_keys = frozenset({"cell", "given"})

    def evaluate(self, job: Job) -> Outcome:
        return Outcome.invalid("the judge mode is not implemented yet")


class JudgeMode:
    name = "judge"

    def load(self, table: Mapping[str, Any], source: TableSource) -> JudgeValidation:
        return source.structure(table, JudgeValidation)

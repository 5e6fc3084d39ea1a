"""The part of a result document an observer is told (see :meth:`trysquare.task_records.TaskResult.from_document`).

Its own module: only a result arriving from afar is structured with it, so a local
``validate`` never builds the class.
"""

from __future__ import annotations

from typing import Any

import attrs

from trysquare.modes import State

__all__ = ["RecordedOutcome"]


@attrs.frozen
class RecordedOutcome:
    """The part of a result document an observer is told, structured strictly."""

    metrics: dict[str, Any]
    reasons: dict[str, str]
    state: State
    error: str | None
    provenance: dict[str, dict[str, str]] | None = None
    notes: tuple[str, ...] = ()
    kept_after: str | None = None

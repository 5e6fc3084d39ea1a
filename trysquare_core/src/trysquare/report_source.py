"""What a report format is, and what it is handed: the shapes ``trysquare report --format``
and a plugin's formats share.

Kept apart from the core's own formats (:mod:`trysquare.report.formats`, which render
through :mod:`trysquare.report.render`), so the hook specifications can name a report
format without reaching the engine: this module imports nothing of trysquare.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs

from trysquare._record import record

__all__ = ["ReportFormat", "ReportSource"]


@record
class ReportSource:
    """What a format renders: the report, every run's row, and where each run lives.

    ``report`` is the plain data ``--format json`` prints; ``rows`` are the
    ``measures.json`` rows (one per run, invalid ones included; from ``trysquare report``, a
    sequence building each plain dict when it is read); ``run_dirs``
    maps a run id to its folder (absent for a folder that could not be read);
    ``root`` is the experiment folder. Everything below a run folder except what
    trysquare wrote there is the measured agent's: a format shows it escaped.
    """

    report: Mapping[str, Any]
    rows: Sequence[Mapping[str, Any]] = ()
    run_dirs: Mapping[str, Path] = attrs.field(factory=dict)
    root: Path | None = None


class ReportFormat(Protocol):
    """One ``--format`` value."""

    name: str
    description: str
    suffix: str

    def render(self, source: ReportSource) -> str: ...

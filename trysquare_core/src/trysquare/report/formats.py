"""Report formats as plugins see them, and the core's three (md, json, csv).

``trysquare report --format NAME`` picks among the formats registered through
``trysquare_register_report_formats``; this module is the in-tree plugin that
registers the core's own, so they go through the same door as ``html``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs

from trysquare.hookspecs import hookimpl
from trysquare.report.render import render

__all__ = ["BUILTIN_FORMATS", "ReportFormat", "ReportSource", "TextFormat"]


@attrs.frozen
class ReportSource:
    """What a format renders: the report, every run's row, and where each run lives.

    ``report`` is the plain data ``--format json`` prints; ``rows`` are the
    ``measures.json`` rows (one per run, invalid ones included); ``run_dirs``
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


@attrs.frozen
class TextFormat:
    """One of the core's formats: a renderer of :mod:`trysquare.report.render`."""

    name: str
    description: str
    suffix: str

    def render(self, source: ReportSource) -> str:
        return render(source.report, self.name)


BUILTIN_FORMATS = (
    TextFormat("md", "Markdown (what synthesis.md holds)", ".md"),
    TextFormat("json", "the report as JSON, every run named", ".json"),
    TextFormat("csv", "one long table, a row per cell and metric", ".csv"),
)


@hookimpl
def trysquare_register_report_formats(register: Any) -> None:
    for report_format in BUILTIN_FORMATS:
        register(report_format)

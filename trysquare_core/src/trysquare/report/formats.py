"""The core's three report formats (md, json, csv); what a format is and is handed lives in
:mod:`trysquare.report_source` (kept here by name too).

``trysquare report --format NAME`` picks among the formats registered through
``trysquare_register_report_formats``; this module is the in-tree plugin that
registers the core's own, so they go through the same door as ``html``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trysquare._record import record
from trysquare.hookspecs import hookimpl
from trysquare.report.render import render

if TYPE_CHECKING:
    from trysquare.report_source import ReportFormat, ReportSource

__all__ = ["BUILTIN_FORMATS", "ReportFormat", "ReportSource", "TextFormat"]


def __getattr__(name: str) -> Any:
    # Served from trysquare.report_source when asked for: a report in Markdown (the
    # default) hands no format a source, so the record is not built on its start.
    if name in ("ReportFormat", "ReportSource"):
        from trysquare import report_source

        return getattr(report_source, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@record
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

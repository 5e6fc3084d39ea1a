"""``trysquare report``: per-cell tables and verdicts that survive resampling.

``measures.json`` is rebuilt from the per-run results first, so the report and
the files beside each run never disagree. Then: the score table (``x/n`` per
boolean metric), medians with bootstrap intervals, the gap table against
``[verdict].reference``, judge/human agreement, and — by run — why a cell is
not publishable and which results are stale.

- :mod:`trysquare.report.stats`: bootstrap and kappa (stdlib only).
- :mod:`trysquare.report.tables`: rows -> the report as plain data.
- :mod:`trysquare.report.render`: that data as Markdown, JSON or CSV.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from trysquare.errors import UsageError
from trysquare.report.render import render, render_runs
from trysquare.report.tables import Layout, build_report, declared_cells
from trysquare.report.tables import cell_order as _cell_order

__all__ = [
    "SYNTHESIS_FILE",
    "Layout",
    "build_report",
    "cell_order",
    "render",
    "report_format",
    "report_source",
    "run_report",
]

SYNTHESIS_FILE = "synthesis.md"


def cell_order(scenario: Any, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Cells as ``[variants]``/``[axes]`` declare them when they do, else by first appearance."""
    declared = declared_cells(scenario.axes, scenario.variants)
    return _cell_order(declared, [row["cell"] for row in rows])


def run_report(
    scenario: Any,
    experiment: Any,
    fmt: str = "md",
    *,
    runs_only: bool = False,
    output: Path | None = None,
    selected: Any = None,
    out: Callable[[str], object] | None = None,
) -> int:
    """Rebuild ``measures.json``, write ``synthesis.md``, print the report in ``fmt``.

    ``fmt`` is any registered report format (``md``, ``json``, ``csv``, a
    plugin's ``html``). With ``output`` the report goes to that file instead of
    standard output. With ``runs_only`` (``report --runs``) only the per-run list
    is printed, whole (the Markdown names at most 10 runs per cell);
    ``synthesis.md`` is written all the same.

    With ``selected`` (``--cell``/``--run``: the experiment with only the chosen
    runs), ``measures.json`` and ``synthesis.md`` still cover every run, and the
    report printed (or written to ``output``) covers the chosen ones. ``out`` writes
    the printed report (default: ``sys.stdout.write`` at the time of the call).

    Returns the exit code (of the report printed): 0 when every cell is publishable, 1 otherwise (a run
    folder that could not be read, or a reference with no run, counts too: no
    trustworthy verdict can be drawn).
    """
    from trysquare import _atomic, results

    chosen = report_format(fmt)
    if runs_only and fmt not in ("md", "json", "csv"):
        raise UsageError(f"report --runs prints md, json or csv, not '{fmt}'")
    current = {v.name: v.digest() for v in scenario.validations}
    # Held small (keys and empty containers shared): a report holds every run's row.
    rows = results.hold_measures(scenario, experiment.runs, current, unusable=experiment.errors)
    results.write_measures(experiment.root, rows)
    report = build_report(
        Layout.from_scenario(scenario),
        rows,
        appearance=[run.cell for run in experiment.runs],
        skipped=[str(error) for error in experiment.errors],
    )
    markdown = render(report, "md")
    _atomic.write_text(experiment.root / SYNTHESIS_FILE, markdown)
    if selected is not None:
        folders = {run.dir for run in selected.runs} | {error.run_dir for error in selected.errors}
        rows = _rows_of(rows, experiment, folders)
        experiment = selected
        report = build_report(
            Layout.from_scenario(scenario),
            rows,
            appearance=[run.cell for run in experiment.runs],
            skipped=[str(error) for error in experiment.errors],
        )
        markdown = render(report, "md")
    if runs_only:
        text = render_runs(report, fmt)
    elif fmt == "md":
        text = markdown
    else:
        text = chosen.render(report_source(report, rows, experiment))
    if output is None:
        (out or sys.stdout.write)(text)
    else:
        _atomic.write_text(output, text)
        print(f"wrote {output}")
    return 0 if report["publishable"] else 1


def _rows_of(
    rows: Sequence[dict[str, Any]], experiment: Any, chosen: set[Any]
) -> list[dict[str, Any]]:
    """The measures rows of the runs (and unusable run folders) whose folder is in ``chosen``."""
    from trysquare.results import unusable_row

    ids = {run.id for run in experiment.runs if run.dir in chosen}
    unusable = {
        row["id"]
        for row in (unusable_row(e) for e in experiment.errors if e.run_dir in chosen)
        if row
    }
    return [
        row for row in rows if (row["id"] in unusable if row.get("unusable") else row["id"] in ids)
    ]


def report_format(name: str) -> Any:
    """The registered report format called ``name``; a usage error naming those there are."""
    from trysquare import plugins

    formats = plugins.report_formats([name])
    if name not in formats:
        known = ", ".join(sorted(formats)) or "none"
        from trysquare._install import install_hint

        hint = ""
        if name == "html":
            hint = f"; html comes with trysquare-view: {install_hint('trysquare-view')}"
        raise UsageError(f"--format {name}: no such report format (registered: {known}){hint}")
    return formats[name]


def report_source(report: Any, rows: Sequence[Mapping[str, Any]], experiment: Any) -> Any:
    """The :class:`~trysquare.report_source.ReportSource` of one experiment.

    Its ``rows`` are copies of ``rows``, each made when a format reads it (a report's rows
    share containers: see :mod:`trysquare._measure_rows`)."""
    from trysquare._measure_rows import PlainRows
    from trysquare.report_source import ReportSource

    return ReportSource(
        report=report, rows=PlainRows(rows), run_dirs=_RunFolders(experiment), root=experiment.root
    )


class _RunFolders(Mapping[str, Path]):
    """Each run's folder by its id, built when a format first asks: the core's formats never
    do, and a table of every run costs memory at 100,000 runs."""

    def __init__(self, experiment: Any) -> None:
        self._experiment = experiment
        self._built: dict[str, Path] | None = None

    def _folders(self) -> dict[str, Path]:
        if self._built is None:
            self._built = {str(run.id): run.dir for run in self._experiment.runs}
        return self._built

    def __getitem__(self, run_id: str) -> Path:
        return self._folders()[run_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._folders())

    def __len__(self) -> int:
        return len(self._folders())

"""The report as Markdown (``synthesis.md``, a CI job summary), JSON or CSV.

Each renderer reads only the dict :func:`trysquare.report.tables.build_report`
returns, so the three formats cannot disagree.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["render", "render_csv", "render_json", "render_md"]

# Per cell, how many runs the Markdown names before "... and N more": a CI job
# summary must stay small whatever the matrix; --format json names them all.
MD_RUNS_PER_CELL = 10

Report = Mapping[str, Any]


def _cellsafe(text: object) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _number(value: float | None) -> str:
    if value is None:
        return "–"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"


def _signed(value: float) -> str:
    return f"{value:+.3f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _capped(items: Sequence[str], indent: str = "  ") -> list[str]:
    lines = [f"{indent}- {item}" for item in items[:MD_RUNS_PER_CELL]]
    if len(items) > MD_RUNS_PER_CELL:
        lines.append(f"{indent}- … and {len(items) - MD_RUNS_PER_CELL} more (see `--format json`)")
    return lines


def _cell_label(cell: Mapping[str, Any]) -> str:
    label = _cellsafe(cell["cell"])
    if cell["reference"]:
        label += " (reference)"
    if not cell["publishable"]:
        label += " (not publishable)"
    return label


def render_md(report: Report) -> str:
    cells = report["cells"]
    metrics = report["metrics"]
    blocked = [cell for cell in cells if not cell["publishable"]]
    lines = [f"## {report['scenario']}", ""]
    summary = f"{report['runs']} run(s) in {len(cells)} cell(s); "
    if blocked:
        summary += f"{len(blocked)} cell(s) not publishable."
    elif report["publishable"]:
        summary += "every cell is publishable."
    else:
        summary += "every cell is publishable, but see the notes."
    lines += [summary, ""]

    lines += ["### Scores", ""]
    rows = []
    for cell in cells:
        runs = str(cell["runs"]) + (f" ({cell['invalid']} invalid)" if cell["invalid"] else "")
        scores = [f"{cell['scores'][m]['true']}/{cell['scores'][m]['n']}" for m in metrics["boolean"]]
        rows.append([_cell_label(cell), runs, *scores])
    lines += _table(["cell", "runs", *map(_cellsafe, metrics["boolean"])], rows)
    lines += ["", "`x/n`: true out of the runs that could judge it; invalid runs are left out."]

    if metrics["number"]:
        lines += ["", "### Numbers", "", "Median [95% bootstrap interval] (n)."]
        rows = []
        for cell in cells:
            values = []
            for metric in metrics["number"]:
                number = cell["numbers"][metric]
                values.append(
                    f"{_number(number['median'])} [{_number(number['low'])}, "
                    f"{_number(number['high'])}] ({number['n']})" if number["n"] else "– (0)"
                )
            rows.append([_cell_label(cell), *values])
        lines += [""] + _table(["cell", *map(_cellsafe, metrics["number"])], rows)
    if metrics["diagnostic"]:
        named = ", ".join(f"`{d['metric']}` ({d['kind']})" for d in metrics["diagnostic"])
        lines += ["", f"Diagnostics, recorded per run and never aggregated: {named}."]

    gaps = report["gaps"]
    if gaps is not None:
        lines += ["", f"### Gaps against `{_cellsafe(gaps['reference'])}`", ""]
        counted = "every counted run"
        if gaps["validity"]:
            counted = "runs where " + " and ".join(f"`{m}`" for m in gaps["validity"]) + " is true"
        lines.append(
            f"Difference of proportions, {counted}; 95% percentile interval from "
            f"{gaps['resamples']:,} resamples (fixed seed). `established` when it excludes zero."
        )
        rows = []
        for row in gaps["rows"]:
            if row["gap"] is None:
                gap = "–"
            else:
                gap = f"{_signed(row['gap'])} [{_signed(row['low'])}, {_signed(row['high'])}]"
            score, ref = row["cell_score"], row["reference_score"]
            rows.append([
                _cellsafe(row["cell"]), _cellsafe(row["criterion"]),
                f"{score['true']}/{score['n']}", f"{ref['true']}/{ref['n']}", gap, row["state"],
            ])
        if rows:
            lines += [""] + _table(["cell", "criterion", "cell x/n", "reference x/n", "gap [95%]", "state"], rows)

    if report["agreement"]:
        lines += ["", "### Agreement", ""]
        rows = []
        for pair in report["agreement"]:
            raw = "–" if pair["raw"] is None else f"{pair['raw']:.3f}"
            kappa = "undefined" if pair["kappa"] is None else f"{pair['kappa']:.3f}"
            rows.append([" vs ".join(f"`{m}`" for m in pair["pair"]), str(pair["n"]), raw, kappa])
        lines += _table(["pair", "n", "raw agreement", "Cohen's kappa"], rows)
        lines += ["", "n: runs (not invalid) where both are booleans, over every cell."]

    if blocked:
        lines += ["", "### Not publishable", ""]
        for cell in blocked:
            lines.append(f"- **{_cellsafe(cell['cell'])}**")
            lines += _capped([f"run `{w['run']}`: {w['reason']}" for w in cell["why_not"]])

    stale = [(cell["cell"], s) for cell in cells for s in cell["stale"]]
    if stale:
        lines += ["", "### Stale results", "",
                  "Recorded by a validator that has changed since (re-run `validate` to refresh):"]
        by_cell: dict[str, list[str]] = {}
        for cell_name, item in stale:
            by_cell.setdefault(cell_name, []).append(
                f"run `{item['run']}`: {', '.join(item['validators'])}"
            )
        for cell_name, items in by_cell.items():
            lines.append(f"- **{_cellsafe(cell_name)}**")
            lines += _capped(items)

    pending: dict[str, int] = {}
    for cell in cells:
        for metric, count in cell["pending"].items():
            pending[metric] = pending.get(metric, 0) + count
    if pending:
        lines += ["", "Pending (no value yet, left out of the counts): " + ", ".join(
            f"`{metric}` in {count} run(s)" for metric, count in sorted(pending.items())
        ) + "."]

    if report["notes"]:
        lines += ["", "### Notes", ""] + _capped(list(report["notes"]), indent="")
    return "\n".join(lines) + "\n"


def render_json(report: Report) -> str:
    return json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


CSV_COLUMNS = ("table", "cell", "metric", "true", "n", "estimate", "low", "high", "state")


def render_csv(report: Report) -> str:
    """One long table: a row per cell × metric of each section, ready for a dataframe."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)

    def state_of(cell: Mapping[str, Any]) -> str:
        return "publishable" if cell["publishable"] else "not publishable"

    def put(**values: Any) -> None:
        writer.writerow(["" if values.get(k) is None else values[k] for k in CSV_COLUMNS])

    for cell in report["cells"]:
        for metric, score in cell["scores"].items():
            put(table="score", cell=cell["cell"], metric=metric, true=score["true"], n=score["n"],
                state=state_of(cell))
        for metric, number in cell["numbers"].items():
            put(table="number", cell=cell["cell"], metric=metric, n=number["n"],
                estimate=number["median"], low=number["low"], high=number["high"],
                state=state_of(cell))
    if report["gaps"] is not None:
        for row in report["gaps"]["rows"]:
            put(table="gap", cell=row["cell"], metric=row["criterion"], true=row["cell_score"]["true"],
                n=row["cell_score"]["n"], estimate=row["gap"], low=row["low"], high=row["high"],
                state=row["state"])
    for pair in report["agreement"]:
        name = " vs ".join(pair["pair"])
        put(table="kappa", metric=name, n=pair["n"], estimate=pair["kappa"])
        put(table="raw agreement", metric=name, n=pair["n"], estimate=pair["raw"])
    return out.getvalue()


def render(report: Report, fmt: str) -> str:
    if fmt == "json":
        return render_json(report)
    if fmt == "csv":
        return render_csv(report)
    if fmt == "md":
        return render_md(report)
    raise ValueError(f"unknown report format '{fmt}' (md, json or csv)")

"""The report as Markdown (``synthesis.md``, a CI job summary), JSON or CSV.

Each renderer reads only the dict :func:`trysquare.report.tables.build_report`
returns, so the three formats cannot disagree. It is over 600 lines because the three
renderings and the sentences they share (costs, runs needed, the procedure in force) are
kept side by side: a change of wording is made once, for every format.

Cell names, run ids, reasons and errors come from run folders (the measured
agent's): every one goes through :mod:`trysquare._shown` — escaped Markdown,
neutralised CSV cells, JSON with control characters as ``\\u`` escapes — so a
report can neither be restyled nor lie on a terminal.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

from trysquare._shown import csv_cell, json_text, md, md_code

__all__ = [
    "cost_text",
    "render",
    "render_csv",
    "render_json",
    "render_md",
    "render_runs",
    "tokens_text",
    "usd",
]

# Per cell, how many runs the Markdown names before "... and N more": a CI job
# summary must stay small whatever the matrix; --format json names them all.
MD_RUNS_PER_CELL = 10

Report = Mapping[str, Any]


def _cellsafe(text: object) -> str:
    """Text safe inside a Markdown table cell (and anywhere in a Markdown line)."""
    return md(text)


def _declared(name: object) -> str:
    """A metric name the trusted scenario declared: only kept inside its table cell."""
    return str(name).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _fraction(score: Mapping[str, Any]) -> str:
    """``x/n``, then what is missing from n: ``2/3 · 1 unjudged · 1 pending``."""
    text = f"{score['true']}/{score['n']}"
    return text + _unknown_suffix(score)


def _unknown_suffix(counts: Mapping[str, Any]) -> str:
    # Said beside the number: a metric unjudged everywhere (0/0) must not look
    # like a pending form metric, nor a small n like a small sample.
    text = ""
    for key in ("unjudged", "pending"):
        if counts.get(key):
            text += f" \u00b7 {counts[key]} {key}"
    return text


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
    lines = [f"## {md(report['scenario'])}", ""]
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
        scores = [_fraction(cell["scores"][m]) for m in metrics["boolean"]]
        rows.append([_cell_label(cell), runs, *scores])
    lines += _table(["cell", "runs", *map(_declared, metrics["boolean"])], rows)
    note = "`x/n`: true out of the runs that could judge it; invalid runs are left out."
    if any(s.get("unjudged") or s.get("pending") for c in cells for s in c["scores"].values()):
        note += (
            " `· k unjudged`: runs whose validator could not answer it (null, with a "
            "reason, listed under By run); `· k pending`: runs with no value yet. Neither is in n."
        )
    lines += ["", note]

    if metrics["number"]:
        lines += ["", "### Numbers", "", "Median [95% bootstrap interval] (n)."]
        rows = []
        for cell in cells:
            values = []
            for metric in metrics["number"]:
                number = cell["numbers"][metric]
                values.append(
                    (
                        f"{_number(number['median'])} [{_number(number['low'])}, "
                        f"{_number(number['high'])}] ({number['n']})"
                        if number["n"]
                        else "– (0)"
                    )
                    + _unknown_suffix(number)
                )
            rows.append([_cell_label(cell), *values])
        lines += [""] + _table(["cell", *map(_declared, metrics["number"])], rows)
    if metrics["diagnostic"]:
        named = ", ".join(f"`{d['metric']}` ({d['kind']})" for d in metrics["diagnostic"])
        lines += ["", f"Diagnostics, recorded per run and never aggregated: {named}."]

    gaps = report["gaps"]
    if gaps is not None:
        lines += ["", f"### Gaps against {md_code(gaps['reference'])}", ""]
        counted = "every counted run"
        if gaps["validity"]:
            counted = "runs where " + " and ".join(f"`{m}`" for m in gaps["validity"]) + " is true"
        interval = f"95% percentile interval from {gaps['resamples']:,} resamples (fixed seed)"
        if gaps.get("stopping") == "anytime":
            interval = "95% anytime-valid confidence sequence"
        lines.append(
            f"Difference of proportions, {counted}; {interval}. `established` when it excludes "
            "zero" + (" and Holm's correction agrees." if gaps.get("correction") == "holm" else ".")
        )
        rows = []
        for row in gaps["rows"]:
            if row["gap"] is None:
                gap = "–"
            else:
                gap = f"{_signed(row['gap'])} [{_signed(row['low'])}, {_signed(row['high'])}]"
            score, ref = row["cell_score"], row["reference_score"]  # counted runs only
            rows.append(
                [
                    _cellsafe(row["cell"]),
                    _declared(row["criterion"]),
                    f"{score['true']}/{score['n']}",
                    f"{ref['true']}/{ref['n']}",
                    gap,
                    row["state"],
                ]
            )
        if rows:
            lines += [""] + _table(
                ["cell", "criterion", "cell x/n", "reference x/n", "gap [95%]", "state"], rows
            )
        lines += certainty_md(gaps)

    if report["agreement"]:
        lines += ["", "### Agreement", ""]
        rows = []
        for pair in report["agreement"]:
            raw = "–" if pair["raw"] is None else f"{pair['raw']:.3f}"
            kappa = "undefined" if pair["kappa"] is None else f"{pair['kappa']:.3f}"
            rows.append([" vs ".join(f"`{m}`" for m in pair["pair"]), str(pair["n"]), raw, kappa])
        lines += _table(["pair", "n", "raw agreement", "Cohen's kappa"], rows)
        lines += ["", "n: runs (not invalid) where both are booleans, over every cell."]

    lines += _usage_md(report)

    if blocked:
        lines += ["", "### Not publishable", ""]
        # Counted here, named run by run under "By run" (where each invalid run's
        # first error is): listing them twice would double a CI summary's size.
        for cell in blocked:
            parts = []
            if cell["invalid"]:
                parts.append(f"{cell['invalid']} invalid run(s)")
            waiting = {w["run"] for w in cell["why_not"] if w["reason"].startswith("pending:")}
            if waiting:
                parts.append(
                    f"{len(waiting)} run(s) with no value yet for a metric a verdict rests on"
                )
            # A cell-wide reason (no run): a criterion nothing measured, said whole.
            parts += [md(w["reason"]) for w in cell["why_not"] if w["run"] is None]
            lines.append(f"- **{_cellsafe(cell['cell'])}**: {', '.join(parts) or 'see By run'}")

    stale = [(cell["cell"], s) for cell in cells for s in cell["stale"]]
    if stale:
        lines += [
            "",
            "### Stale results",
            "",
            "Recorded by a validator that has changed since (re-run `validate` to refresh):",
        ]
        by_cell: dict[str, list[str]] = {}
        for cell_name, item in stale:
            by_cell.setdefault(cell_name, []).append(
                f"run {md_code(item['run'])}: {', '.join(map(md, item['validators']))}"
            )
        for cell_name, items in by_cell.items():
            lines.append(f"- **{_cellsafe(cell_name)}**")
            lines += _capped(items)

    pending: dict[str, int] = {}
    for cell in cells:
        for metric, count in cell["pending"].items():
            pending[metric] = pending.get(metric, 0) + count
    if pending:
        lines += [
            "",
            "Pending (no value yet, left out of the counts): "
            + ", ".join(
                f"`{metric}` in {count} run(s)" for metric, count in sorted(pending.items())
            )
            + ".",
        ]

    if report["notes"]:
        lines += ["", "### Notes", ""] + _capped([md(note) for note in report["notes"]], indent="")
    if report.get("by_run"):
        lines += [
            "",
            "### By run",
            "",
            (
                "Each run with an invalid result or an unjudged or pending metric, and why "
                "(`trysquare report --runs` lists them all)."
            ),
        ]
        lines += _by_run_md(report, capped=True)
    return "\n".join(lines) + "\n"


# How much of one reason or error a Markdown line carries (json and --runs carry it whole).
MD_REASON_CHARS = 200


def _short(text: object) -> str:
    value = str(text).strip()
    return value if len(value) <= MD_REASON_CHARS else value[: MD_REASON_CHARS - 1] + "…"


def _run_lines(detail: Mapping[str, Any], *, capped: bool = True) -> list[str]:
    """One run's entry: its line (naming the first error when invalid), then one line per item."""
    cut = _short if capped else str
    repetition = "?" if detail["repetition"] is None else detail["repetition"]
    head = f"run {md_code(detail['run'])} (#{repetition}): {detail['state']}"
    errors = detail["errors"]
    if errors:
        first = errors[0]
        head += f", first error: {md(first['validator'] or 'run.toml')}: {md(cut(first['error']))}"
    lines = [head]
    for error in errors[1:]:
        lines.append(
            f"  - invalid: {md(error['validator'] or 'run.toml')}: {md(cut(error['error']))}"
        )
    for item in detail["unjudged"]:
        lines.append(
            f"  - `{item['metric']}` ({md(item['validator'] or 'undeclared')}) unjudged: "
            f"{md(cut(item['reason'] or 'no reason recorded'))}"
        )
    for item in detail["pending"]:
        lines.append(
            f"  - `{item['metric']}` ({md(item['validator'] or '?')}) pending: no value yet"
        )
    return lines


def _by_run_md(report: Report, *, capped: bool) -> list[str]:
    by_cell: dict[str, list[Mapping[str, Any]]] = {}
    for detail in report.get("by_run") or ():
        by_cell.setdefault(detail["cell"], []).append(detail)
    lines: list[str] = []
    for cell, details in by_cell.items():
        lines.append(f"- **{md(cell)}**")
        shown = details[:MD_RUNS_PER_CELL] if capped else details
        for detail in shown:
            entry = _run_lines(detail, capped=capped)
            lines.append(f"  - {entry[0]}")
            lines += [f"  {line}" for line in entry[1:]]
        if len(details) > len(shown):
            lines.append(
                f"  - … and {len(details) - len(shown)} more (see `trysquare report --runs`)"
            )
    return lines


def render_runs(report: Report, fmt: str) -> str:
    """Only the per-run list (``report --runs``), uncapped, in ``fmt``."""
    details = list(report.get("by_run") or ())
    if fmt == "json":
        return json_text(json.dumps(details, indent=2, sort_keys=True, ensure_ascii=False)) + "\n"
    if fmt == "csv":
        import csv  # only a CSV report needs it

        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for row in _run_rows(details):
            writer.writerow(row)
        return out.getvalue()
    if not details:
        return "Every run is valid, with every metric judged.\n"
    return "\n".join(_by_run_md(report, capped=False)) + "\n"


def render_json(report: Report) -> str:
    # schema_version: a reader checks it before trusting a key (trysquare.ci.SCHEMA_VERSION).
    from trysquare.ci import SCHEMA_VERSION

    report = {**report, "schema_version": SCHEMA_VERSION}
    text = json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    return json_text(text) + "\n"


CSV_COLUMNS = (
    "table",
    "cell",
    "metric",
    "true",
    "n",
    "estimate",
    "low",
    "high",
    "state",
    "unjudged",
    "pending",
    "run",
    "validator",
    "reason",
)


def _csv_row(**values: Any) -> list[Any]:
    return ["" if values.get(k) is None else csv_cell(values[k]) for k in CSV_COLUMNS]


def _run_rows(details: Sequence[Mapping[str, Any]]) -> list[list[Any]]:
    """``table = run`` rows: one per invalid result, unjudged metric and pending metric."""
    rows = []
    for detail in details:
        common = {"table": "run", "cell": detail["cell"], "run": detail["run"]}
        for error in detail["errors"]:
            rows.append(
                _csv_row(
                    **common, state="invalid", validator=error["validator"], reason=error["error"]
                )
            )
        for item in detail["unjudged"]:
            rows.append(
                _csv_row(
                    **common,
                    metric=item["metric"],
                    state="unjudged",
                    validator=item["validator"],
                    reason=item["reason"],
                )
            )
        for item in detail["pending"]:
            rows.append(
                _csv_row(
                    **common, metric=item["metric"], state="pending", validator=item["validator"]
                )
            )
    return rows


def render_csv(report: Report) -> str:
    """One long table: a row per cell × metric of each section, ready for a dataframe."""
    import csv  # only a CSV report needs it

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)

    def state_of(cell: Mapping[str, Any]) -> str:
        return "publishable" if cell["publishable"] else "not publishable"

    def put(**values: Any) -> None:
        writer.writerow(_csv_row(**values))

    for cell in report["cells"]:
        for metric, score in cell["scores"].items():
            put(
                table="score",
                cell=cell["cell"],
                metric=metric,
                true=score["true"],
                n=score["n"],
                state=state_of(cell),
                unjudged=score.get("unjudged", 0),
                pending=score.get("pending", 0),
            )
        for metric, number in cell["numbers"].items():
            put(
                table="number",
                cell=cell["cell"],
                metric=metric,
                n=number["n"],
                estimate=number["median"],
                low=number["low"],
                high=number["high"],
                state=state_of(cell),
                unjudged=number.get("unjudged", 0),
                pending=number.get("pending", 0),
            )
    if report["gaps"] is not None:
        for row in report["gaps"]["rows"]:
            put(
                table="gap",
                cell=row["cell"],
                metric=row["criterion"],
                true=row["cell_score"]["true"],
                n=row["cell_score"]["n"],
                estimate=row["gap"],
                low=row["low"],
                high=row["high"],
                state=row["state"],
            )
        for values in certainty_csv(report["gaps"]):
            put(**values)
    for pair in report["agreement"]:
        name = " vs ".join(pair["pair"])
        put(table="kappa", metric=name, n=pair["n"], estimate=pair["kappa"])
        put(table="raw agreement", metric=name, n=pair["n"], estimate=pair["raw"])
    for row in _run_rows(report.get("by_run") or ()):
        writer.writerow(row)
    for usage in report.get("usage") or ():
        # Long, like the rest: one row per quantity, its value in `estimate`, n the results
        # counted. A blank cell or validator is every cell or every validator; an unknown
        # value is blank with `state` saying why (never 0).
        common = {
            "table": "usage",
            "cell": usage["cell"],
            "validator": usage["validator"],
            "n": usage["results"],
        }
        for key in ("requests", "input_tokens", "cached_tokens", "output_tokens"):
            value = usage[key]
            put(
                **common,
                metric=key,
                estimate=value,
                state="not reported" if value is None else None,
            )
        put(
            **common,
            metric="cost_usd",
            estimate=usage["cost_usd"],
            state=NO_PRICE if usage["cost_usd"] is None and NO_PRICE in usage["unpriced"] else None,
            reason=_unpriced_text(usage) or None,
        )
    return out.getvalue()


def usd(value: float) -> str:
    """A cost in US dollars, with the cents of a cheap judge still visible."""
    if value >= 1:
        return f"${value:,.2f}"
    text = f"{value:.6f}".rstrip("0")
    return "$" + (text + "0" * (2 - len(text.split(".")[1])))


def tokens_text(value: int | None) -> str:
    """A token count, or what an unreported one is (never 0)."""
    return "not reported" if value is None else f"{value:,}"


def _unpriced_text(usage: Mapping[str, Any]) -> str:
    return "; ".join(
        f"{count} result(s): {why}" for why, count in (usage.get("unpriced") or {}).items()
    )


def cost_text(usage: Mapping[str, Any]) -> str:
    """The cost of one usage row: dollars, "no price declared", or both when partly priced."""
    unpriced = usage.get("unpriced") or {}
    if usage.get("cost_usd") is None:
        return "; ".join(unpriced) or NO_PRICE
    text = usd(usage["cost_usd"])
    if unpriced:
        text += " + " + _unpriced_text(usage)
    return text


NO_PRICE = "no price declared"


def _usage_md(report: Report) -> list[str]:
    usage = report.get("usage") or ()
    if not usage:
        return []
    rows = []
    for item in usage:
        validator = "all validators" if item["validator"] is None else md(item["validator"])
        cell = "**all cells**" if item["cell"] is None else _cellsafe(item["cell"])
        rows.append(
            [
                validator,
                cell,
                str(item["results"]),
                str(item["requests"]),
                tokens_text(item["input_tokens"]),
                tokens_text(item["cached_tokens"]),
                tokens_text(item["output_tokens"]),
                cost_text(item),
            ]
        )
    header = [
        "validator",
        "cell",
        "results",
        "requests",
        "input tokens",
        "of which cached",
        "output tokens",
        "cost (USD)",
    ]
    return [
        "",
        "### Usage and cost",
        "",
        (
            "What the judge providers reported: requests include retries and failed attempts; "
            "invalid and unjudged results count. Costs use the price recorded with each result "
            "(`price_input` / `price_output` of the provider that judged it, per million tokens)."
        ),
        "",
        *_table(header, rows),
    ]


# -- which procedure holds, and the runs needed (issue 33) ---------------------------------


def procedure_lines(gaps: Mapping[str, Any]) -> list[str]:
    """What the gap states mean: the procedure in force, and how many gaps were tested."""
    tested = gaps.get("tested", 0)
    if gaps.get("stopping") == "anytime":
        procedure = (
            "Procedure: anytime-valid. Each interval is a 95% confidence sequence (Robbins' normal "
            "mixture): look after every run and stop at the first `established`; the 5% error "
            "holds over every look."
        )
    else:
        procedure = (
            "Procedure: fixed-sample. Each interval holds for one look at a number of runs fixed "
            "in advance: looking after each batch and stopping at the first `established` voids "
            'its 5% error (`[verdict] stopping = "anytime"` allows that).'
        )
    if gaps.get("correction") == "holm":
        many = (
            f"{tested} gap(s) tested, with Holm's correction: the chance that any of them reads "
            "`established` where there is no gap is at most 5%."
        )
    else:
        many = (
            f"{tested} gap(s) tested, no correction for multiple comparisons: at 5% each, "
            f"identical cells would show {0.05 * tested:.2g} false `established` on average "
            '(`[verdict] correction = "holm"` bounds the chance of any at 5%).'
        )
    return [procedure, many]


def runs_needed_text(needed: Mapping[str, Any]) -> str:
    """``≈ 40 runs per cell (you have 3)``, or why no number of runs will do."""
    if needed["per_cell"] is None:
        return str(needed["why"])
    have = f"you have {needed['have']}"
    if needed["reference_has"] != needed["have"]:
        have += f"; the reference {needed['reference_has']}"
    return f"≈ {needed['per_cell']:,} runs per cell ({have})"


def runs_needed_method(gaps: Mapping[str, Any]) -> str:
    """How the runs needed are estimated, said once."""
    power = f"{gaps.get('power', 0.8):.0%}"
    strictest = " at Holm's strictest step" if gaps.get("correction") == "holm" else ""
    return (
        f"Runs needed: for each gap not established, the runs per cell (each side brought up to "
        f"that many) at which it "
        f"would be established with {power} probability{strictest} if the observed rates held "
        "(normal approximation of the procedure in force, checked against simulated experiments "
        "in `benchmarks/bench_stats.py`); `trysquare plan` turns them into runs to add."
    )


def certainty_md(gaps: Mapping[str, Any]) -> list[str]:
    lines = [""] + procedure_lines(gaps)
    open_gaps = [row for row in gaps["rows"] if row.get("runs_needed")]
    if open_gaps:
        lines += ["", runs_needed_method(gaps), ""]
        lines += [
            f"- **{_cellsafe(row['cell'])}** · `{_declared(row['criterion'])}`: "
            f"{runs_needed_text(row['runs_needed'])}"
            for row in open_gaps
        ]
    return lines


def certainty_csv(gaps: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``procedure`` rows (stopping, correction with the gaps tested) and ``runs needed`` rows."""
    rows: list[dict[str, Any]] = [
        {"table": "procedure", "metric": "stopping", "state": gaps.get("stopping")},
        {
            "table": "procedure",
            "metric": "correction",
            "state": gaps.get("correction"),
            "n": gaps.get("tested"),
        },
    ]
    for row in gaps["rows"]:
        needed = row.get("runs_needed")
        if needed:
            rows.append(
                {
                    "table": "runs needed",
                    "cell": row["cell"],
                    "metric": row["criterion"],
                    "n": needed["have"],
                    "estimate": needed["per_cell"],
                    "state": "not reachable" if needed["per_cell"] is None else "needed",
                    "reason": needed["why"],
                }
            )
    return rows


def render(report: Report, fmt: str) -> str:
    if fmt == "json":
        return render_json(report)
    if fmt == "csv":
        return render_csv(report)
    if fmt == "md":
        return render_md(report)
    raise ValueError(f"unknown report format '{fmt}' (md, json or csv)")

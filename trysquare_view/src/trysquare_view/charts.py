"""The report page's figures: the score tables, the proportion charts and the gap forest.

Drawn here as inline SVG and HTML from the report's JSON (no request leaves the page);
every text the agent or the scenario chose goes through :func:`~trysquare_view.panel.esc`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from trysquare_view.panel import esc

__all__ = ["wilson"]


def wilson(true: int, n: int, z: float = 1.959964) -> tuple[float, float, float] | None:
    """Proportion and its 95% Wilson score interval; ``None`` when ``n`` is 0."""
    if n <= 0:
        return None
    p = true / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return p, max(0.0, centre - half), min(1.0, centre + half)


def _num(value: float | None) -> str:
    if value is None:
        return "\u2013"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}"


# -- sections ---------------------------------------------------------------------------


def _score_table(report: Mapping[str, Any]) -> str:
    booleans = report["metrics"]["boolean"]
    out = [
        (
            '<h2 id="scores">Scores</h2><table id="score-table"><thead><tr><th>cell</th><th>runs</th>'
            "<th>invalid</th><th>publishable</th>"
        )
    ]
    out += [f"<th>{esc(m)}</th>" for m in booleans]
    out.append("</tr></thead><tbody>")
    for cell in report["cells"]:
        name = esc(cell["cell"])
        label = (
            f'<span class="ref">{name}</span> <span class="tag">reference</span>'
            if cell["reference"]
            else name
        )
        pub = (
            '<td class="pub">yes</td>'
            if cell["publishable"]
            else f'<td class="nopub">no ({len(cell["why_not"])} reason(s))</td>'
        )
        out.append(
            f'<tr data-cell="{name}"><th>{label}</th><td class="num">{cell["runs"]}</td>'
            f'<td class="num">{cell["invalid"]}</td>{pub}'
        )
        for metric in booleans:
            score = cell["scores"][metric]
            extra = "".join(f" · {score[k]} {k}" for k in ("unjudged", "pending") if score.get(k))
            out.append(f'<td class="num">{score["true"]}/{score["n"]}{esc(extra)}</td>')
        out.append("</tr>")
    out.append("</tbody></table>")
    out.append(
        '<p class="note">x/n: true out of the runs that could judge it; invalid runs, '
        "unjudged and pending values are counted beside it, never in n.</p>"
    )
    numbers = report["metrics"]["number"]
    if numbers:
        out.append("<h3>Numbers</h3><table><thead><tr><th>cell</th>")
        out += [f"<th>{esc(m)}</th>" for m in numbers]
        out.append("</tr></thead><tbody>")
        for cell in report["cells"]:
            out.append(f"<tr><th>{esc(cell['cell'])}</th>")
            for metric in numbers:
                number = cell["numbers"][metric]
                text = (
                    f"{_num(number['median'])} [{_num(number['low'])}, {_num(number['high'])}] "
                    f"({number['n']})"
                    if number["n"]
                    else "\u2013 (0)"
                )
                # What is missing from n, as beside every x/n (and in the Markdown report).
                text += "".join(
                    f" \u00b7 {number[k]} {k}" for k in ("unjudged", "pending") if number.get(k)
                )
                out.append(f'<td class="num">{esc(text)}</td>')
            out.append("</tr>")
        out.append(
            '</tbody></table><p class="note">median [95% bootstrap interval] (n); '
            "unjudged and pending values are counted beside it, never in n</p>"
        )
    return "".join(out)


def _axis(
    x0: float,
    x1: float,
    top: float,
    bottom: float,
    ticks: Sequence[float],
    lo: float,
    hi: float,
    zero: float | None = None,
) -> str:
    out = []
    for tick in ticks:
        x = x0 + (tick - lo) / (hi - lo) * (x1 - x0)
        out.append(
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="#e3e3e3"/>'
            f'<text x="{x:.1f}" y="{bottom + 14}" text-anchor="middle">{tick:g}</text>'
        )
    if zero is not None:
        x = x0 + (zero - lo) / (hi - lo) * (x1 - x0)
        out.append(
            f'<line class="zero" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" '
            'stroke="#333" stroke-dasharray="4 3"/>'
        )
    return "".join(out)


def _proportion_chart(report: Mapping[str, Any], metric: str) -> str:
    cells = report["cells"]
    row_h, left, x0, x1 = 24, 8, 190, 560
    height = 20 + row_h * len(cells) + 24
    out = [
        (
            f'<figure class="chart" data-metric="{esc(metric)}"><figcaption>{esc(metric)}: proportion '
            f'true per cell, 95% Wilson interval</figcaption><svg role="img" width="680" '
            f'height="{height}" viewBox="0 0 680 {height}" xmlns="http://www.w3.org/2000/svg">'
            f"<title>{esc(metric)}</title>"
        )
    ]
    bottom = 10 + row_h * len(cells)
    out.append(_axis(x0, x1, 6, bottom, [0, 0.25, 0.5, 0.75, 1], 0, 1))
    for i, cell in enumerate(cells):
        y = 20 + i * row_h
        score = cell["scores"].get(metric, {"true": 0, "n": 0})
        name = esc(str(cell["cell"])[:60] + (" (reference)" if cell["reference"] else ""))
        out.append(f'<text x="{left}" y="{y + 4}">{name}</text>')
        interval = wilson(score["true"], score["n"])
        if interval is None:
            out.append(f'<text x="{x0}" y="{y + 4}" fill="#666">no judged run</text>')
            continue
        p, low, high = interval
        sx = lambda v: x0 + v * (x1 - x0)
        colour = "#1a73e8" if not cell["reference"] else "#333"
        out.append(
            f'<line x1="{sx(low):.1f}" y1="{y}" x2="{sx(high):.1f}" y2="{y}" stroke="{colour}" '
            f'stroke-width="2"/><circle cx="{sx(p):.1f}" cy="{y}" r="5" fill="{colour}">'
            f"<title>{name}: {score['true']}/{score['n']} = {p:.2f} [{low:.2f}, {high:.2f}]</title>"
            f'</circle><text x="{x1 + 12}" y="{y + 4}">{score["true"]}/{score["n"]}</text>'
        )
    out.append("</svg></figure>")
    return "".join(out)


def _forest(report: Mapping[str, Any]) -> str:
    gaps = report.get("gaps")
    if gaps is None:
        return ""
    out = [f'<h2 id="gaps">Gaps against {esc(gaps["reference"])}</h2>']
    rows = gaps["rows"]
    if not rows:
        return out[0] + '<p class="note">no gap could be drawn (see the notes).</p>'
    row_h, x0, x1 = 24, 260, 600
    height = 20 + row_h * len(rows) + 24
    bottom = 10 + row_h * len(rows)
    anytime = gaps.get("stopping") == "anytime"
    sequence = "confidence sequence (anytime-valid)" if anytime else "interval"
    out.append(
        f'<figure class="chart" id="forest"><figcaption>gap (cell \u2212 reference) and its 95% '
        f"{sequence}; zero dashed; right: runs per cell that would establish an open gap"
        f'</figcaption><svg role="img" width="{FOREST_WIDTH}" height="{height}" '
        f'viewBox="0 0 {FOREST_WIDTH} {height}" xmlns="http://www.w3.org/2000/svg">'
        "<title>gaps</title>"
    )
    out.append(_axis(x0, x1, 6, bottom, [-1, -0.5, 0, 0.5, 1], -1, 1, zero=0))
    sx = lambda v: x0 + (v + 1) / 2 * (x1 - x0)
    for i, row in enumerate(rows):
        y = 20 + i * row_h
        label = esc(f"{str(row['cell'])[:40]} \u00b7 {row['criterion']}")
        out.append(f'<text x="8" y="{y + 4}">{label}</text>')
        if row["gap"] is None:
            out.append(f'<text x="{x0}" y="{y + 4}" fill="#666">{esc(row["state"])}</text>')
            continue
        colour = "#137333" if row["state"] == "established" else "#8a5a00"
        out.append(
            f'<line x1="{sx(row["low"]):.1f}" y1="{y}" x2="{sx(row["high"]):.1f}" y2="{y}" '
            f'stroke="{colour}" stroke-width="2"/><rect x="{sx(row["gap"]) - 4:.1f}" '
            f'y="{y - 4}" width="8" height="8" fill="{colour}"><title>{label}: '
            f"{row['gap']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}] {esc(row['state'])}"
            f'</title></rect><text x="{x1 + 10}" y="{y + 4}">{row["gap"]:+.2f} '
            f"{esc(row['state'])}</text>"
        )
        out.append(_runs_needed_mark(row, x1 + 130, y))
    out.append("</svg></figure>")
    out.append(_procedure_note(gaps))
    out.append(
        '<table id="gap-table"><thead><tr><th>cell</th><th>criterion</th><th>cell x/n</th>'
        "<th>reference x/n</th><th>gap [95%]</th><th>state</th><th>runs needed</th>"
        "</tr></thead><tbody>"
    )
    for row in rows:
        gap = (
            "\u2013"
            if row["gap"] is None
            else f"{row['gap']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}]"
        )
        cs, rs = row["cell_score"], row["reference_score"]
        out.append(
            f"<tr><td>{esc(row['cell'])}</td><td>{esc(row['criterion'])}</td>"
            f"<td>{cs['true']}/{cs['n']}</td><td>{rs['true']}/{rs['n']}</td><td>{gap}</td>"
            f"<td>{esc(row['state'])}</td>{_runs_needed_cell(row)}</tr>"
        )
    out.append("</tbody></table>")
    if any(row.get("runs_needed") for row in rows):
        from trysquare.api import runs_needed_method

        out.append(f'<p class="note" id="runs-needed-method">{_code(runs_needed_method(gaps))}</p>')
    return "".join(out)


# -- runs needed and the procedure in force (issue 33) ------------------------------------

FOREST_WIDTH = 900


def _code(text: str) -> str:
    """Escaped text, its Markdown code spans as ``<code>``."""
    parts = esc(text).split("`")
    return "".join(f"<code>{part}</code>" if i % 2 else part for i, part in enumerate(parts))


def _procedure_note(gaps: Mapping[str, Any]) -> str:
    from trysquare.api import procedure_lines

    lines = "<br>".join(_code(line) for line in procedure_lines(gaps))
    return f'<p class="note" id="procedure">{lines}</p>'


def _runs_needed_cell(row: Mapping[str, Any]) -> str:
    needed = row.get("runs_needed")
    if not needed:
        return "<td>\u2013</td>"
    from trysquare.api import runs_needed_text

    return f'<td class="runs-needed">{esc(runs_needed_text(needed))}</td>'


def _runs_needed_mark(row: Mapping[str, Any], x: float, y: float) -> str:
    needed = row.get("runs_needed")
    if not needed:
        return ""
    if needed["per_cell"] is None:
        return f'<text x="{x}" y="{y + 4}" fill="#666">not reachable</text>'
    return (
        f'<text x="{x}" y="{y + 4}" fill="#0550ae" class="runs-needed">'
        f"\u2248 {needed['per_cell']:,} runs per cell (has {needed['have']})</text>"
    )

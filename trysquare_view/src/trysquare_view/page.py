"""The HTML report: one self-contained page, readable with JavaScript off.

No request leaves the page: styles and the script are inline, charts are SVG
drawn here, and a Content-Security-Policy (``default-src 'none'``, the script
and style allowed by their hashes only) forbids any fetch, image or font — so
even text that escaped escaping could neither run nor call out.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from trysquare_view.panel import esc, run_panel

__all__ = ["PAGE_ROWS", "Window", "build_page", "marks", "ordered_rows", "read_experiment", "wilson"]

MARKS = {
    "true": ("\u2713", "true"),
    "false": ("\u2717", "false"),
    "unjudged": ("?", "unjudged: the validator could not answer"),
    "pending": ("\u2026", "pending: no value yet"),
    "invalid": ("\u2298", "invalid run"),
    "absent": ("\u2013", "not recorded"),
}

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:1200px;padding:0 1em;color:#1d1d1f}
h1{font-size:1.5em}h2{margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0;display:block;max-width:100%;overflow-x:auto}
th,td{border:1px solid #ddd;padding:.2em .5em;text-align:left;vertical-align:top}
thead th{background:#f4f4f6}.num{text-align:right}
.ref{font-weight:bold}.tag{font-size:.8em;padding:0 .35em;border-radius:3px;background:#eee}
.pub{background:#dff3e2}.nopub{background:#fbe3e3}
.m-true{color:#137333}.m-false{color:#b3261e}.m-unjudged{color:#8a5a00}.m-pending{color:#666}.m-invalid{color:#6b2fb5}
td.mark{text-align:center;font-weight:bold}
.st-invalid{color:#6b2fb5}.st-pending{color:#666}.st-valid{color:#137333}
.filters{margin:.5em 0}.filters label{margin-right:1em}.pager a{margin:0 .3em}
details.run{border:1px solid #ccc;border-radius:4px;margin:.4em 0;padding:.2em .6em}
details.run[open]{box-shadow:0 0 0 2px #8ab4f8}
pre{background:#f7f7f9;padding:.5em;overflow:auto;max-height:30em;white-space:pre-wrap;word-break:break-all}
pre.patch{white-space:pre}
.da,.dd,.dh,.dm{display:block}.da{background:#e6ffec;color:#116329}.dd{background:#ffebe9;color:#82071e}
.dh{color:#0550ae}.dm{color:#57606a;font-weight:bold}
i.tk{font-style:normal;color:#8250df}i.ts{font-style:normal;color:#0a3069}i.tc{color:#6e7781}
.note{color:#555;font-style:italic}.error{color:#b3261e;white-space:pre-wrap}
td.reason{white-space:pre-wrap;overflow-wrap:anywhere;min-width:20em}
svg text{font:12px system-ui,sans-serif}
.hidden{display:none}
tr.total td{font-weight:bold;background:#fafafa}td.unpriced{color:#8a5a00}
"""

SCRIPT = r"""
(function(){
  var lazy = document.body.getAttribute('data-lazy') === '1';
  var f = document.getElementById('filters');
  if (f) { f.hidden = false; }
  var cellSel = document.getElementById('f-cell'), metricSel = document.getElementById('f-metric'),
      stateSel = document.getElementById('f-state');
  function apply(){
    var cell = cellSel.value, metric = metricSel.value, state = stateSel.value, shown = 0;
    document.querySelectorAll('#matrix [data-metric]').forEach(function(el){
      el.classList.toggle('hidden', metric !== '' && el.getAttribute('data-metric') !== metric);
    });
    document.querySelectorAll('#matrix tbody').forEach(function(group){
      var inCell = cell === '' || group.getAttribute('data-cell') === cell, any = false;
      group.querySelectorAll('tr.runrow').forEach(function(row){
        var ok = inCell;
        if (ok && state !== '') {
          ok = false;
          row.querySelectorAll('td[data-metric]').forEach(function(td){
            if ((metric === '' || td.getAttribute('data-metric') === metric) &&
                td.getAttribute('data-mark') === state) { ok = true; }
          });
          if (state === 'invalid' && row.getAttribute('data-state') === 'invalid') { ok = true; }
        }
        row.classList.toggle('hidden', !ok);
        if (ok) { any = true; shown++; }
      });
      group.classList.toggle('hidden', !any);
    });
    document.getElementById('f-count').textContent = shown + ' run(s) shown';
  }
  if (lazy) {
    // `view` filters and pages on the server: a change submits the form (it also works without script).
    [cellSel, metricSel, stateSel].forEach(function(s){
      if (s) { s.addEventListener('change', function(){ f.submit(); }); }
    });
  } else {
    [cellSel, metricSel, stateSel].forEach(function(s){ if (s) { s.addEventListener('change', apply); } });
    if (cellSel) { apply(); }
  }
  function reveal(panel){ panel.open = true; panel.scrollIntoView({block: 'start'}); }
  function openRun(n){
    var panel = document.getElementById('run-' + n);
    if (panel) { reveal(panel); return; }
    if (!lazy) { return; }
    fetch('run/' + n).then(function(r){
      if (!r.ok) { throw new Error('run ' + n + ': HTTP ' + r.status); }
      return r.text();
    }).then(function(text){
      document.getElementById('panels').insertAdjacentHTML('beforeend', text);
      reveal(document.getElementById('run-' + n));
    }).catch(function(e){
      document.getElementById('panels').insertAdjacentText('beforeend', String(e));
    });
  }
  document.addEventListener('click', function(ev){
    var a = ev.target.closest ? ev.target.closest('a[data-run]') : null;
    if (!a) { return; }
    ev.preventDefault();
    openRun(a.getAttribute('data-run'));
  });
})();
"""


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def csp(lazy: bool) -> str:
    """The page's Content-Security-Policy: the report file's meta tag (``lazy`` false) and
    the header of every response of ``trysquare view`` (``lazy`` true) say the same."""
    own = "'self'" if lazy else "'none'"  # view: panels fetched, the filter form submitted, to itself
    return (f"default-src 'none'; style-src {_hash(STYLE)}; script-src {_hash(SCRIPT)}; "
            f"connect-src {own}; img-src 'none'; base-uri 'none'; form-action {own}")


def wilson(true: int, n: int, z: float = 1.959964) -> tuple[float, float, float] | None:
    """Proportion and its 95% Wilson score interval; ``None`` when ``n`` is 0."""
    if n <= 0:
        return None
    p = true / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return p, max(0.0, centre - half), min(1.0, centre + half)


def marks(row: Mapping[str, Any], metric: str) -> tuple[str, str]:
    """``(mark, shown text)`` of one run and metric: true/false/unjudged/pending/invalid/number."""
    if row.get("state") == "invalid":
        return "invalid", MARKS["invalid"][0]
    if metric in (row.get("pending") or ()):
        return "pending", MARKS["pending"][0]
    values = row.get("metrics") or {}
    if metric not in values:
        return "absent", MARKS["absent"][0]
    value = values[metric]
    if value is None:
        return "unjudged", MARKS["unjudged"][0]
    if value is True:
        return "true", MARKS["true"][0]
    if value is False:
        return "false", MARKS["false"][0]
    if isinstance(value, (int, float)):
        return "number", _num(value)
    return "value", json.dumps(value, ensure_ascii=False)[:40]


def _num(value: float | None) -> str:
    if value is None:
        return "\u2013"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}"


# -- sections ---------------------------------------------------------------------------


def _score_table(report: Mapping[str, Any]) -> str:
    booleans = report["metrics"]["boolean"]
    out = ['<h2 id="scores">Scores</h2><table id="score-table"><thead><tr><th>cell</th><th>runs</th>'
           "<th>invalid</th><th>publishable</th>"]
    out += [f"<th>{esc(m)}</th>" for m in booleans]
    out.append("</tr></thead><tbody>")
    for cell in report["cells"]:
        name = esc(cell["cell"])
        label = f'<span class="ref">{name}</span> <span class="tag">reference</span>' if cell["reference"] else name
        pub = ('<td class="pub">yes</td>' if cell["publishable"] else
               f'<td class="nopub">no ({len(cell["why_not"])} reason(s))</td>')
        out.append(f'<tr data-cell="{name}"><th>{label}</th><td class="num">{cell["runs"]}</td>'
                   f'<td class="num">{cell["invalid"]}</td>{pub}')
        for metric in booleans:
            score = cell["scores"][metric]
            extra = "".join(f" · {score[k]} {k}" for k in ("unjudged", "pending") if score.get(k))
            out.append(f'<td class="num">{score["true"]}/{score["n"]}{esc(extra)}</td>')
        out.append("</tr>")
    out.append("</tbody></table>")
    out.append('<p class="note">x/n: true out of the runs that could judge it; invalid runs, '
               "unjudged and pending values are counted beside it, never in n.</p>")
    numbers = report["metrics"]["number"]
    if numbers:
        out.append('<h3>Numbers</h3><table><thead><tr><th>cell</th>')
        out += [f"<th>{esc(m)}</th>" for m in numbers]
        out.append("</tr></thead><tbody>")
        for cell in report["cells"]:
            out.append(f"<tr><th>{esc(cell['cell'])}</th>")
            for metric in numbers:
                number = cell["numbers"][metric]
                text = (f"{_num(number['median'])} [{_num(number['low'])}, {_num(number['high'])}] "
                        f"({number['n']})" if number["n"] else "\u2013 (0)")
                # What is missing from n, as beside every x/n (and in the Markdown report).
                text += "".join(
                    f" \u00b7 {number[k]} {k}" for k in ("unjudged", "pending") if number.get(k)
                )
                out.append(f'<td class="num">{esc(text)}</td>')
            out.append("</tr>")
        out.append('</tbody></table><p class="note">median [95% bootstrap interval] (n); '
                   "unjudged and pending values are counted beside it, never in n</p>")
    return "".join(out)


def _axis(x0: float, x1: float, top: float, bottom: float, ticks: Sequence[float],
          lo: float, hi: float, zero: float | None = None) -> str:
    out = []
    for tick in ticks:
        x = x0 + (tick - lo) / (hi - lo) * (x1 - x0)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="#e3e3e3"/>'
                   f'<text x="{x:.1f}" y="{bottom + 14}" text-anchor="middle">{tick:g}</text>')
    if zero is not None:
        x = x0 + (zero - lo) / (hi - lo) * (x1 - x0)
        out.append(f'<line class="zero" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" '
                   'stroke="#333" stroke-dasharray="4 3"/>')
    return "".join(out)


def _proportion_chart(report: Mapping[str, Any], metric: str) -> str:
    cells = report["cells"]
    row_h, left, x0, x1 = 24, 8, 190, 560
    height = 20 + row_h * len(cells) + 24
    out = [f'<figure class="chart" data-metric="{esc(metric)}"><figcaption>{esc(metric)}: proportion '
           f'true per cell, 95% Wilson interval</figcaption><svg role="img" width="680" '
           f'height="{height}" viewBox="0 0 680 {height}" xmlns="http://www.w3.org/2000/svg">'
           f"<title>{esc(metric)}</title>"]
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
        out.append(f'<line x1="{sx(low):.1f}" y1="{y}" x2="{sx(high):.1f}" y2="{y}" stroke="{colour}" '
                   f'stroke-width="2"/><circle cx="{sx(p):.1f}" cy="{y}" r="5" fill="{colour}">'
                   f"<title>{name}: {score['true']}/{score['n']} = {p:.2f} [{low:.2f}, {high:.2f}]</title>"
                   f'</circle><text x="{x1 + 12}" y="{y + 4}">{score["true"]}/{score["n"]}</text>')
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
    out.append(f'<figure class="chart" id="forest"><figcaption>gap (cell \u2212 reference) and its 95% '
               f'{sequence}; zero dashed; right: runs per cell that would establish an open gap'
               f'</figcaption><svg role="img" width="{FOREST_WIDTH}" height="{height}" '
               f'viewBox="0 0 {FOREST_WIDTH} {height}" xmlns="http://www.w3.org/2000/svg">'
               "<title>gaps</title>")
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
        out.append(f'<line x1="{sx(row["low"]):.1f}" y1="{y}" x2="{sx(row["high"]):.1f}" y2="{y}" '
                   f'stroke="{colour}" stroke-width="2"/><rect x="{sx(row["gap"]) - 4:.1f}" '
                   f'y="{y - 4}" width="8" height="8" fill="{colour}"><title>{label}: '
                   f'{row["gap"]:+.3f} [{row["low"]:+.3f}, {row["high"]:+.3f}] {esc(row["state"])}'
                   f'</title></rect><text x="{x1 + 10}" y="{y + 4}">{row["gap"]:+.2f} '
                   f"{esc(row['state'])}</text>")
        out.append(_runs_needed_mark(row, x1 + 130, y))
    out.append("</svg></figure>")
    out.append(_procedure_note(gaps))
    out.append('<table id="gap-table"><thead><tr><th>cell</th><th>criterion</th><th>cell x/n</th>'
               "<th>reference x/n</th><th>gap [95%]</th><th>state</th><th>runs needed</th>"
               "</tr></thead><tbody>")
    for row in rows:
        gap = "\u2013" if row["gap"] is None else f"{row['gap']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}]"
        cs, rs = row["cell_score"], row["reference_score"]
        out.append(f"<tr><td>{esc(row['cell'])}</td><td>{esc(row['criterion'])}</td>"
                   f"<td>{cs['true']}/{cs['n']}</td><td>{rs['true']}/{rs['n']}</td><td>{gap}</td>"
                   f"<td>{esc(row['state'])}</td>{_runs_needed_cell(row)}</tr>")
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
    return (f'<text x="{x}" y="{y + 4}" fill="#0550ae" class="runs-needed">'
            f'\u2248 {needed["per_cell"]:,} runs per cell (has {needed["have"]})</text>')


def ordered_rows(source: Any) -> list[Mapping[str, Any]]:
    """Runs grouped by cell in report order, then by repetition and id."""
    order = {cell["cell"]: i for i, cell in enumerate(source.report["cells"])}

    def key(row: Mapping[str, Any]) -> tuple[int, int, str]:
        repetition = row.get("repetition")
        return (order.get(row["cell"], len(order)),
                repetition if isinstance(repetition, int) else -1, str(row["id"]))

    return sorted(source.rows, key=key)


def matrix_metrics(report: Mapping[str, Any]) -> list[str]:
    """The matrix's columns: boolean metrics, then numbers."""
    return [*report["metrics"]["boolean"], *report["metrics"]["number"]]


# Runs per page of `view`'s matrix: a browser lays out a few hundred rows at once; 10,000
# rows of HTML took Chromium tens of seconds to parse and lay out before anything was usable.
PAGE_ROWS = 200
STATES = ("true", "false", "unjudged", "pending", "invalid")


@attrs.frozen
class Window:
    """Which runs ``view``'s matrix shows: the filters and the page, read from the query."""

    cell: str = ""
    metric: str = ""
    state: str = ""
    start: int = 0
    size: int = PAGE_ROWS

    @classmethod
    def from_query(cls, query: str, size: int = PAGE_ROWS) -> Window:
        """The window a query string asks for; anything malformed is the default (never an error)."""
        from urllib.parse import parse_qs

        try:
            values = parse_qs(query, max_num_fields=8)
        except ValueError:
            values = {}

        def one(key: str) -> str:
            found = values.get(key)
            return found[0][:2000] if found else ""

        start = one("from")
        return cls(
            cell=one("cell"),
            metric=one("metric"),
            state=one("state") if one("state") in STATES else "",
            start=int(start) if start.isdigit() and len(start) < 10 else 0,
            size=max(1, size),
        )

    def matches(self, row: Mapping[str, Any], metrics: Sequence[str]) -> bool:
        """The file's script's rule: a row shows when its cell matches and any shown metric
        (or the run itself, for ``invalid``) has the state asked for."""
        if self.cell and row["cell"] != self.cell:
            return False
        if not self.state:
            return True
        if self.state == "invalid" and row.get("state") == "invalid":
            return True
        return any(marks(row, metric)[0] == self.state for metric in metrics)

    def link(self, start: int) -> str:
        from urllib.parse import urlencode

        query = {k: v for k, v in (("cell", self.cell), ("metric", self.metric), ("state", self.state)) if v}
        if start:
            query["from"] = str(start)
        return "?" + urlencode(query) + "#runs"


def _filter_form(cells: Sequence[str], metrics: Sequence[str], window: Window | None) -> str:
    def options(values: Sequence[str], chosen: str) -> str:
        return "".join(f'<option value="{esc(v)}"{" selected" if v == chosen else ""}>{esc(v)}</option>'
                       for v in values)

    if window is None:  # the file: filtered by its script, so hidden without one
        head, button = '<form class="filters" id="filters" hidden>', ""
        window = Window()
    else:  # view: a plain GET form, filtered and paged by the server
        head = '<form class="filters" id="filters" method="get" action="#runs">'
        button = "<noscript><button>filter</button></noscript>"
    return (f'{head}<label>cell <select id="f-cell" name="cell"><option value="">all</option>'
            f"{options(cells, window.cell)}</select></label>"
            f'<label>metric <select id="f-metric" name="metric"><option value="">all</option>'
            f"{options(metrics, window.metric)}</select></label>"
            '<label>state <select id="f-state" name="state"><option value="">any</option>'
            f'{options(STATES, window.state)}</select></label>{button}<output id="f-count"></output></form>')


def _pager(window: Window, matching: int, total: int) -> str:
    if not matching:
        return f'<p class="pager" id="pager">no run matches (of {total:,})</p>'
    end = min(window.start + window.size, matching)
    text = f"runs {window.start + 1:,}\u2013{end:,} of {matching:,}"
    text += " matching" if matching != total else ""
    links = []
    if window.start > 0:
        links.append(f'<a rel="prev" href="{esc(window.link(max(0, window.start - window.size)))}">'
                     "\u2039 previous</a>")
    if end < matching:
        links.append(f'<a rel="next" href="{esc(window.link(end))}">next \u203a</a>')
    joined = " \u00b7 ".join(links)
    return f'<p class="pager" id="pager">{text} {joined}</p>'


def _matrix(source: Any, rows: Sequence[Mapping[str, Any]], window: Window | None = None) -> str:
    """The runs matrix: every run (the file), or one window of them (``view``)."""
    report = source.report
    metrics = matrix_metrics(report)
    cells = [cell["cell"] for cell in report["cells"]]
    indexed: Sequence[tuple[int, Mapping[str, Any]]] = list(enumerate(rows))
    pager = ""
    if window is not None:
        if window.metric not in metrics:
            window = attrs.evolve(window, metric="")
        shown_metrics = [window.metric] if window.metric else metrics
        matching = [(i, row) for i, row in indexed if window.matches(row, shown_metrics)]
        if window.start >= len(matching):
            window = attrs.evolve(window, start=0)
        indexed = matching[window.start:window.start + window.size]
        pager = _pager(window, len(matching), len(rows))
        metrics = shown_metrics
    out = ['<h2 id="runs">Runs</h2>']
    legend = " \u00b7 ".join(f'<span class="m-{k}">{sym}</span> {esc(text)}' for k, (sym, text) in MARKS.items())
    out.append(f'<p class="legend">{legend}. Click a run to see its diff, response and reasons.</p>')
    out.append(_filter_form(cells, matrix_metrics(report), window))
    out.append(pager)
    out.append('<table id="matrix"><thead><tr><th>run</th><th>#</th><th>state</th>')
    out += [f'<th data-metric="{esc(m)}">{esc(m)}</th>' for m in metrics]
    out.append("</tr></thead>")
    current = None
    for index, row in indexed:
        if row["cell"] != current:
            if current is not None:
                out.append("</tbody>")
            current = row["cell"]
            out.append(f'<tbody data-cell="{esc(current)}"><tr class="group"><th colspan="{3 + len(metrics)}">'
                       f"cell {esc(current)}</th></tr>")
        repetition = row.get("repetition")
        out.append(f'<tr class="runrow" data-state="{esc(row["state"])}" data-run="{index}">'
                   f'<td><a href="#run-{index}" data-run="{index}">{esc(row["id"])}</a></td>'
                   f'<td class="num">{esc("?" if repetition is None else repetition)}</td>'
                   f'<td class="st-{esc(row["state"])}">{esc(row["state"])}</td>')
        for metric in metrics:
            mark, text = marks(row, metric)
            title = MARKS.get(mark, (None, mark))[1]
            out.append(f'<td class="mark m-{mark}" data-metric="{esc(metric)}" data-mark="{mark}" '
                       f'title="{esc(title)}">{esc(text)}</td>')
        out.append("</tr>")
    if current is not None:
        out.append("</tbody>")
    out.append("</table>")
    out.append(pager.replace('id="pager"', 'id="pager-foot"'))
    return "".join(out)


def _usage(report: Mapping[str, Any]) -> str:
    """What the judge providers reported spending, per validator and cell, and the cost."""
    from trysquare.api import cost_text, tokens_text

    usage = report.get("usage") or ()
    if not usage:
        return ""
    out = ['<h2 id="usage">Usage and cost</h2><table id="usage-table"><thead><tr><th>validator</th>'
           "<th>cell</th><th>results</th><th>requests</th><th>input tokens</th><th>of which cached</th>"
           "<th>output tokens</th><th>cost (USD)</th></tr></thead><tbody>"]
    for item in usage:
        total = item["cell"] is None or item["validator"] is None
        validator = "all validators" if item["validator"] is None else esc(item["validator"])
        cell = "all cells" if item["cell"] is None else esc(item["cell"])
        cost = esc(cost_text(item))
        kind = ' class="total"' if total else ""
        out.append(f'<tr{kind}><td>{validator}</td><td>{cell}</td>'
                   f'<td class="num">{item["results"]}</td><td class="num">{item["requests"]}</td>'
                   f'<td class="num">{esc(tokens_text(item["input_tokens"]))}</td>'
                   f'<td class="num">{esc(tokens_text(item["cached_tokens"]))}</td>'
                   f'<td class="num">{esc(tokens_text(item["output_tokens"]))}</td>'
                   f'<td class="num{" unpriced" if item["cost_usd"] is None else ""}">{cost}</td></tr>')
    out.append("</tbody></table>")
    out.append('<p class="note">requests count retries and failed attempts; invalid and unjudged '
               "results count. A cost uses the price recorded with each result (price_input / "
               "price_output per million tokens of the provider that judged it).</p>")
    return "".join(out)


NOTES_PER_CELL = 10


def _notes(report: Mapping[str, Any]) -> str:
    """Why a cell is not publishable, stale results, and the report's notes."""
    items = [esc(note) for note in report.get("notes") or ()]
    for cell in report["cells"]:
        for why in cell["why_not"]:
            where = "" if why["run"] is None else f"run <code>{esc(why['run'])}</code>: "
            items.append(f"cell {esc(cell['cell'])} not publishable: {where}{esc(why['reason'])}")
        # Named up to a few per cell: every run of a large experiment may be stale at once.
        for stale in cell["stale"][:NOTES_PER_CELL]:
            items.append(f"stale: run <code>{esc(stale['run'])}</code>: recorded by "
                         f"{esc(', '.join(stale['validators']))} before it changed (re-run validate)")
        if len(cell["stale"]) > NOTES_PER_CELL:
            items.append(f"stale: \u2026 and {len(cell['stale']) - NOTES_PER_CELL} more run(s) in cell "
                         f"{esc(cell['cell'])} (trysquare report lists them all)")
    body = "<ul>" + "".join(f"<li>{item}</li>" for item in items) + "</ul>" if items else (
        '<p class="note">none.</p>')
    return '<h2 id="notes">Notes</h2>' + body


def read_experiment(scenario: Any, path: Any, experiment: Any = None) -> Any:
    """The report source of the runs below ``path``, read without writing anything.

    Unlike ``trysquare report``, neither ``measures.json`` nor ``synthesis.md``
    is rebuilt: ``view`` is read-only. ``experiment`` (the runs as discovered
    before) saves finding and checking every run folder again: only the results
    are read anew.
    """
    from trysquare.api import Layout, build_measures, build_report, discover, report_source

    if experiment is None:
        experiment = discover([path])[0]
    current = {v.name: v.digest() for v in scenario.validations}
    rows = build_measures(scenario, experiment.runs, current, unusable=experiment.errors)
    report = build_report(
        Layout.from_scenario(scenario), rows,
        appearance=[run.cell for run in experiment.runs],
        skipped=[str(error) for error in experiment.errors],
    )
    return report_source(report, rows, experiment)


def build_page(
    source: Any, *, lazy: bool = False, window: Window | None = None,
    rows: Sequence[Mapping[str, Any]] | None = None,
) -> str:
    """The whole page for a :class:`trysquare.report.formats.ReportSource`.

    ``lazy`` (``trysquare view``): run panels are left out and fetched from
    ``run/N`` when a run is clicked, and the runs matrix shows one ``window``
    (filters and a page of :data:`PAGE_ROWS` runs, default the first page), so a
    large experiment opens at once. ``rows``: :func:`ordered_rows` of the source,
    when the caller has them already.
    """
    report = source.report
    rows = ordered_rows(source) if rows is None else rows
    if lazy and window is None:
        window = Window()
    verdict = "every cell is publishable" if report["publishable"] else "not publishable"
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{csp(lazy)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>trysquare: {esc(report['scenario'])}</title><style>{STYLE}</style></head>",
        f'<body data-lazy="{int(lazy)}"><h1>{esc(report["scenario"])}</h1>',
        f'<p id="summary">{report["runs"]} run(s) in {len(report["cells"])} cell(s); '
        f'<b class="{"pub" if report["publishable"] else "nopub"}">{verdict}</b>.</p>',
        '<nav><a href="#scores">scores</a> \u00b7 <a href="#charts">charts</a> \u00b7 '
        '<a href="#gaps">gaps</a> \u00b7 '
        + ('<a href="#usage">usage</a> \u00b7 ' if report.get("usage") else "")
        + '<a href="#runs">runs</a> \u00b7 <a href="#notes">notes</a></nav>',
        _score_table(report),
        '<h2 id="charts">Per criterion</h2>',
        *(_proportion_chart(report, m) for m in report["metrics"]["boolean"]),
        _forest(report),
        _usage(report),
        _matrix(source, rows, window if lazy else None),
        '<h2 id="panels-head">Run panels</h2>',
        '<div id="panels">',
    ]
    if lazy:
        out.append('<p class="note">click a run above to load its panel.</p>')
    else:
        for index, row in enumerate(rows):
            out.append(run_panel(index, row, source.run_dirs.get(str(row["id"]))))
    out.append("</div>")
    out.append(_notes(report))
    out.append(f"<script>{SCRIPT}</script></body></html>\n")
    return "".join(out)

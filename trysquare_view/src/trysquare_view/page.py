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
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from trysquare_view.charts import _forest, _num, _proportion_chart, _score_table
from trysquare_view.panel import esc, run_panel

__all__ = ["PAGE_ROWS", "Window", "build_page", "marks", "ordered_rows", "read_experiment"]

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
    own = (
        "'self'" if lazy else "'none'"
    )  # view: panels fetched, the filter form submitted, to itself
    return (
        f"default-src 'none'; style-src {_hash(STYLE)}; script-src {_hash(SCRIPT)}; "
        f"connect-src {own}; img-src 'none'; base-uri 'none'; form-action {own}"
    )


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


def ordered_rows(source: Any) -> list[Mapping[str, Any]]:
    """Runs grouped by cell in report order, then by repetition and id."""
    order = {cell["cell"]: i for i, cell in enumerate(source.report["cells"])}

    def key(row: Mapping[str, Any]) -> tuple[int, int, str]:
        repetition = row.get("repetition")
        return (
            order.get(row["cell"], len(order)),
            repetition if isinstance(repetition, int) else -1,
            str(row["id"]),
        )

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

        query = {
            k: v
            for k, v in (("cell", self.cell), ("metric", self.metric), ("state", self.state))
            if v
        }
        if start:
            query["from"] = str(start)
        return "?" + urlencode(query) + "#runs"


def _filter_form(cells: Sequence[str], metrics: Sequence[str], window: Window | None) -> str:
    def options(values: Sequence[str], chosen: str) -> str:
        return "".join(
            f'<option value="{esc(v)}"{" selected" if v == chosen else ""}>{esc(v)}</option>'
            for v in values
        )

    if window is None:  # the file: filtered by its script, so hidden without one
        head, button = '<form class="filters" id="filters" hidden>', ""
        window = Window()
    else:  # view: a plain GET form, filtered and paged by the server
        head = '<form class="filters" id="filters" method="get" action="#runs">'
        button = "<noscript><button>filter</button></noscript>"
    return (
        f'{head}<label>cell <select id="f-cell" name="cell"><option value="">all</option>'
        f"{options(cells, window.cell)}</select></label>"
        f'<label>metric <select id="f-metric" name="metric"><option value="">all</option>'
        f"{options(metrics, window.metric)}</select></label>"
        '<label>state <select id="f-state" name="state"><option value="">any</option>'
        f'{options(STATES, window.state)}</select></label>{button}<output id="f-count"></output></form>'
    )


def _pager(window: Window, matching: int, total: int) -> str:
    if not matching:
        return f'<p class="pager" id="pager">no run matches (of {total:,})</p>'
    end = min(window.start + window.size, matching)
    text = f"runs {window.start + 1:,}\u2013{end:,} of {matching:,}"
    text += " matching" if matching != total else ""
    links = []
    if window.start > 0:
        links.append(
            f'<a rel="prev" href="{esc(window.link(max(0, window.start - window.size)))}">'
            "\u2039 previous</a>"
        )
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
        indexed = matching[window.start : window.start + window.size]
        pager = _pager(window, len(matching), len(rows))
        metrics = shown_metrics
    out = ['<h2 id="runs">Runs</h2>']
    legend = " \u00b7 ".join(
        f'<span class="m-{k}">{sym}</span> {esc(text)}' for k, (sym, text) in MARKS.items()
    )
    out.append(
        f'<p class="legend">{legend}. Click a run to see its diff, response and reasons.</p>'
    )
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
            out.append(
                f'<tbody data-cell="{esc(current)}"><tr class="group"><th colspan="{3 + len(metrics)}">'
                f"cell {esc(current)}</th></tr>"
            )
        repetition = row.get("repetition")
        out.append(
            f'<tr class="runrow" data-state="{esc(row["state"])}" data-run="{index}">'
            f'<td><a href="#run-{index}" data-run="{index}">{esc(row["id"])}</a></td>'
            f'<td class="num">{esc("?" if repetition is None else repetition)}</td>'
            f'<td class="st-{esc(row["state"])}">{esc(row["state"])}</td>'
        )
        for metric in metrics:
            mark, text = marks(row, metric)
            title = MARKS.get(mark, (None, mark))[1]
            out.append(
                f'<td class="mark m-{mark}" data-metric="{esc(metric)}" data-mark="{mark}" '
                f'title="{esc(title)}">{esc(text)}</td>'
            )
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
    out = [
        (
            '<h2 id="usage">Usage and cost</h2><table id="usage-table"><thead><tr><th>validator</th>'
            "<th>cell</th><th>results</th><th>requests</th><th>input tokens</th><th>of which cached</th>"
            "<th>output tokens</th><th>cost (USD)</th></tr></thead><tbody>"
        )
    ]
    for item in usage:
        total = item["cell"] is None or item["validator"] is None
        validator = "all validators" if item["validator"] is None else esc(item["validator"])
        cell = "all cells" if item["cell"] is None else esc(item["cell"])
        cost = esc(cost_text(item))
        kind = ' class="total"' if total else ""
        out.append(
            f"<tr{kind}><td>{validator}</td><td>{cell}</td>"
            f'<td class="num">{item["results"]}</td><td class="num">{item["requests"]}</td>'
            f'<td class="num">{esc(tokens_text(item["input_tokens"]))}</td>'
            f'<td class="num">{esc(tokens_text(item["cached_tokens"]))}</td>'
            f'<td class="num">{esc(tokens_text(item["output_tokens"]))}</td>'
            f'<td class="num{" unpriced" if item["cost_usd"] is None else ""}">{cost}</td></tr>'
        )
    out.append("</tbody></table>")
    out.append(
        '<p class="note">requests count retries and failed attempts; invalid and unjudged '
        "results count. A cost uses the price recorded with each result (price_input / "
        "price_output per million tokens of the provider that judged it).</p>"
    )
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
            items.append(
                f"stale: run <code>{esc(stale['run'])}</code>: recorded by "
                f"{esc(', '.join(stale['validators']))} before it changed (re-run validate)"
            )
        if len(cell["stale"]) > NOTES_PER_CELL:
            items.append(
                f"stale: \u2026 and {len(cell['stale']) - NOTES_PER_CELL} more run(s) in cell "
                f"{esc(cell['cell'])} (trysquare report lists them all)"
            )
    body = (
        "<ul>" + "".join(f"<li>{item}</li>" for item in items) + "</ul>"
        if items
        else ('<p class="note">none.</p>')
    )
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
        Layout.from_scenario(scenario),
        rows,
        appearance=[run.cell for run in experiment.runs],
        skipped=[str(error) for error in experiment.errors],
    )
    return report_source(report, rows, experiment)


def build_page(
    source: Any,
    *,
    lazy: bool = False,
    window: Window | None = None,
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
        (
            f'<p id="summary">{report["runs"]} run(s) in {len(report["cells"])} cell(s); '
            f'<b class="{"pub" if report["publishable"] else "nopub"}">{verdict}</b>.</p>'
        ),
        (
            '<nav><a href="#scores">scores</a> \u00b7 <a href="#charts">charts</a> \u00b7 '
            '<a href="#gaps">gaps</a> \u00b7 '
        )
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

"""Issue 15.2: the HTML report holds every table, chart, mark and panel, and needs nothing else."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from trysquare_view.charts import wilson
from trysquare_view.page import build_page
from trysquare_view.panel import DIFF_FILE_CHARS

from tests.view.viewlab import BASE_USAGE, BIG_FILE, EVIL_CELL, XSS, build_lab, source_of


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory):
    return build_lab(tmp_path_factory.mktemp("view-html"))  # read only here: built once


@pytest.fixture(scope="module")
def page(lab) -> str:
    return build_page(source_of(lab))


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parse(page: str) -> Tags:
    tags = Tags()
    tags.feed(page)
    return tags


def test_every_cell_metric_and_run_is_on_the_page(lab, page: str) -> None:
    text = "".join(parse(page).text)
    for name in ("base", EVIL_CELL, "passes", "style", "clear", *lab.run_ids):
        assert name in text, name


def test_score_table_shows_counts_reference_and_publishability(page: str) -> None:
    table = page[
        page.index('id="score-table"') : page.index("</table>", page.index('id="score-table"'))
    ]
    assert "reference</span>" in table
    assert "1/1 \u00b7 1 unjudged" in table  # base: style judged once, unjudged once
    assert "1/1 \u00b7 1 pending" in table  # evil cell: clear pending for evil-3
    assert '<td class="nopub">no (1 reason(s))</td>' in table
    assert '<td class="pub">yes</td>' in table


def test_runs_matrix_has_a_distinct_mark_for_each_state(page: str) -> None:
    marks = set(re.findall(r'data-mark="([a-z]+)"', page))
    assert {"true", "false", "unjudged", "pending", "invalid"} <= marks


def test_charts_are_inline_svg_with_intervals_and_a_forest_plot(page: str) -> None:
    assert page.count('<figure class="chart" data-metric=') == 3
    assert 'id="forest"' in page and 'class="zero"' in page
    assert wilson(0, 0) is None
    p, low, high = wilson(2, 3)  # type: ignore[misc]
    assert low < p < high and round(low, 3) == 0.208


def test_nothing_is_fetched_from_anywhere(page: str) -> None:
    tags = parse(page)
    for tag, attrs in tags.tags:
        assert "src" not in attrs, tag
        if tag == "link":
            pytest.fail("a <link> element")
        href = attrs.get("href") or ""
        assert href.startswith("#") or not href, href
    assert "default-src 'none'" in page and "connect-src 'none'" in page


def test_a_diff_file_past_the_limit_is_cut_naming_the_full_file(lab, page: str) -> None:
    full = lab.root / "runs" / "evil-1" / "diff.patch"
    assert f"truncated: showing {DIFF_FILE_CHARS:,} of" in page
    assert f"the full diff is {full}" in page
    assert "x" * 60_000 not in page
    assert f"<summary>{BIG_FILE}</summary>" in page


def test_panel_holds_response_reasons_stderr_tail_transcript_and_history(page: str) -> None:
    panel = page[page.index('id="run-1"') : page.index('id="run-2"')]  # base-2
    assert "Nothing to do." in panel
    assert "suite failed:" in panel and "linter crashed" in panel
    assert "judge transcript" in panel and "&quot;pieces&quot;" in panel
    # What the judge cost, from its transcript: a retry is a request too.
    assert "requests: 2 \u00b7 tokens in 1,200 (300 cached) \u00b7 out 80" in panel
    # What the judge recorded with its result, and what that cost at the price recorded with it.
    assert (
        "spent: 2 request(s) \u00b7 input tokens 1,200 (300 cached) \u00b7 output tokens 80 "
        "\u00b7 $0.00076 \u00b7 local/judge-1"
    ) in panel
    assert "result history (1 earlier result(s)" in panel
    evil1 = page[page.index('id="run-2"') : page.index('id="run-3"')]
    assert "stderr (tail)" in evil1 and "showing the last 4,000 of" in evil1


def test_an_invalid_run_panel_names_its_error(page: str) -> None:
    panel = page[page.index('id="run-3"') : page.index('id="run-4"')]  # evil-2
    assert "invalid: check: the clone changed:" in panel


def test_notes_say_why_a_cell_is_not_publishable_and_what_is_stale(page: str) -> None:
    notes = page[page.index('id="notes"') :]
    assert "not publishable: run <code>evil-2</code>: invalid: check: the clone changed:" in notes
    assert "stale: run <code>base-1</code>: recorded by check, judge before it changed" in notes


def test_usage_table_totals_per_validator_and_cell_with_the_cost_or_no_price(page: str) -> None:
    start = page.index('id="usage-table"')
    table = page[start : page.index("</table>", start)]
    rows = [row for row in table.split("<tr")[2:]]
    base = next(row for row in rows if "<td>base</td>" in row)
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", base)
    assert cells == [
        "judge",
        "base",
        "2",
        str(BASE_USAGE["requests"]),
        f"{BASE_USAGE['input_tokens']:,}",
        "300",
        str(BASE_USAGE["output_tokens"]),
        BASE_USAGE["cost"],
    ]
    evil = next(row for row in rows if "all cells" not in row and "base" not in row)
    # evil-1's judge reported no tokens and had no price; evil-2's usage was planted garbage.
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", evil)
    assert cells[2:] == [
        "2",
        "1",
        "not reported",
        "not reported",
        "not reported",
        "no price declared",
    ]
    total = next(row for row in rows if "all cells" in row)
    assert 'class="total"' in total and "$0.00152 + 2 result(s): no price declared" in total
    assert XSS not in page and "$0.00" not in evil


def test_view_matrix_is_one_window_filtered_and_paged_by_the_query(lab) -> None:
    from trysquare_view.page import Window

    source = source_of(lab)
    first = build_page(source, lazy=True, window=Window.from_query("", size=2))
    assert first.count('class="runrow"') == 2 and "runs 1\u20132 of 5" in first
    assert 'href="?from=2#runs"' in first and 'id="run-' not in first  # panels come on demand
    invalid = build_page(
        source, lazy=True, window=Window.from_query("state=invalid&from=abc", size=2)
    )
    assert (
        invalid.count('class="runrow"') == 1
        and 'data-run="3"' in invalid
        and "of 1 matching" in invalid
    )
    assert '<option value="invalid" selected>' in invalid
    # A hostile or malformed query is the default window, never an error or markup.
    odd = Window.from_query("from=99999999999&state=%3Cscript%3E&metric=nope&x=1&x=2", size=2)
    assert (odd.start, odd.state) == (0, "")
    page = build_page(source, lazy=True, window=odd)
    assert page.count('class="runrow"') == 2 and "<script>alert" not in page
    none = build_page(source, lazy=True, window=Window.from_query("cell=nowhere"))
    assert "no run matches (of 5)" in none and 'class="runrow"' not in none
    # Past the last page: back to the first.
    assert (
        build_page(source, lazy=True, window=Window(start=40, size=2)).count('class="runrow"') == 2
    )


def test_gap_table_and_chart_carry_the_runs_needed_and_the_procedure() -> None:
    """Issue 33, without a browser (``test_view_browser.py`` looks at it in one)."""
    from trysquare.report import Layout, build_report
    from trysquare.report.formats import ReportSource

    def rows(cell: str, true: int, n: int) -> list[dict]:
        return [
            {
                "id": f"{cell}-{i}",
                "cell": cell,
                "repetition": i,
                "state": "valid",
                "metrics": {"ok": i < true},
                "reasons": {},
                "errors": [],
                "pending": [],
            }
            for i in range(n)
        ]

    made = rows("ref", 2, 6) + rows("a", 4, 6)
    layout = Layout(
        name="gaps", metrics=("ok",), reference="ref", stopping="anytime", correction="holm"
    )
    page = build_page(ReportSource(report=build_report(layout, made), rows=tuple(made)))
    table = page[
        page.index('id="gap-table"') : page.index("</table>", page.index('id="gap-table"'))
    ]
    assert "<th>runs needed</th>" in table and '<td class="runs-needed">\u2248 ' in table
    forest = page[page.index('id="forest"') : page.index("</svg>", page.index('id="forest"'))]
    assert 'class="runs-needed">\u2248 ' in forest
    assert "confidence sequence (anytime-valid)" in page
    procedure = page[page.index('id="procedure"') :]
    assert "Procedure: anytime-valid." in procedure and "with Holm&#x27;s correction" in procedure

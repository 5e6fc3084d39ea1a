"""Issue 15: the report and ``trysquare view`` as a person uses them, in a real headless Chromium.

Driven by Playwright's Python API pointed at the system's Chromium (Debian's
``chromium`` package; ``.ci/run`` installs it): Playwright never downloads a
browser of its own here. Each test checks the page asked the network for
nothing and logged no console error; a screenshot of each view is saved to
``TRYSQUARE_SCREENSHOTS`` (default: ``build/screenshots`` in the checkout).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.loopback import serve_in_background
from tests.view.viewlab import EVIL_CELL, SECRET, Lab, build_lab, source_of

pytestmark = pytest.mark.browser

CHROMIUM = (
    os.environ.get("TRYSQUARE_CHROMIUM")
    or shutil.which("chromium")
    or shutil.which("chromium-browser")
)
SCREENSHOTS = Path(
    os.environ.get("TRYSQUARE_SCREENSHOTS")
    or Path(__file__).resolve().parents[2] / "build" / "screenshots"
)

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - the dev group installs it
    sync_playwright = None  # type: ignore[assignment]

if CHROMIUM is None or sync_playwright is None:
    pytest.skip(
        "no headless browser: install Debian's chromium (apt-get install chromium) and the dev "
        "group (uv sync) to run the browser tests",
        allow_module_level=True,
    )


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    return build_lab(tmp_path_factory.mktemp("view-browser"))


@pytest.fixture(scope="module")
def report_file(lab: Lab) -> Path:
    from trysquare_view.page import build_page

    path = lab.root.parent / "report.html"
    path.write_text(build_page(source_of(lab)), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    assert sync_playwright is not None and CHROMIUM is not None
    with sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


class Watched:
    """A page whose requests and console errors are recorded."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.requests: list[str] = []
        self.errors: list[str] = []
        page.on("request", lambda request: self.requests.append(request.url))
        page.on(
            "console", lambda message: message.type == "error" and self.errors.append(message.text)
        )
        page.on("pageerror", lambda error: self.errors.append(str(error)))

    def shot(self, name: str) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


@pytest.fixture
def watched(browser: Any, request: pytest.FixtureRequest) -> Iterator[Watched]:
    enabled = not request.node.get_closest_marker("no_javascript")
    context = browser.new_context(
        viewport={"width": 1200, "height": 900}, java_script_enabled=enabled
    )
    page = Watched(context.new_page())
    page.page.set_default_timeout(5000)
    yield page
    context.close()


def _open_file(watched: Watched, report_file: Path) -> Any:
    page = watched.page
    page.goto(report_file.as_uri())
    return page


def _assert_quiet(watched: Watched, allowed_prefix: str) -> None:
    assert [url for url in watched.requests if not url.startswith(allowed_prefix)] == []
    assert watched.errors == []


def test_browser_file_shows_every_cell_and_metric(
    watched: Watched, report_file: Path, lab: Lab
) -> None:
    page = _open_file(watched, report_file)
    scores = page.locator("#score-table").inner_text()
    matrix_head = page.locator("#matrix thead").inner_text()
    for cell in ("base", EVIL_CELL):
        assert cell in scores
    for metric in ("passes", "style", "clear"):
        assert metric in scores or metric in matrix_head
    for run_id in lab.run_ids:
        assert page.get_by_role("link", name=run_id, exact=True).is_visible()
    assert page.title() == "trysquare: view-lab"  # the agent's <script> never ran
    watched.shot("file-overview")
    _assert_quiet(watched, report_file.as_uri())


def test_browser_click_a_run_shows_its_diff_and_reasons(
    watched: Watched, report_file: Path
) -> None:
    page = _open_file(watched, report_file)
    page.get_by_role("link", name="base-2", exact=True).click()
    panel = page.locator("#run-1")
    assert panel.get_attribute("open") is not None
    text = panel.inner_text()
    assert "diff --git" in text or "the agent changed nothing" in text
    assert "suite failed: <script>document.title='pwned'</script>" in text  # the reason, as text
    assert "linter crashed" in text
    page.get_by_role("link", name="evil-1", exact=True).click()
    evil = page.locator("#run-2")
    assert evil.locator(".da").first.is_visible()  # an added line, coloured
    assert "<img src=x onerror=alert(1)>.py" in evil.inner_text()
    watched.shot("file-run-panel")
    _assert_quiet(watched, report_file.as_uri())


def test_browser_filter_to_invalid_runs_shows_only_those(
    watched: Watched, report_file: Path, lab: Lab
) -> None:
    page = _open_file(watched, report_file)
    page.select_option("#f-state", "invalid")
    visible = [
        row.get_attribute("data-state")
        for row in page.locator("#matrix tr.runrow").all()
        if row.is_visible()
    ]
    assert visible == ["invalid"] * len(lab.invalid)
    assert page.locator("#f-count").inner_text() == f"{len(lab.invalid)} run(s) shown"
    page.select_option("#f-state", "")
    page.select_option("#f-cell", "base")
    assert page.locator("#f-count").inner_text() == "2 run(s) shown"
    page.select_option("#f-metric", "style")
    page.select_option("#f-state", "unjudged")
    assert page.locator("#f-count").inner_text() == "1 run(s) shown"
    assert not page.locator('#matrix th[data-metric="passes"]').is_visible()
    watched.shot("file-filtered")
    _assert_quiet(watched, report_file.as_uri())


@pytest.mark.no_javascript
def test_browser_tables_are_readable_with_javascript_off(
    watched: Watched, report_file: Path
) -> None:
    page = _open_file(watched, report_file)
    assert "1/1 \u00b7 1 unjudged" in page.locator("#score-table").inner_text()
    assert page.locator("#matrix tr.runrow").count() == 5
    assert not page.locator("#filters").is_visible()  # filters need the script; tables do not
    watched.shot("file-no-javascript")
    _assert_quiet(watched, report_file.as_uri())


def test_browser_view_server_loads_a_panel_on_demand(watched: Watched, lab: Lab) -> None:
    from trysquare.scenario import load_scenario
    from trysquare_view.server import make_server

    server = make_server(load_scenario(lab.scenario), lab.root, port=0)
    serve_in_background(server)
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        page = watched.page
        page.goto(url)
        assert page.locator("details.run").count() == 0
        page.get_by_role("link", name="evil-2", exact=True).click()
        panel = page.locator("#run-3")
        panel.wait_for()
        text = panel.inner_text()
        assert "invalid: check: the clone changed:" in text
        assert SECRET not in text
        watched.shot("view-run-panel")
        _assert_quiet(watched, url)
    finally:
        server.shutdown()
        server.server_close()


def test_browser_view_pages_and_filters_the_matrix_on_the_server(
    watched: Watched, lab: Lab
) -> None:
    """10,000 runs open at once because the matrix comes a page at a time: here 2 runs a page."""
    from trysquare.scenario import load_scenario
    from trysquare_view.server import make_server

    server = make_server(load_scenario(lab.scenario), lab.root, port=0, page_rows=2)
    serve_in_background(server)
    url = f"http://127.0.0.1:{server.server_address[1]}/"

    def shown_runs() -> list[str]:
        return [link.inner_text() for link in page.locator("#matrix tr.runrow a[data-run]").all()]

    try:
        page = watched.page
        page.goto(url)
        assert page.locator("#score-table").is_visible() and page.locator("#matrix").is_visible()
        assert shown_runs() == ["base-1", "base-2"]
        assert "runs 1\u20132 of 5" in page.locator("#pager").inner_text()
        page.locator("#pager a[rel=next]").click()
        page.wait_for_url("**from=2**")
        assert shown_runs() == ["evil-1", "evil-2"]
        watched.shot("view-paged")

        page.select_option("#f-state", "invalid")  # the script submits the form to the server
        page.wait_for_url("**state=invalid**")
        assert shown_runs() == list(lab.invalid)
        assert {
            row.get_attribute("data-state") for row in page.locator("#matrix tr.runrow").all()
        } == {"invalid"}
        assert "of 1 matching" in page.locator("#pager").inner_text()
        assert page.locator("#f-state").input_value() == "invalid"  # the filter stays chosen
        page.get_by_role("link", name=lab.invalid[0], exact=True).click()
        panel = page.locator("#run-3")  # the run's place among all runs, whatever the page
        panel.wait_for()
        assert "invalid: check: the clone changed:" in panel.inner_text()
        watched.shot("view-filtered-invalid")
        _assert_quiet(watched, url)
    finally:
        server.shutdown()
        server.server_close()


NUMBERS = r"""
import json, sys
rep = json.load(open(sys.argv[1]))["repetition"]
words = 2 if rep < 2 else None
print(json.dumps({"metrics": {"words": words, "ok": True},
                  "reasons": {} if words is not None else {"words": "no response was recorded"}}))
"""


def test_browser_numbers_show_their_unjudged_count(
    watched: Watched, cli: Any, make_run: Any, tmp_path: Path
) -> None:
    """Issue 30: the caption promises unjudged values counted beside n; the Numbers table keeps it."""
    from tests.helpers import write_scenario, write_script

    for index in range(4):
        run = make_run(f"n{index}", cell="alpha", repetition=index)
        run.base({"a.py": "x = 1\n"})
        run.finish()
    write_script(tmp_path / "s", "words.py", NUMBERS)
    scenario = write_scenario(
        tmp_path / "s",
        """
        [[validation]]
        name = "words"
        mode = "script"
        command = "words.py"
        metrics = ["words", "ok"]
    """,
    )
    assert cli("validate", scenario, tmp_path / "exp", "-q").returncode == 0
    html = tmp_path / "report.html"
    done = cli("report", scenario, tmp_path / "exp", "--format", "html", "-o", html)
    assert done.returncode == 0, done.stderr
    page = _open_file(watched, html)
    numbers = page.locator("h3:has-text('Numbers') + table").inner_text()
    assert "2 [2, 2] (2) \u00b7 2 unjudged" in numbers
    watched.shot("file-numbers-unjudged")
    _assert_quiet(watched, html.as_uri())


WIDE = r"""
import json, sys
reason = "2 tests failed:\nFAILED tests/test_a.py::test_one - assert 1 == 2\n" + "x" * 400
metrics = {f"metric_with_a_long_name_{n}": True for n in range(14)}
metrics["suite_ok"] = False
print(json.dumps({"metrics": metrics, "reasons": {"suite_ok": reason}}))
"""


def test_browser_reasons_keep_their_lines_and_wide_tables_scroll_in_their_box(
    watched: Watched, cli: Any, make_run: Any, tmp_path: Path
) -> None:
    """Issue 30: a multi-line reason reads as lines; a wide table scrolls, not the page."""
    from tests.helpers import write_scenario, write_script

    run = make_run("w1", cell="alpha", repetition=1)
    run.base({"a.py": "x = 1\n"})
    run.finish()
    write_script(tmp_path / "s", "wide.py", WIDE)
    names = ", ".join(f'"metric_with_a_long_name_{n}"' for n in range(14))
    scenario = write_scenario(
        tmp_path / "s",
        f"""
        [[validation]]
        name = "wide"
        mode = "script"
        command = "wide.py"
        metrics = [{names}, "suite_ok"]
    """,
    )
    assert cli("validate", scenario, tmp_path / "exp", "-q").returncode == 0
    html = tmp_path / "report.html"
    assert cli("report", scenario, tmp_path / "exp", "--format", "html", "-o", html).returncode in (
        0,
        1,
    )
    page = _open_file(watched, html)
    page.get_by_role("link", name="w1", exact=True).click()
    reason = page.locator("details.run[open] td.reason", has_text="2 tests failed")
    assert reason.evaluate("cell => getComputedStyle(cell).whiteSpace") == "pre-wrap"
    lines = reason.inner_text().splitlines()
    assert lines[:2] == ["2 tests failed:", "FAILED tests/test_a.py::test_one - assert 1 == 2"]
    # The matrix is wider than the page: it scrolls inside its own box, the page does not.
    matrix = page.locator("#matrix")
    assert matrix.evaluate("t => t.scrollWidth > t.clientWidth")
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
    watched.shot("file-wide-reasons")
    _assert_quiet(watched, html.as_uri())


def _gap_rows(cell: str, true: int, n: int) -> list[dict[str, Any]]:
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


def test_browser_gap_table_and_chart_show_the_runs_needed(watched: Watched, tmp_path: Path) -> None:
    """Issue 33: each open gap's runs needed, in the chart and the table; the procedure stated."""
    from trysquare.report import Layout, build_report
    from trysquare.report.formats import ReportSource
    from trysquare_view.page import build_page

    rows = [
        *_gap_rows("ref", 2, 6),
        *_gap_rows("a", 4, 6),
        *_gap_rows("b", 2, 6),
        *_gap_rows("c", 6, 6),
    ]
    report = build_report(Layout(name="gaps", metrics=("ok",), reference="ref"), rows)
    path = tmp_path / "gaps.html"
    path.write_text(build_page(ReportSource(report=report, rows=tuple(rows))), encoding="utf-8")
    page = _open_file(watched, path)
    table = page.locator("#gap-table").inner_text()
    assert "runs needed" in table
    assert "\u2248 32 runs per cell (you have 6)" in table  # a: 4/6 against 2/6
    assert "not reachable: the observed gap is zero" in table  # b
    chart = page.locator("#forest").inner_text()
    assert "\u2248 32 runs per cell (has 6)" in chart and "not reachable" in chart
    assert "Procedure: fixed-sample." in page.locator("#procedure").inner_text()
    assert "Runs needed:" in page.locator("#runs-needed-method").inner_text()
    watched.shot("file-gaps-runs-needed")
    gaps = page.locator("#gaps").bounding_box()
    method = page.locator("#runs-needed-method").bounding_box()
    assert gaps is not None and method is not None
    height = method["y"] + method["height"] - gaps["y"] + 8
    page.screenshot(
        path=str(SCREENSHOTS / "file-gaps-runs-needed-close.png"),
        full_page=True,
        clip={"x": 0, "y": gaps["y"], "width": 1200, "height": height},
    )
    _assert_quiet(watched, path.as_uri())

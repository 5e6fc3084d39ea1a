"""Benchmark: the HTML report at 1,000 runs and ``trysquare view``'s first page at 10,000.

Prints two figures, each against reading ``measures.json`` of the same runs in the
same process (``json.load``: the least any report does):

- ``view.html.1k``: ``report --format html`` minus the disk rebuild ``report``
  shares with every format: read each run's results, build the report, and render
  the page with every run's panel (diff, response, results, stderr tail) inline.
  Also its size against the stated budget: under 10 MB for 1,000 runs whose diffs
  are about 2 KB each (a diff file is cut at 20,000 characters, so the page grows
  at most linearly with runs).
- ``view.page.10k``: the first visit once ``view`` has started (the page is built
  at start; a visit checks with one stat per run that no result was written since).
  Target: under 2 s. ``view.page.10k.rebuild``: a visit after a result was written
  (every result read again, the report and the page with panels left out rebuilt).
  Finding and checking the run folders (a git call per run, as ``report`` makes)
  happens once, at start, and is printed on stderr.
- ``view.browser.10k``: Chromium (Playwright, ``/usr/bin/chromium`` or
  ``TRYSQUARE_CHROMIUM``) opening that page from the running server until the
  score table and the runs matrix are visible — what a person waits for. Best of
  3 fresh browser contexts, one browser; the browser's own navigation timing
  (load event) is printed beside the wall clock, which also pays Playwright's
  round trips. Target: under 2 s. Skipped, saying so, without a Chromium.

The runs are copies of one real git run (one clone, shared by absolute path), each
with a result, a stderr, a response and a diff.

    uv run python benchmarks/bench_view.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from trysquare import _atomic
from trysquare.git.patch import diff_patch
from trysquare.testing import RunBuilder

BUDGET_1K = 10_000_000
SCENARIO = """
[scenario]
name = "bench-view"

[[validation]]
name = "check"
mode = "script"
command = "check.py"
metrics = ["passes", "style", "clear"]

[verdict]
reference = "c0"
"""


def build(root: Path, count: int) -> tuple[Any, Path]:
    from trysquare.scenario import load_scenario

    (root / "scenario").mkdir(parents=True)
    (root / "scenario" / "scenario.toml").write_text(SCENARIO)
    (root / "scenario" / "check.py").write_text("raise SystemExit(0)\n")
    (root / "scenario" / "check.py").chmod(0o755)
    clone = RunBuilder(root / "clone", cell="c0")
    lines = "".join(f"line {i} = {i}\n" for i in range(60))
    clone.base({"a.py": lines, "b.py": "b = 1\n"})
    clone.repo.write("a.py", lines.replace("= 3", "= 33").replace("= 40", "= 44") + "tail = 1\n")
    assert clone.base_commit is not None
    patch = diff_patch(clone.repo.path, clone.base_commit)
    experiment = root / "exp"
    template = experiment / "runs" / "r00000"
    template.mkdir(parents=True)
    (template / "prompt.txt").write_text("Fix it.\n")
    (template / "response.md").write_text("Changed two lines and added a tail.\n" * 3)
    (template / "diff.patch").write_text(patch * 4)  # about 2 KB
    (template / "validation").mkdir()
    (template / "validation" / "check.stderr").write_text("ran 12 tests\nOK\n")
    for index in range(count):
        target = experiment / "runs" / f"r{index:05d}"
        if index:
            shutil.copytree(template, target)
        verdict = [index % 3 != 0, index % 5 != 0, None if index % 17 == 0 else index % 2 == 0]
        _atomic.write_json(
            target / "validation" / "check.json",
            {
                "metrics": dict(zip(("passes", "style", "clear"), verdict, strict=True)),
                "reasons": {"clear": "the judge could not tell"} if verdict[2] is None else {},
                "state": "invalid" if index % 97 == 0 else "valid",
                "error": "the clone changed" if index % 97 == 0 else None,
                "validator": {"name": "check", "mode": "script", "digest": "sha256:x"},
                "context_digest": None,
                "duration": 0.5,
            },
        )
        (target / "run.toml").write_text(
            f'cell = "c{index % 4}"\nrepetition = {index}\nrepo = "{clone.repo.path}"\n'
            f'base = "{clone.base_commit}"\nprompt = "prompt.txt"\n'
        )
    return load_scenario(root / "scenario" / "scenario.toml"), experiment


def measure(count: int, *, panels: bool) -> dict[str, float]:
    """Seconds (and page bytes) of each step, with ``reading`` (json.load of measures.json)."""
    from trysquare.results import build_measures
    from trysquare_view.page import build_page, read_experiment
    from trysquare_view.server import ViewState

    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        scenario, experiment_dir = build(Path(folder), count)
        start = time.perf_counter()
        state = ViewState(scenario, experiment_dir)  # finds and checks every run folder
        figures["discover"] = time.perf_counter() - start
        experiment = state.experiment
        rows = build_measures(scenario, experiment.runs)
        measures = Path(folder) / "measures.json"
        _atomic.write_json(measures, rows)
        figures["reading"] = min(
            _timed(lambda: json.loads(measures.read_text(encoding="utf-8"))) for _ in range(3)
        )
        if panels:
            best = float("inf")
            for _ in range(2):
                start = time.perf_counter()
                page = build_page(read_experiment(scenario, experiment_dir, experiment))
                best = min(best, time.perf_counter() - start)
            figures["build"], figures["bytes"] = best, len(page.encode("utf-8"))
            return figures
        figures["build"] = _timed(state.page)  # at start, before the first visit
        figures["first"] = _timed(state.page)  # the first visit: nothing written since
        result = experiment.runs[-1].validation_dir / "check.json"
        _atomic.write_text(result, result.read_text())  # `validate` writing a result meanwhile
        figures["rebuild"] = _timed(state.page)
        figures["bytes"] = len(state.page().encode("utf-8"))
        figures.update(browser_open(state))
    return figures


def browser_open(state: Any) -> dict[str, float]:
    """Seconds for Chromium to show the score table and the matrix served by ``state``."""
    import os
    import threading
    from http.server import ThreadingHTTPServer

    from trysquare_view.server import HOST, _handler

    chromium = (
        os.environ.get("TRYSQUARE_CHROMIUM")
        or shutil.which("chromium")
        or shutil.which("chromium-browser")
    )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        chromium = None
    if chromium is None:
        return {}
    server = ThreadingHTTPServer((HOST, 0), _handler(state))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://{HOST}:{server.server_address[1]}/"
    best = best_load = float("inf")
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            for _ in range(3):
                context = browser.new_context(viewport={"width": 1200, "height": 900})
                page = context.new_page()
                start = time.perf_counter()
                page.goto(url, wait_until="commit")
                page.wait_for_selector("#score-table", state="visible", timeout=120_000)
                page.wait_for_selector("#matrix tr.runrow", state="visible", timeout=120_000)
                best = min(best, time.perf_counter() - start)
                page.wait_for_load_state("load")
                load = page.evaluate(
                    "() => performance.getEntriesByType('navigation')[0].loadEventEnd"
                )
                best_load = min(best_load, load / 1000)
                context.close()
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    return {"browser": best, "browser_load": best_load}


def _timed(action: Any) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="view's page at 2,000 runs, not 10,000"
    )
    args = parser.parse_args(argv)
    html = measure(1_000, panels=True)
    print(
        f"view.html.1k: {html['build']:.3f} s, {html['build'] / html['reading']:.1f}x reading "
        f"measures.json; {html['bytes'] / 1e6:.2f} MB (budget {BUDGET_1K / 1e6:.0f} MB)"
    )
    count = 2_000 if args.quick else 10_000
    view = measure(count, panels=False)
    label = f"view.page.{count // 1000}k"
    print(
        f"{label}: first visit {view['first']:.3f} s (target < 2 s), "
        f"{view['first'] / view['reading']:.1f}x reading measures.json"
    )
    print(
        f"{label}.rebuild: {view['rebuild']:.3f} s after a result was written, "
        f"{view['rebuild'] / view['reading']:.1f}x reading measures.json"
    )
    if "browser" in view:
        print(
            f"view.browser.{count // 1000}k: score table and matrix visible in Chromium in "
            f"{view['browser']:.3f} s (target < 2 s; load event at {view['browser_load']:.3f} s), "
            f"{view['browser'] / view['reading']:.1f}x reading measures.json"
        )
    else:
        print("  (view.browser: skipped, no chromium or playwright)", file=sys.stderr)
    print(
        f"  (page {view['bytes'] / 1e6:.2f} MB, built at start in {view['build']:.1f} s; "
        f"finding and checking the run folders at start: {view['discover']:.1f} s)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

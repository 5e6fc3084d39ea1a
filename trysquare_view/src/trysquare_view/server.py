"""``trysquare view SCENARIO PATH``: the HTML report served from 127.0.0.1, read-only.

The standard library's ``ThreadingHTTPServer`` is enough here and adds no
dependency: one user, one machine, two routes. What it serves is decided by a
route table, never by mapping a URL onto the disk, so no path outside the
experiment can be served (anything else is a 404); only GET and HEAD are
answered (any other method is a 405), and nothing on disk is written — not even
``measures.json``, which ``report`` rebuilds. Each page load reads the results
again, so runs a running ``validate`` finishes appear on reload; run panels are
fetched one by one when clicked, so a large experiment opens at once; the page
is built at start and rebuilt on a load only when a result was written since
(one stat per run tells). Run folders are found once, at start: a run folder
added later needs a restart.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import threading
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trysquare.api import Commands

__all__ = ["ViewState", "add_view_command", "make_server"]

HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def add_view_command(cli: Commands) -> None:
    """Add ``trysquare view`` to the command line."""
    parser = cli.add_parser(
        "view",
        help="serve the HTML report on 127.0.0.1 (read-only), run panels on demand",
        description="Serve the HTML report of the runs under PATH on 127.0.0.1 only, read-only; "
        "a run's panel (its diff, response and results) is built when opened.",
        epilog="example:\n  trysquare view scenario.toml runs/ --port 8765 --open",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "scenario", type=Path, help="the scenario file (relative to the current directory)"
    )
    parser.add_argument(
        "path", type=Path,
        help="the experiment folder: every run.toml below it is a run (relative to the current directory)",
    )  # fmt: skip
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        metavar="N",
        help=f"port on 127.0.0.1 (default {DEFAULT_PORT}; 0 picks a free one)",
    )
    parser.add_argument("--open", action="store_true", help="open the page in a browser")
    parser.set_defaults(handler=_view)


class ViewState:
    """The experiment as last read; the page re-reads it, a panel uses the last read."""

    def __init__(self, scenario: Any, path: Path, page_rows: int | None = None) -> None:
        from trysquare_view.page import PAGE_ROWS

        self.scenario = scenario
        self.path = path
        self.page_rows = page_rows or PAGE_ROWS  # runs per page of the matrix
        self._source: Any = None
        self._pages: dict[str, str] = {}  # by query, for the results as last read
        self.rows: Sequence[Mapping[str, Any]] = ()
        self.run_dirs: Mapping[str, Path] = {}
        self._lock = threading.Lock()
        # Found and checked once (a git call per run); each page then reads only
        # the results, which is what a running `validate` changes.
        from trysquare.api import load_experiments

        self.experiment = load_experiments([path])[0]
        self._signature_built: tuple[int, ...] = ()

    def page(self, query: str = "") -> str:
        """The page for ``query`` (the matrix's filters and page; panels left out).

        The results are read again only when one has changed since; a page is
        built once per query for the results as read (a window of the matrix is
        quick to build whatever the experiment's size).
        """
        from trysquare_view.page import Window, build_page, ordered_rows, read_experiment

        signature = self._signature()
        with self._lock:
            fresh = self._source is not None and signature == self._signature_built
            if fresh and query in self._pages:
                return self._pages[query]
            source, rows = self._source, self.rows
        if not fresh:
            source = read_experiment(self.scenario, self.path, self.experiment)
            rows = ordered_rows(source)
        page = build_page(
            source, lazy=True, window=Window.from_query(query, self.page_rows), rows=rows
        )
        with self._lock:
            if not fresh:
                self._source, self.rows, self.run_dirs = source, rows, dict(source.run_dirs)
                self._signature_built, self._pages = signature, {}
            if len(self._pages) >= 64:  # a bounded cache: queries are the user's clicks
                self._pages.clear()
            self._pages[query] = page
        return page

    def _signature(self) -> tuple[int, ...]:
        # A result is written by an atomic rename into validation/, which changes
        # that folder's mtime: one stat per run tells whether anything was written.
        stamps = []
        for run in self.experiment.runs:
            try:
                stamps.append(os.stat(run.validation_dir).st_mtime_ns)
            except OSError:
                stamps.append(-1)
        return tuple(stamps)

    def panel(self, index: int) -> str | None:
        from trysquare_view.panel import run_panel

        with self._lock:
            rows, run_dirs = self.rows, self.run_dirs
        if not rows:
            self.page()
            rows, run_dirs = self.rows, self.run_dirs
        if not 0 <= index < len(rows):
            return None
        row = rows[index]
        return run_panel(index, row, run_dirs.get(str(row["id"])), open_=True)


_PANEL = re.compile(r"/run/([0-9]{1,9})")


def _handler(state: ViewState) -> type[BaseHTTPRequestHandler]:
    from trysquare_view.page import csp

    policy = csp(True)

    class Handler(BaseHTTPRequestHandler):
        server_version = "trysquare-view"
        sys_version = ""

        def _allowed_host(self) -> bool:
            # A page on another site may aim its requests at 127.0.0.1 under its own
            # name (DNS rebinding): answer only to the names of this machine.
            host = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]").lower()
            return host in ("127.0.0.1", "localhost")

        def end_headers(self) -> None:
            # Every response, a 404, a 405 or the standard library's own error page
            # included, carries the policy the page's meta tag holds: a fragment or an
            # error opened on its own runs no script either.
            self.send_header("Content-Security-Policy", policy)
            super().end_headers()

        def _send(
            self,
            status: int,
            body: str,
            kind: str = "text/html; charset=utf-8",
            *,
            head: bool = False,
        ) -> None:
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")
            self.end_headers()
            if not head:
                self.wfile.write(data)

        def _route(self, *, head: bool = False) -> None:
            if not self._allowed_host():
                self._send(
                    HTTPStatus.FORBIDDEN, "only 127.0.0.1 or localhost\n", "text/plain", head=head
                )
                return
            path, _, query = self.path.partition("?")
            if path in ("/", "/index.html"):
                # The query only picks the matrix's filters and page; it names no file.
                self._send(HTTPStatus.OK, state.page(query), head=head)
                return
            match = _PANEL.fullmatch(path)
            if match:
                panel = state.panel(int(match.group(1)))
                if panel is not None:
                    self._send(HTTPStatus.OK, panel, head=head)
                    return
            self._send(HTTPStatus.NOT_FOUND, "not found\n", "text/plain", head=head)

        def _answer(self, *, head: bool = False) -> None:
            try:
                self._route(head=head)
            except Exception as error:  # noqa: BLE001 - one failed page, never a traceback
                why = f"{type(error).__name__}: {error}"
                self._send(
                    HTTPStatus.INTERNAL_SERVER_ERROR,
                    f"trysquare view: this page could not be built: {why}\n",
                    "text/plain; charset=utf-8",
                    head=head,
                )

        def do_GET(self) -> None:
            self._answer()

        def do_HEAD(self) -> None:
            self._answer(head=True)

        def _refuse(self) -> None:
            self.send_response(HTTPStatus.METHOD_NOT_ALLOWED)
            self.send_header("Allow", "GET, HEAD")
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse

        def log_message(self, format: str, *args: Any) -> None:
            pass  # a quiet local tool; errors reach the page

    return Handler


def make_server(
    scenario: Any, path: Path, port: int = DEFAULT_PORT, *, page_rows: int | None = None
) -> ThreadingHTTPServer:
    """The server, bound to 127.0.0.1 only (``port`` 0: a free one); not yet serving.

    ``page_rows``: runs per page of the matrix (default :data:`trysquare_view.page.PAGE_ROWS`).
    """
    state = ViewState(scenario, path, page_rows)
    state.page()  # built before the first visit, which then opens at once
    server = ThreadingHTTPServer((HOST, port), _handler(state))
    server.daemon_threads = True
    return server


def _view(args: argparse.Namespace) -> int:
    from trysquare.api import UsageError, load_scenario

    scenario = load_scenario(args.scenario)
    if not args.path.is_dir():
        raise UsageError(f"{args.path}: not a folder of runs")
    try:
        server = make_server(scenario, args.path, args.port)
    except OSError as error:
        raise UsageError(
            f"--port {args.port}: cannot listen on {HOST} ({error.strerror})"
        ) from None
    url = f"http://{HOST}:{server.server_address[1]}/"
    print(f"serving {url} (read-only; Ctrl-C stops)", flush=True)
    if args.open:
        import webbrowser

        webbrowser.open(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    finally:
        server.server_close()
    return 0

"""Issue 15: ``trysquare view`` listens on loopback only, serves no file by path, writes nothing."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from pathlib import Path

import pytest
from trysquare.scenario import load_scenario
from trysquare.testing import write_result
from trysquare_view.server import make_server

from tests.loopback import serve_in_background
from tests.view.viewlab import SECRET, Lab, build_lab, tree

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare_view.server",)


def _serve(lab: Lab) -> Iterator[tuple[Lab, int]]:
    server = make_server(load_scenario(lab.scenario), lab.root, port=0)
    serve_in_background(server)
    try:
        yield lab, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Lab, int]]:
    """A server of its own, for tests that change the experiment."""
    yield from _serve(build_lab(tmp_path))


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Lab, int]]:
    """One server for the tests that only read (a lab is five real clones)."""
    yield from _serve(build_lab(tmp_path_factory.mktemp("view-server")))


def request(port: int, path: str, method: str = "GET", host: str | None = None) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Host": host} if host else {}
    connection.request(
        method, path, body=b"x" if method in ("POST", "PUT") else None, headers=headers
    )
    response = connection.getresponse()
    body = response.read().decode("utf-8", "replace")
    connection.close()
    return response.status, body


def test_view_binds_loopback_only(tmp_path: Path) -> None:
    lab = build_lab(tmp_path)
    server = make_server(load_scenario(lab.scenario), lab.root, port=0)
    try:
        assert server.server_address[0] == "127.0.0.1"
    finally:
        server.server_close()


@pytest.mark.parametrize(
    "path",
    [
        "/../scenario/scenario.toml",
        "/runs/evil-2/response.md",
        "/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "/run/../../outside/id_rsa",
        "/run/999",
        "/run/-1",
        "//etc/passwd",
        "/measures.json",
    ],
)
def test_view_traversal_is_404(shared, path: str) -> None:
    _, port = shared
    status, body = request(port, path)
    assert status == 404
    assert SECRET not in body


def test_view_writes_nothing(served) -> None:
    lab, port = served
    before = tree(lab.root.parent)
    assert request(port, "/")[0] == 200
    for index in range(len(lab.run_ids)):
        assert request(port, f"/run/{index}")[0] == 200
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        assert request(port, "/", method)[0] == 405
        assert request(port, "/run/0", method)[0] == 405
    assert tree(lab.root.parent) == before
    assert not (lab.root / "measures.json").exists()


def test_view_refuses_a_foreign_host_name(shared) -> None:
    # A web page elsewhere reaching 127.0.0.1 under its own name (DNS rebinding).
    _, port = shared
    assert request(port, "/", host=f"attacker.example:{port}")[0] == 403
    assert request(port, "/", host=f"localhost:{port}")[0] == 200


def test_view_picks_up_results_written_while_serving(served) -> None:
    lab, port = served
    status, page = request(port, "/")
    assert status == 200 and "1/1 \u00b7 1 pending" in page
    run = lab.root / "runs" / "evil-3"
    write_result(
        run,
        "judge",
        {
            "metrics": {"clear": True},
            "reasons": {},
            "state": "valid",
            "error": None,
            "validator": {"name": "judge", "mode": "script", "digest": "sha256:x"},
            "context_digest": None,
            "duration": 0.1,
        },
    )
    status, page = request(port, "/")
    assert "2/2" in page and "1 pending" not in page


def test_view_panel_is_served_on_demand(shared) -> None:
    _, port = shared
    status, page = request(port, "/")
    assert 'id="run-0"' not in page  # panels are not in the page
    status, panel = request(port, "/run/3")  # evil-2: invalid
    assert status == 200 and panel.startswith('<details class="run" id="run-3" open>')
    assert SECRET not in panel and "not shown: response.md is a symlink" in panel


def test_view_command_serves_on_loopback_and_stops(tmp_path: Path) -> None:
    # The process is the point here: the command a user types, its one line, its socket.
    import os
    import subprocess
    import sys

    lab = build_lab(tmp_path)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trysquare",
            "view",
            str(lab.scenario),
            str(lab.root),
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("serving http://127.0.0.1:") and "(read-only" in line, line
        port = int(line.split(":")[2].split("/")[0])
        status, page = request(port, "/")
        assert status == 200 and "view-lab" in page
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert not (lab.root / "measures.json").exists()


def test_view_command_refuses_a_missing_folder_in_one_sentence(tmp_path: Path, capsys) -> None:
    from trysquare.cli import main

    lab = build_lab(tmp_path)
    assert main(["view", str(lab.scenario), str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"trysquare: {tmp_path / 'nowhere'}: not a folder of runs"


def test_view_command_refuses_a_folder_without_runs(tmp_path: Path, capsys) -> None:
    from trysquare.cli import main

    lab = build_lab(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["view", str(lab.scenario), str(empty)]) == 2
    assert "no run found under" in capsys.readouterr().err


def _headers(
    port: int, path: str, method: str = "GET", host: str | None = None
) -> tuple[int, dict[str, str]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Host": host} if host else {}
    connection.request(method, path, body=b"x" if method == "POST" else None, headers=headers)
    response = connection.getresponse()
    response.read()
    connection.close()
    return response.status, {name.lower(): value for name, value in response.getheaders()}


def _raw(port: int, request_bytes: bytes) -> bytes:
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request_bytes)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_view_every_response_carries_the_pages_content_security_policy(shared) -> None:
    # Issue 29 item 7: a /run/N fragment (agent text inside, escaped) or an error page opened
    # on its own must run no script either; the header holds the page's meta-tag policy.
    from trysquare_view.page import csp

    lab, port = shared
    policy = csp(True)
    status, page = request(port, "/")
    assert status == 200 and f'content="{policy}"' in page  # the one policy, in both places
    answers = [
        _headers(port, "/"),
        _headers(port, "/index.html?cell=fixed&page=2"),
        _headers(port, "/", "HEAD"),
        *(_headers(port, f"/run/{index}") for index in range(len(lab.run_ids))),
        _headers(port, "/run/999"),
        _headers(port, "/measures.json"),
        _headers(port, "/", host=f"attacker.example:{port}"),
        _headers(port, "/run/0", "POST"),
        _headers(port, "/", "DELETE"),
    ]
    panels = [200] * len(lab.run_ids)
    assert [status for status, _ in answers] == [200, 200, 200, *panels, 404, 404, 403, 405, 405]
    for status, headers in answers:
        assert headers.get("content-security-policy") == policy, status
    # The standard library's own error page (a request line it cannot parse, a 400).
    raw = _raw(port, b"GET / two-paths HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").decode("latin-1")
    assert raw.startswith(("HTTP/1.0 400", "HTTP/1.1 400")), raw[:80]
    assert f"Content-Security-Policy: {policy}\r\n" in raw


def test_view_page_that_cannot_be_built_is_a_500_with_the_policy_and_no_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from trysquare_view.page import csp

    from trysquare_view import server as view_server

    lab = build_lab(tmp_path)
    served = make_server(load_scenario(lab.scenario), lab.root, port=0)
    serve_in_background(served)

    def broken(self: object, query: str = "") -> str:
        raise OSError("results folder vanished")

    monkeypatch.setattr(view_server.ViewState, "page", broken)
    try:
        status, headers = _headers(served.server_address[1], "/")
    finally:
        served.shutdown()
        served.server_close()
    assert status == 500
    assert headers.get("content-security-policy") == csp(True)
    assert "Traceback" not in capfd.readouterr().err

"""A JSON-over-HTTP server on 127.0.0.1, scripted per test: the plumbing both judge
protocols' test servers share (``tests/judge/chatserver.py``,
``tests/plugins/messages_server.py``).

Each POST to ``path`` is recorded (body, headers, arrival time) and answered by
``responder(request)`` — unless ``gate(request)`` answers first (what the real
API would refuse); another path answers ``not_found()``. The server counts the
requests in flight, so tests can assert a concurrency bound.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import BaseServer
from typing import Any, Self

import attrs

# How often serve_forever looks for shutdown(): shutdown() waits that long, and its default
# (0.5 s) was the teardown of every test with a server.
SHUTDOWN_POLL = 0.02
# A trickling reply sends the rest of its body at once after this long: a client that does
# not give up still gets an answer (and a test shows that it waited).
TRICKLE_LIMIT = 20.0


def serve_in_background(server: BaseServer) -> threading.Thread:
    """``server.serve_forever()`` in a daemon thread, quick to shut down."""
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL}, daemon=True
    )
    thread.start()
    return thread


@attrs.frozen
class Reply:
    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = attrs.field(factory=dict)
    delay: float = 0.0
    trickle: float = 0.0  # seconds between two bytes of the body (headers sent at once)
    raw: bytes | None = None  # the body's bytes as sent (``body`` ignored), e.g. gzip


@attrs.frozen
class Received:
    body: dict[str, Any]
    headers: dict[str, str]
    at: float  # time.monotonic() on arrival

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body["messages"]


Responder = Callable[[Received], Reply]


def script(replies: Iterable[Reply], exhausted: Callable[[], Reply]) -> Responder:
    """Answer the n-th request with the n-th reply; past the end, ``exhausted()``."""
    queue = list(replies)
    lock = threading.Lock()

    def respond(_: Received) -> Reply:
        with lock:
            return queue.pop(0) if queue else exhausted()

    return respond


def _trickle(out: Any, data: bytes, interval: float) -> None:
    """Write ``data`` a byte every ``interval`` seconds, the rest at once after TRICKLE_LIMIT."""
    until = time.monotonic() + TRICKLE_LIMIT
    for index in range(len(data)):
        if time.monotonic() >= until:
            out.write(data[index:])
            return
        out.write(data[index : index + 1])
        out.flush()
        time.sleep(interval)


class JsonServer:
    """Listens on an ephemeral port of 127.0.0.1 while used as a context manager."""

    def __init__(
        self,
        path: str,
        responder: Responder,
        not_found: Callable[[], Reply],
        *,
        gate: Callable[[Received], Reply | None] = lambda _: None,
        lower_case_headers: bool = False,
    ) -> None:
        self.responder = responder
        self.received: list[Received] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
            disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms stall

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {
                    (key.lower() if lower_case_headers else key): value
                    for key, value in self.headers.items()
                }
                request = Received(json.loads(raw), headers, time.monotonic())
                with server.lock:
                    server.received.append(request)
                    server.in_flight += 1
                    server.peak = max(server.peak, server.in_flight)
                try:
                    if self.path != path:
                        reply = not_found()
                    else:
                        reply = gate(request) or server.responder(request)
                    if reply.delay:
                        time.sleep(reply.delay)
                finally:
                    with server.lock:
                        server.in_flight -= 1
                data = json.dumps(reply.body).encode() if reply.raw is None else reply.raw
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    if reply.trickle:
                        self.wfile.flush()
                        _trickle(self.wfile, data, reply.trickle)
                    else:
                        self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 128  # the default 5 drops bursts of connections (1 s SYN retry)

        self.httpd = Server(("127.0.0.1", 0), Handler)

    @property
    def root_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> Self:
        self.thread = serve_in_background(self.httpd)
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

"""A loopback server speaking the chat-completions protocol, scripted per test.

``ChatServer(responder)`` listens on 127.0.0.1 on an ephemeral port; each POST
to ``/v1/chat/completions`` is recorded (body, headers, arrival time) and
answered by ``responder(request)``, which returns a :class:`Reply`. Helpers
build the usual replies: a verdict call, prose, an HTTP error.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs


@attrs.frozen
class Reply:
    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = attrs.field(factory=dict)
    delay: float = 0.0


@attrs.frozen
class Received:
    body: dict[str, Any]
    headers: dict[str, str]
    at: float  # time.monotonic() on arrival

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body["messages"]


Responder = Callable[[Received], Reply]
_ids = itertools.count(1)


def completion(message: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{next(_ids)}",
        "object": "chat.completion",
        "model": "judge",
        "choices": [{"index": 0, "message": dict(message), "finish_reason": "stop"}],
    }


def tool_call(arguments: Any, *, name: str = "verdict", raw: bool = False) -> Reply:
    """A reply calling ``name``; ``arguments`` JSON-encoded unless ``raw`` (a string as is)."""
    text = arguments if raw else json.dumps(arguments)
    return Reply(body=completion({
        "role": "assistant",
        "content": None,
        "tool_calls": [{
            "id": f"call_{next(_ids)}",
            "type": "function",
            "function": {"name": name, "arguments": text},
        }],
    }))


def verdict(values: Mapping[str, bool], reason: str = "because") -> Reply:
    return tool_call({m: {"reason": f"{reason} ({m})", "value": v} for m, v in values.items()})


def prose(text: str = "I think the work is fine.") -> Reply:
    return Reply(body=completion({"role": "assistant", "content": text}))


def error(status: int, headers: Mapping[str, str] | None = None, delay: float = 0.0) -> Reply:
    return Reply(status=status, body={"error": {"message": f"status {status}"}}, headers=headers or {}, delay=delay)


def script(replies: Iterable[Reply]) -> Responder:
    """Answer the n-th request with the n-th reply (one run at a time)."""
    queue = list(replies)
    lock = threading.Lock()

    def respond(_: Received) -> Reply:
        with lock:
            if not queue:
                return error(599)
            return queue.pop(0)

    return respond


def by_turn(replies: Sequence[Reply]) -> Responder:
    """Answer by the conversation's turn (replies already in it), whatever the run."""

    def respond(request: Received) -> Reply:
        turn = sum(1 for m in request.messages if m["role"] == "assistant")
        return replies[min(turn, len(replies) - 1)]

    return respond


class ChatServer:
    def __init__(self, responder: Responder) -> None:
        self.responder = responder
        self.received: list[Received] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
            disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms stall

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                request = Received(json.loads(raw), dict(self.headers.items()), time.monotonic())
                with server.lock:
                    server.received.append(request)
                    server.in_flight += 1
                    server.peak = max(server.peak, server.in_flight)
                try:
                    if self.path != "/v1/chat/completions":
                        reply = error(404)
                    else:
                        reply = server.responder(request)
                    if reply.delay:
                        time.sleep(reply.delay)
                finally:
                    with server.lock:
                        server.in_flight -= 1
                data = json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 128  # the default 5 drops bursts of connections (1 s SYN retry)

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> ChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

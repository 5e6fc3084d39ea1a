"""A loopback server speaking the Anthropic Messages protocol, scripted per test.

``MessagesServer(responder)`` listens on 127.0.0.1 on an ephemeral port; each
POST to ``/v1/messages`` is recorded (body, headers with lower-case names,
arrival time) and answered by ``responder(request)`` — unless the API itself
would refuse the request (:func:`refusal`: a forced tool with thinking, a
``tool_result`` answering no ``tool_use``, a thinking turn's blocks dropped...),
which gets the API's 400. Helpers build the usual replies: a ``tool_use``
verdict (optionally after thinking blocks), prose, an error in the API's shape.
Another path answers 404, as the API does.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import attrs

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_ids = itertools.count(1)


@attrs.frozen
class Reply:
    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = attrs.field(factory=dict)
    delay: float = 0.0


@attrs.frozen
class Received:
    body: dict[str, Any]
    headers: dict[str, str]  # names lower-cased
    at: float  # time.monotonic() on arrival

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body["messages"]


Responder = Callable[[Received], Reply]


def message(blocks: Sequence[Mapping[str, Any]], stop_reason: str = "end_turn") -> Reply:
    return Reply(
        body={
            "id": f"msg_{next(_ids)}",
            "type": "message",
            "role": "assistant",
            "model": "judge",
            "content": [dict(block) for block in blocks],
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 20},
        },
        headers={"request-id": f"req_{next(_ids)}"},
    )


def thinking_block(text: str = "Weighing the note.") -> dict[str, Any]:
    return {"type": "thinking", "thinking": text, "signature": f"sig-{next(_ids)}-opaque=="}


def tool_use(arguments: Any, *, name: str = "verdict", thinking: bool = False) -> Reply:
    blocks: list[dict[str, Any]] = [thinking_block()] if thinking else []
    blocks.append(
        {"type": "tool_use", "id": f"toolu_{next(_ids):04d}", "name": name, "input": arguments}
    )
    return message(blocks, stop_reason="tool_use")


def verdict(
    values: Mapping[str, bool], reason: str = "because", *, thinking: bool = False
) -> Reply:
    return tool_use(
        {m: {"reason": f"{reason} ({m})", "value": v} for m, v in values.items()}, thinking=thinking
    )


def prose(text: str = "I think the work is fine.", *, thinking: bool = False) -> Reply:
    blocks: list[dict[str, Any]] = [thinking_block()] if thinking else []
    return message([*blocks, {"type": "text", "text": text}])


def error(status: int, headers: Mapping[str, str] | None = None) -> Reply:
    kind = ERROR_TYPES.get(status, "api_error")
    body = {"type": "error", "error": {"type": kind, "message": f"status {status}"}}
    return Reply(status=status, body=body, headers=headers or {})


def refusal(body: Mapping[str, Any]) -> str | None:
    """What the real API would refuse in ``body`` with a 400 (the rules a provider must keep)."""
    if not isinstance(body.get("max_tokens"), int) or not isinstance(body.get("system", ""), str):
        return "max_tokens: Field required"
    turns = body.get("messages") or []
    if not turns or turns[0].get("role") != "user":
        return "messages: first message must use the user role"
    thinking = body.get("thinking")
    if thinking is not None:
        budget = thinking.get("budget_tokens", 0)
        if budget < 1024 or budget >= body["max_tokens"]:
            return "thinking.budget_tokens: must be >= 1024 and less than max_tokens"
        if (body.get("tool_choice") or {}).get("type") in ("any", "tool"):
            return "Thinking may not be enabled when tool_choice forces tool use."
    for number, turn in enumerate(turns):
        content = turn.get("content")
        if not content:
            return f"messages.{number}: all messages must have non-empty content"
        if isinstance(content, str):
            continue
        results = [b["tool_use_id"] for b in content if b.get("type") == "tool_result"]
        if not results:
            continue
        previous = turns[number - 1] if number else {"content": []}
        uses = [b.get("id") for b in previous["content"] if b.get("type") == "tool_use"]
        if sorted(results) != sorted(uses):
            return f"messages.{number}: each tool_result must answer a tool_use of the previous message"
        if any(b.get("type") == "tool_result" for b in content[len(results) :]):
            return f"messages.{number}: tool_result blocks must come first"
        if thinking is not None and previous["content"][0].get("type") not in (
            "thinking",
            "redacted_thinking",
        ):
            return (
                f"messages.{number - 1}.content.0.type: Expected `thinking` or `redacted_thinking`"
            )
    return None


def script(replies: Iterable[Reply]) -> Responder:
    """Answer the n-th request with the n-th reply; past the end, 599."""
    queue = list(replies)
    lock = threading.Lock()

    def respond(_: Received) -> Reply:
        with lock:
            return queue.pop(0) if queue else error(599)

    return respond


class MessagesServer:
    def __init__(self, responder: Responder) -> None:
        self.responder = responder
        self.received: list[Received] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {key.lower(): value for key, value in self.headers.items()}
                request = Received(json.loads(raw), headers, time.monotonic())
                with server.lock:
                    server.received.append(request)
                    server.in_flight += 1
                    server.peak = max(server.peak, server.in_flight)
                try:
                    problem = refusal(request.body)
                    if self.path != "/v1/messages":
                        reply = error(404)
                    elif problem is not None:  # refused as the API would, and never scripted past
                        reply = Reply(
                            status=400,
                            body={
                                "type": "error",
                                "error": {"type": "invalid_request_error", "message": problem},
                            },
                        )
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
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 128

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

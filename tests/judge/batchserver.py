"""Stateful fake batch APIs on 127.0.0.1: OpenAI's (``/v1/files``, ``/v1/batches``) and
Anthropic's (``/v1/messages/batches``), each also answering (and counting) the interactive
endpoint, which batch judging must never call.

A batch advances one state on each look at it (OpenAI: ``validating``, ``in_progress``,
``finalizing``, ``completed``; Anthropic: ``in_progress`` then ``ended``); its results are
decided when it ends, one line per request, shuffled. ``outcome(custom_id, body)`` scripts
each request's fate: ``"succeeded"`` (the verdict of ``verdict(body)``), ``"errored"``,
``"expired"``, ``"malformed"`` (a verdict call whose arguments fail the schema) or
``"missing"`` (no line at all). ``kill_at`` names an event (``create``: the batch is made,
then the client dies before it hears the id; ``poll``: at the n-th look; ``results``: when
they are fetched) at which the process ``kill_pid`` is sent SIGKILL before any answer.
``end_states`` makes the n-th batch created (from 1) end the provider's own way, as
``"cancelled"`` or ``"expired"`` (Anthropic says ``ended`` either way): the requests its
script calls ``"missing"`` are then simply absent from its results.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import threading
import time
from collections.abc import Callable, Mapping
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from tests.judge.chatserver import USAGE
from tests.loopback import serve_in_background

__all__ = ["GOOD", "BatchFake", "verdict_arguments"]

GOOD = {"note_usable": True, "cites_paths": False}
USAGE_OPENAI = USAGE  # as the chat server reports it: the same answers cost the same tokens
USAGE_ANTHROPIC = {"input_tokens": 120, "output_tokens": 30}


def verdict_arguments(values: Mapping[str, bool], reason: str = "because") -> dict[str, Any]:
    """The arguments of a verdict call, worded as ``tests.judge.chatserver.verdict`` words them."""
    return {m: {"reason": f"{reason} ({m})", "value": v} for m, v in values.items()}


class BatchFake:
    """One provider's batch API (``flavour``: ``openai`` or ``anthropic``)."""

    def __init__(
        self,
        flavour: str,
        *,
        outcome: Callable[[str, Mapping[str, Any]], str] = lambda _id, _body: "succeeded",
        verdict: Callable[[Mapping[str, Any]], Mapping[str, Any]] = lambda _body: verdict_arguments(
            GOOD
        ),
        looks_to_end: int = 2,
        seed: int = 0,
    ) -> None:
        self.flavour = flavour
        self.outcome = outcome
        self.verdict = verdict
        self.looks_to_end = looks_to_end
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.order: list[str] = []  # batch ids, oldest first
        self.requests: dict[str, list[dict[str, Any]]] = {}
        self.counts = {
            "create": 0,
            "poll": 0,
            "results": 0,
            "list": 0,
            "chat": 0,
            "cancel": 0,
            "upload": 0,
        }
        self.sent_ids: list[str] = []  # every custom_id in every batch created, in order
        self.kill_at: str | None = None
        self.kill_after = 1  # the n-th such event kills
        self.kill_pid: int | None = None
        self.killed = False
        self.end_states: dict[
            int, str
        ] = {}  # batch number (from 1) -> how it ended, if not completed
        self.api = True  # False: a server with no batch API (a local vLLM), 404 on every batch path
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_GET(self) -> None:
                self._answer("GET", b"")

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                self._answer("POST", raw)

            def _answer(self, method: str, raw: bytes) -> None:
                status, body, content_type = fake.route(method, self.path, raw, self.headers)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 64

        self.httpd = Server(("127.0.0.1", 0), Handler)

    # -- plumbing ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}" + ("/v1" if self.flavour == "openai" else "")

    def __enter__(self) -> Self:
        serve_in_background(self.httpd)
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _event(self, name: str) -> None:
        self.counts[name] += 1
        if (
            self.kill_at == name
            and self.kill_pid is not None
            and not self.killed
            and self.counts[name] >= self.kill_after
        ):
            self.killed = True
            os.kill(self.kill_pid, signal.SIGKILL)
            time.sleep(0.2)  # the answer never reaches it

    def route(self, method: str, path: str, raw: bytes, headers: Any) -> tuple[int, Any, str]:
        path, _, query = path.partition("?")
        if not self.api and ("batches" in path or path == "/v1/files"):
            return 404, {"error": {"message": "no batch API here"}}, "application/json"
        with self.lock:
            if self.flavour == "openai":
                return self._openai(method, path, query, raw, headers)
            return self._anthropic(method, path, query, raw)

    # -- what a batch does --------------------------------------------------------------------

    def _new_batch(self, prefix: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
        batch_id = f"{prefix}_{len(self.order) + 1:04d}"
        batch = {
            "id": batch_id,
            "looks": 0,
            "created_at": time.time(),
            "cancelled": False,
            "lines": None,
        }
        self.batches[batch_id] = batch
        self.order.append(batch_id)
        self.requests[batch_id] = entries
        self.sent_ids.extend(str(e.get("custom_id")) for e in entries)
        return batch

    def _ended(self, batch: dict[str, Any]) -> bool:
        return batch["cancelled"] or batch["looks"] >= self.looks_to_end

    def _lines(self, batch: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """(kind, line) for each request, decided once, shuffled."""
        if batch["lines"] is None:
            lines = []
            for entry in self.requests[batch["id"]]:
                custom_id = entry["custom_id"]
                body = entry.get("body") or entry.get("params") or {}
                kind = "canceled" if batch["cancelled"] else self.outcome(custom_id, body)
                if kind == "missing":
                    continue
                lines.append((kind, self._line(custom_id, kind, body)))
            self.random.shuffle(lines)
            batch["lines"] = lines
        return batch["lines"]

    def _arguments(self, kind: str, body: Mapping[str, Any]) -> Any:
        if kind == "malformed":
            return {"note_usable": {"value": "yes"}}  # no reason, a string for a boolean
        return self.verdict(body)

    def _line(self, custom_id: str, kind: str, body: Mapping[str, Any]) -> dict[str, Any]:
        if self.flavour == "openai":
            if kind in ("succeeded", "malformed"):
                completion = {
                    "id": f"chatcmpl-{custom_id}", "object": "chat.completion", "model": "judge",
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {
                        "role": "assistant", "content": None,
                        "tool_calls": [{"id": f"call_{custom_id[-12:]}", "type": "function", "function": {
                            "name": "verdict", "arguments": json.dumps(self._arguments(kind, body))}}],
                    }}],
                    "usage": USAGE_OPENAI,
                }  # fmt: skip
                return {
                    "id": f"req_{custom_id}",
                    "custom_id": custom_id,
                    "response": {"status_code": 200, "request_id": "r", "body": completion},
                    "error": None,
                }
            if kind == "errored":
                return {
                    "id": f"req_{custom_id}",
                    "custom_id": custom_id,
                    "response": {
                        "status_code": 500,
                        "request_id": "r",
                        "body": {"error": {"message": "boom"}},
                    },
                    "error": None,
                }
            code = "batch_expired" if kind == "expired" else "batch_cancelled"
            return {
                "id": f"req_{custom_id}",
                "custom_id": custom_id,
                "response": None,
                "error": {"code": code, "message": f"request {kind}"},
            }
        if kind in ("succeeded", "malformed"):
            message = {
                "id": f"msg_{custom_id}", "type": "message", "role": "assistant", "model": "judge",
                "content": [{"type": "tool_use", "id": f"toolu_{custom_id[-12:]}", "name": "verdict",
                             "input": self._arguments(kind, body)}],
                "stop_reason": "tool_use", "usage": USAGE_ANTHROPIC,
            }  # fmt: skip
            return {"custom_id": custom_id, "result": {"type": "succeeded", "message": message}}
        if kind == "errored":
            return {
                "custom_id": custom_id,
                "result": {
                    "type": "errored",
                    "error": {"type": "error", "error": {"type": "api_error", "message": "boom"}},
                },
            }
        return {"custom_id": custom_id, "result": {"type": kind}}

    # -- OpenAI -----------------------------------------------------------------------------

    def _openai_batch(self, batch: dict[str, Any]) -> dict[str, Any]:
        states = ["validating", "in_progress", "finalizing", "completed"]
        ended = self._ended(batch)
        ending = self.end_states.get(self.order.index(batch["id"]) + 1, "completed")
        state = (
            ("cancelled" if batch["cancelled"] else ending)
            if ended
            else states[min(batch["looks"], 2)]
        )
        total = len(self.requests[batch["id"]])
        out: dict[str, Any] = {
            "id": batch["id"], "object": "batch", "endpoint": "/v1/chat/completions", "status": state,
            "created_at": int(batch["created_at"]), "metadata": batch.get("metadata"),
            "request_counts": {"total": total, "completed": 0, "failed": 0},
            "output_file_id": None, "error_file_id": None,
        }  # fmt: skip
        if ended:
            lines = self._lines(batch)
            good = [line for kind, line in lines if kind in ("succeeded", "malformed")]
            bad = [line for kind, line in lines if kind not in ("succeeded", "malformed")]
            out["request_counts"] = {"total": total, "completed": len(good), "failed": len(bad)}
            if good:
                self.files[f"file-out-{batch['id']}"] = _jsonl(good)
                out["output_file_id"] = f"file-out-{batch['id']}"
            if bad:
                self.files[f"file-err-{batch['id']}"] = _jsonl(bad)
                out["error_file_id"] = f"file-err-{batch['id']}"
        return out

    def _openai(
        self, method: str, path: str, query: str, raw: bytes, headers: Any
    ) -> tuple[int, Any, str]:
        if method == "POST" and path == "/v1/chat/completions":
            self.counts["chat"] += 1
            return (
                500,
                {"error": {"message": "batch judging must not call chat completions"}},
                "application/json",
            )
        if method == "POST" and path == "/v1/files":
            self.counts["upload"] += 1
            message = BytesParser(policy=HTTP).parsebytes(
                b"Content-Type: " + headers["Content-Type"].encode() + b"\r\n\r\n" + raw
            )
            content = next(
                part.get_payload(decode=True)
                for part in message.iter_parts()
                if part.get_param("name", header="content-disposition") == "file"
            )
            file_id = f"file-in-{len(self.files) + 1}"
            self.files[file_id] = content
            return 200, {"id": file_id, "object": "file", "purpose": "batch"}, "application/json"
        if method == "POST" and path == "/v1/batches":
            body = json.loads(raw)
            entries = [
                json.loads(line)
                for line in self.files[body["input_file_id"]].decode().splitlines()
                if line
            ]
            batch = self._new_batch("batch", entries)
            batch["metadata"] = body.get("metadata")
            self._event("create")
            return 200, self._openai_batch(batch), "application/json"
        if method == "GET" and path == "/v1/batches":
            self.counts["list"] += 1
            data = [self._openai_batch(self.batches[i]) for i in reversed(self.order)]
            return 200, {"object": "list", "data": data, "has_more": False}, "application/json"
        found = re.fullmatch(r"/v1/batches/([^/]+)(/cancel)?", path)
        if found and found.group(1) in self.batches:
            batch = self.batches[found.group(1)]
            if found.group(2):
                self.counts["cancel"] += 1
                batch["cancelled"] = True
                return 200, self._openai_batch(batch), "application/json"
            batch["looks"] += 1
            self._event("poll")
            return 200, self._openai_batch(batch), "application/json"
        found = re.fullmatch(r"/v1/files/([^/]+)/content", path)
        if method == "GET" and found and found.group(1) in self.files:
            self._event("results")
            return 200, self.files[found.group(1)], "application/jsonl"
        return 404, {"error": {"message": f"no {method} {path}"}}, "application/json"

    # -- Anthropic --------------------------------------------------------------------------

    def _anthropic_batch(self, batch: dict[str, Any]) -> dict[str, Any]:
        ended = self._ended(batch)
        total = len(self.requests[batch["id"]])
        counts = {"processing": total, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if ended:
            counts["processing"] = 0
            for kind, _ in self._lines(batch):
                counts["succeeded" if kind == "malformed" else kind] += 1
        host, port = self.httpd.server_address[:2]
        return {
            "id": batch["id"], "type": "message_batch",
            "processing_status": "ended" if ended else ("canceling" if batch["cancelled"] else "in_progress"),
            "request_counts": counts,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(batch["created_at"])),
            "results_url": f"http://{host}:{port}/v1/messages/batches/{batch['id']}/results" if ended else None,
        }  # fmt: skip

    def _anthropic(self, method: str, path: str, query: str, raw: bytes) -> tuple[int, Any, str]:
        if method == "POST" and path == "/v1/messages":
            self.counts["chat"] += 1
            return (
                500,
                {"type": "error", "error": {"message": "batch judging must not call messages"}},
                "application/json",
            )
        if method == "POST" and path == "/v1/messages/batches":
            body = json.loads(raw)
            for entry in body["requests"]:
                if not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", entry["custom_id"]):
                    return (
                        400,
                        {"type": "error", "error": {"message": "bad custom_id"}},
                        "application/json",
                    )
            batch = self._new_batch("msgbatch", body["requests"])
            self._event("create")
            return 200, self._anthropic_batch(batch), "application/json"
        if method == "GET" and path == "/v1/messages/batches":
            self.counts["list"] += 1
            data = [self._anthropic_batch(self.batches[i]) for i in reversed(self.order)]
            return 200, {"data": data, "has_more": False}, "application/json"
        found = re.fullmatch(r"/v1/messages/batches/([^/]+)(/cancel|/results)?", path)
        if found and found.group(1) in self.batches:
            batch = self.batches[found.group(1)]
            if found.group(2) == "/cancel":
                self.counts["cancel"] += 1
                batch["cancelled"] = True
                return 200, self._anthropic_batch(batch), "application/json"
            if found.group(2) == "/results":
                self._event("results")
                return 200, _jsonl([line for _, line in self._lines(batch)]), "application/x-jsonl"
            batch["looks"] += 1
            self._event("poll")
            return 200, self._anthropic_batch(batch), "application/json"
        return (
            404,
            {"type": "error", "error": {"message": f"no {method} {path}"}},
            "application/json",
        )


def _jsonl(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()

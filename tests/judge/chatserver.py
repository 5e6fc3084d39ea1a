"""A loopback server speaking the chat-completions protocol, scripted per test.

``ChatServer(responder)`` listens on 127.0.0.1 on an ephemeral port; each POST
to ``/v1/chat/completions`` is recorded (body, headers, arrival time) and
answered by ``responder(request)``, which returns a :class:`Reply`. Helpers
build the usual replies: a verdict call, prose, an HTTP error.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tests import loopback
from tests.loopback import JsonServer, Received, Reply, Responder

__all__ = [
    "ChatServer",
    "Received",
    "Reply",
    "by_turn",
    "error",
    "prose",
    "script",
    "tool_call",
    "verdict",
]


_ids = itertools.count(1)


# What each reply reports spending, as the API words it (prompt tokens include the cached).
PROMPT_TOKENS = 120
COMPLETION_TOKENS = 30
CACHED_TOKENS = 20
USAGE: dict[str, Any] = {
    "prompt_tokens": PROMPT_TOKENS,
    "completion_tokens": COMPLETION_TOKENS,
    "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
    "prompt_tokens_details": {"cached_tokens": CACHED_TOKENS},
}


def completion(
    message: Mapping[str, Any], usage: Mapping[str, Any] | None = USAGE
) -> dict[str, Any]:
    """A chat completion; ``usage=None`` is a server that reports no usage at all."""
    body: dict[str, Any] = {
        "id": f"chatcmpl-{next(_ids)}",
        "object": "chat.completion",
        "model": "judge",
        "choices": [{"index": 0, "message": dict(message), "finish_reason": "stop"}],
    }
    if usage is not None:
        body["usage"] = dict(usage)
    return body


def tool_call(
    arguments: Any,
    *,
    name: str = "verdict",
    raw: bool = False,
    usage: Mapping[str, Any] | None = USAGE,
) -> Reply:
    """A reply calling ``name``; ``arguments`` JSON-encoded unless ``raw`` (a string as is)."""
    text = arguments if raw else json.dumps(arguments)
    return Reply(
        body=completion(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{next(_ids)}",
                        "type": "function",
                        "function": {"name": name, "arguments": text},
                    }
                ],
            },
            usage,
        )
    )


def verdict(
    values: Mapping[str, bool], reason: str = "because", *, usage: Mapping[str, Any] | None = USAGE
) -> Reply:
    return tool_call(
        {m: {"reason": f"{reason} ({m})", "value": v} for m, v in values.items()}, usage=usage
    )


def prose(text: str = "I think the work is fine.") -> Reply:
    return Reply(body=completion({"role": "assistant", "content": text}))


def error(status: int, headers: Mapping[str, str] | None = None, delay: float = 0.0) -> Reply:
    return Reply(
        status=status,
        body={"error": {"message": f"status {status}"}},
        headers=headers or {},
        delay=delay,
    )


def script(replies: Iterable[Reply]) -> Responder:
    """Answer the n-th request with the n-th reply (one run at a time); past the end, 599."""
    return loopback.script(replies, lambda: error(599))


def by_turn(replies: Sequence[Reply]) -> Responder:
    """Answer by the conversation's turn (replies already in it), whatever the run."""

    def respond(request: Received) -> Reply:
        turn = sum(1 for m in request.messages if m["role"] == "assistant")
        return replies[min(turn, len(replies) - 1)]

    return respond


class ChatServer(JsonServer):
    def __init__(self, responder: Responder) -> None:
        super().__init__("/v1/chat/completions", responder, lambda: error(404))

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

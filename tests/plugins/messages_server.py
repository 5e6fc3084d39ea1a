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
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tests import loopback
from tests.loopback import JsonServer, Received, Reply, Responder

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_ids = itertools.count(1)
# What each reply reports spending, as the API words it: input_tokens leave out the cache.
INPUT_TOKENS = 100
OUTPUT_TOKENS = 20
CACHE_READ_TOKENS = 40
USAGE: dict[str, Any] = {
    "input_tokens": INPUT_TOKENS,
    "output_tokens": OUTPUT_TOKENS,
    "cache_read_input_tokens": CACHE_READ_TOKENS,
    "cache_creation_input_tokens": 0,
}


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
            "usage": dict(USAGE),
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
    return loopback.script(replies, lambda: error(599))


def _refused(request: Received) -> Reply | None:
    """The API's own 400 for what it refuses: never scripted past."""
    problem = refusal(request.body)
    if problem is None:
        return None
    return Reply(
        status=400,
        body={"type": "error", "error": {"type": "invalid_request_error", "message": problem}},
    )


class MessagesServer(JsonServer):
    def __init__(self, responder: Responder) -> None:
        super().__init__(
            "/v1/messages", responder, lambda: error(404), gate=_refused, lower_case_headers=True
        )

    @property
    def base_url(self) -> str:
        return self.root_url

"""The Messages API's wire format: the judge's neutral records in, the API's JSON out, and back.

Pure functions, no transport: what a request body holds is decided here and
tested in-process; :mod:`trysquare_anthropic.connection` only carries it.

The API's facts this follows:

- the system prompt is the top-level ``system`` field, not a message;
- a tool is ``{"name", "description", "input_schema"}``; a reply's ``content`` is a
  list of blocks, a call being ``{"type": "tool_use", "id", "name", "input"}``;
- a tool's answer is a ``tool_result`` block (``tool_use_id``, ``is_error``) in
  the next *user* message, before any text;
- ``thinking`` is ``{"type": "enabled", "budget_tokens": N}``, at least 1024 and
  below ``max_tokens``; with it enabled the API refuses a ``tool_choice`` that
  forces a tool (``tool`` or ``any``), so only ``auto`` is sent, and the
  assistant message before a ``tool_result`` must begin with the thinking blocks
  it came with, unmodified.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from trysquare_judge.providers import ChatRequest, Message, ToolCall, Usage, token_count

__all__ = [
    "ANSWER_TOKENS",
    "THINKING_BUDGETS",
    "AnthropicToolCall",
    "body",
    "read_reply",
    "read_usage",
    "tool_choice",
]

# Tokens left for the answer itself (the verdict's reasons), beyond any thinking budget.
ANSWER_TOKENS = 4096
# The API's minimum budget is 1024. High stays well under the size (~21k max_tokens) past
# which non-streamed requests risk running into long-request limits: requests here are
# never streamed.
THINKING_BUDGETS: Mapping[str, int] = {"low": 2048, "medium": 8192, "high": 16384}
THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
EMPTY_REPLY = "(no reply)"  # the API refuses an empty assistant message in the history


@attrs.frozen
class AnthropicToolCall(ToolCall):
    """A ``ToolCall`` that also carries its message's thinking blocks (JSON text).

    The judge echoes a reply's tool calls, as they are, in the assistant message it
    sends back with its correction; the API wants that message to start with the
    thinking blocks it came with (signatures intact). Carrying them on the call
    needs no change to the neutral records. Not part of equality.
    """

    thinking_blocks: str = attrs.field(default="", eq=False, repr=False)


def tool_choice(configured: str, thinking: str, tool: str) -> dict[str, Any]:
    """The ``tool_choice`` sent for a section's ``tool_choice`` and the judge's ``thinking``.

    ``named`` forces ``tool`` (the verdict); ``required`` forces some tool (``any``); ``auto``
    forces none. With thinking on the API refuses any forced choice, so ``auto``
    is sent whatever the section says: the verdict is still the only tool
    offered, and a prose answer is corrected by the judge like any other.
    """
    if thinking != "off" or configured == "auto":
        return {"type": "auto"}
    if configured == "required":
        return {"type": "any"}
    return {"type": "tool", "name": tool}


def body(request: ChatRequest, configured_tool_choice: str) -> dict[str, Any]:
    """The JSON sent: also what the transcript records (headers, and so the key, never are)."""
    data: dict[str, Any] = {
        "model": request.model,
        "max_tokens": ANSWER_TOKENS,
        "system": request.system,
        "messages": messages(request.messages),
        "tools": [
            {
                "name": request.tool.name,
                "description": request.tool.description,
                "input_schema": request.tool.parameters,
            }
        ],
        "tool_choice": tool_choice(configured_tool_choice, request.thinking, request.tool.name),
        "stream": False,
    }
    budget = THINKING_BUDGETS.get(request.thinking)
    if budget is not None:  # off sends no thinking at all
        data["thinking"] = {"type": "enabled", "budget_tokens": budget}
        data["max_tokens"] = budget + ANSWER_TOKENS
    return data


def messages(conversation: Sequence[Message]) -> list[dict[str, Any]]:
    """The neutral conversation as Messages-API turns (tool answers folded into user turns)."""
    wire: list[dict[str, Any]] = []
    for message in conversation:
        if message.role == "assistant":
            wire.append({"role": "assistant", "content": _assistant_blocks(message)})
            continue
        if message.role == "tool":
            # The judge answers a call only to correct it (a valid verdict ends the
            # conversation), so every tool result it sends is an error.
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": message.content,
                "is_error": True,
            }
        else:
            block = {"type": "text", "text": message.content or EMPTY_REPLY}
        # Consecutive tool answers and a user message are one user turn, results first.
        if wire and wire[-1]["role"] == "user":
            wire[-1]["content"].append(block)
        else:
            wire.append({"role": "user", "content": [block]})
    return wire


def _assistant_blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for call in message.tool_calls:
        if isinstance(call, AnthropicToolCall) and call.thinking_blocks:
            blocks.extend(json.loads(call.thinking_blocks))
            break  # every call of one reply carries the same blocks
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": _input(call.arguments)}
        )
    if not blocks:
        blocks.append({"type": "text", "text": EMPTY_REPLY})
    return blocks


def _input(arguments: str) -> dict[str, Any]:
    # A call read from this API always holds an object; anything else is kept, as text,
    # rather than dropped, so the model sees what it wrote.
    try:
        value = json.loads(arguments)
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"arguments": arguments}


def read_reply(data: Any) -> tuple[str, tuple[ToolCall, ...]]:
    """``(text, tool calls)`` of a Messages reply; ``TypeError`` when it is not one."""
    if not isinstance(data, dict) or not isinstance(data.get("content"), list):
        raise TypeError("no 'content' list in the reply")
    texts: list[str] = []
    uses: list[dict[str, Any]] = []
    thinking: list[Any] = []
    for block in data["content"]:
        if not isinstance(block, dict):
            raise TypeError(f"a content block is not an object: {block!r}")
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use":
            uses.append(block)
        elif kind in THINKING_BLOCKS:
            thinking.append(block)
    carried = json.dumps(thinking) if thinking else ""
    calls = tuple(
        AnthropicToolCall(
            str(use.get("id") or f"toolu_{number}"),
            str(use.get("name") or ""),
            # The API gives the input as an object; the judge validates JSON text.
            json.dumps(use.get("input")) if not isinstance(use.get("input"), str) else use["input"],
            thinking_blocks=carried,
        )
        for number, use in enumerate(uses, start=1)
    )
    return "".join(texts), calls


def read_usage(data: Any) -> Usage:
    """The tokens a Messages reply reports, in the judge's terms.

    The API's ``input_tokens`` leaves out what the prompt cache served
    (``cache_read_input_tokens``) or wrote (``cache_creation_input_tokens``);
    the judge's ``input_tokens`` is every input token billed, so they are added
    back, and ``cached_tokens`` is the cache read. Unreported counts stay ``None``.
    """
    usage = data.get("usage") if isinstance(data, dict) else None
    if not isinstance(usage, dict):
        return Usage()
    fresh = token_count(usage.get("input_tokens"))
    cached = token_count(usage.get("cache_read_input_tokens"))
    written = token_count(usage.get("cache_creation_input_tokens"))
    parts = [count for count in (fresh, cached, written) if count is not None]
    return Usage(
        input_tokens=sum(parts) if parts else None,
        output_tokens=token_count(usage.get("output_tokens")),
        cached_tokens=cached,
    )

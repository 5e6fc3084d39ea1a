"""The built-in ``openai`` provider type: the OpenAI-compatible chat-completions protocol.

Spoken by OpenAI, vLLM, Ollama, llama.cpp's server, OpenRouter... Requests are
not streamed and carry the verdict tool; ``tool_choice`` forces it unless the
section says the server cannot take that (``tool_choice = "required"`` or
``"auto"``). 429, 408, every 5xx, a lost connection and a timeout are retried
with exponential backoff that honours ``Retry-After``; every other refusal is
final. At most ``max_concurrency`` requests are in flight per configuration,
whatever the number of runs or threads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from trysquare_judge.providers import (
    ChatReply,
    ChatRequest,
    Message,
    ProviderConfig,
    ProviderError,
    ToolCall,
    Usage,
    api_key,
    token_count,
)

if TYPE_CHECKING:
    import httpx

    from trysquare_judge.providers.openai_batch import OpenAIBatchClient

# httpx (and what it pulls in) is imported by trysquare_judge.providers.http when a
# provider connects: registering this type, which every validate does to learn the
# keys to withhold from validators, must not pay for it.

__all__ = ["OpenAIConnection", "OpenAIProvider"]


class OpenAIProvider:
    """Registered as ``type = "openai"``."""

    name = "openai"

    def defaults(self) -> Mapping[str, Any]:
        return {"base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY"}

    def connect(self, config: ProviderConfig) -> OpenAIConnection:
        return OpenAIConnection(config)

    def batch_client(self, config: ProviderConfig) -> OpenAIBatchClient:
        """The Batch API of the endpoint (``/v1/files`` and ``/v1/batches``)."""
        from trysquare_judge.providers.openai_batch import OpenAIBatchClient

        return OpenAIBatchClient(config, OpenAIConnection(config))


class OpenAIConnection:
    """One endpoint speaking chat completions, over the judge's shared HTTP transport."""

    def __init__(self, config: ProviderConfig) -> None:
        from trysquare_judge.providers.http import HttpEndpoint

        self.config = config
        url = (config.base_url or "https://api.openai.com/v1").rstrip("/") + "/chat/completions"
        self.endpoint = HttpEndpoint(config, url)
        self.url = url

    def body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON sent: also what the transcript records (headers, and so the key, never are)."""
        body: dict[str, Any] = {
            "model": request.model,
            "messages": [{"role": "system", "content": request.system}]
            + [_wire_message(m) for m in request.messages],
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": request.tool.name,
                        "description": request.tool.description,
                        "parameters": request.tool.parameters,
                    },
                }
            ],
            "stream": False,
        }
        if self.config.tool_choice == "named":
            body["tool_choice"] = {"type": "function", "function": {"name": request.tool.name}}
        elif self.config.tool_choice == "required":
            body["tool_choice"] = "required"
        if request.thinking != "off":  # off sends no reasoning request at all
            body["reasoning_effort"] = request.thinking
        return body

    def complete(self, request: ChatRequest) -> ChatReply:
        key = api_key(self.config)  # read when sending, never kept
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return self.endpoint.post(
            self.body(request),
            headers,
            key,
            lambda response, exchanges: _reply(response, exchanges, key),
        )


def _wire_message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    wire: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        wire["content"] = message.content or None
        wire["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in message.tool_calls
        ]
    return wire


def _reply(
    response: httpx.Response, exchanges: tuple[Mapping[str, Any], ...], key: str | None
) -> ChatReply:
    from trysquare_judge.providers.http import snippet

    try:
        content, calls = read_completion(response.json())
    except (ValueError, KeyError, IndexError, TypeError) as error:
        raise ProviderError(
            f"unreadable reply from {response.url} ({type(error).__name__}: {error}): "
            f"{snippet(response, key)}",
            exchanges,
        ) from None
    return ChatReply(
        content=content, tool_calls=calls, exchanges=exchanges, usage=usage_of(response.json())
    )


def read_completion(data: Any) -> tuple[str, tuple[ToolCall, ...]]:
    """``(text, tool calls)`` of a chat completion's first choice (a reply, or a batch's
    response body); ``ValueError``, ``KeyError``, ``IndexError`` or ``TypeError`` when it is
    not one."""
    message = data["choices"][0]["message"]
    if not isinstance(message, dict):
        raise TypeError("message is not an object")
    calls = []
    for number, call in enumerate(message.get("tool_calls") or [], start=1):
        function = (call or {}).get("function") or {}
        arguments = function.get("arguments")
        # Some servers hand the arguments back as an object rather than JSON text.
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append(
            ToolCall(
                id=str(call.get("id") or f"call_{number}"),
                name=str(function.get("name") or ""),
                arguments=arguments,
            )
        )
    content = message.get("content")
    return (content if isinstance(content, str) else ""), tuple(calls)


def usage_of(data: Any) -> Usage:
    """The tokens a chat-completions reply reports: ``usage.prompt_tokens`` (cached ones
    included, as the API counts them), ``completion_tokens`` and
    ``prompt_tokens_details.cached_tokens``; what it does not report stays ``None``."""
    usage = data.get("usage") if isinstance(data, dict) else None
    if not isinstance(usage, dict):
        return Usage()
    details = usage.get("prompt_tokens_details")
    cached = token_count(details.get("cached_tokens")) if isinstance(details, dict) else None
    return Usage(
        input_tokens=token_count(usage.get("prompt_tokens")),
        output_tokens=token_count(usage.get("completion_tokens")),
        cached_tokens=cached,
    )

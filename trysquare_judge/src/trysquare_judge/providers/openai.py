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

import email.utils
import json
import random
import threading
import time
from collections.abc import Mapping
from typing import Any

import httpcore  # noqa: F401 - httpx imports it on the first client; pay it with the judge's loading
import httpx

from trysquare_judge.providers import (
    ChatReply,
    ChatRequest,
    Message,
    ProviderConfig,
    ProviderError,
    ToolCall,
    api_key,
)

__all__ = ["OpenAIConnection", "OpenAIProvider"]

RETRIED_STATUSES = frozenset({408, 429})
MAX_BACKOFF = 60.0  # seconds: no single wait is longer, Retry-After included
SNIPPET = 500  # characters of an error body kept in a message


class OpenAIProvider:
    """Registered as ``type = "openai"``."""

    name = "openai"

    def defaults(self) -> Mapping[str, Any]:
        return {"base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY"}

    def connect(self, config: ProviderConfig) -> OpenAIConnection:
        return OpenAIConnection(config)


class OpenAIConnection:
    """One endpoint: a shared httpx client and the semaphore that bounds it."""

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        self.url = (config.base_url or "https://api.openai.com/v1").rstrip("/") + "/chat/completions"
        self.slots = threading.BoundedSemaphore(config.max_concurrency)
        limits = httpx.Limits(
            max_connections=config.max_concurrency, max_keepalive_connections=config.max_concurrency
        )
        # A plain-http endpoint (a local server) needs no certificate store; redirects are
        # never followed, so nothing can lead the client from http to https.
        verify = not self.url.startswith("http://")
        self.client = httpx.Client(timeout=config.timeout, limits=limits, verify=verify)

    def body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON sent: also what the transcript records (headers, and so the key, never are)."""
        body: dict[str, Any] = {
            "model": request.model,
            "messages": [{"role": "system", "content": request.system}]
            + [_wire_message(m) for m in request.messages],
            "tools": [{
                "type": "function",
                "function": {
                    "name": request.tool.name,
                    "description": request.tool.description,
                    "parameters": request.tool.parameters,
                },
            }],
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
        body = self.body(request)
        exchanges: list[dict[str, Any]] = []
        attempts = self.config.max_retries + 1
        key = api_key(self.config)
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        for attempt in range(1, attempts + 1):
            exchange: dict[str, Any] = {"attempt": attempt, "request": {"url": self.url, "body": body}}
            exchanges.append(exchange)
            started = time.monotonic()
            wait: float | None = None
            try:
                with self.slots:  # held only while a request is in flight, not while backing off
                    response = self.client.post(self.url, json=body, headers=headers)
            except httpx.TimeoutException:
                exchange["error"] = f"no reply within {self.config.timeout:g} s"
            except httpx.TransportError as error:
                exchange["error"] = _scrub(f"connection failed: {type(error).__name__}: {error}", key)
            else:
                exchange["response"] = _recorded(response, key)
                if response.status_code == 200:
                    exchange["duration"] = round(time.monotonic() - started, 6)
                    return _reply(response, tuple(exchanges), key)
                if response.status_code not in RETRIED_STATUSES and response.status_code < 500:
                    raise ProviderError(
                        f"HTTP {response.status_code} from {self.url}: {_snippet(response, key)}",
                        tuple(exchanges),
                    )
                exchange["error"] = f"HTTP {response.status_code}"
                wait = _retry_after(response)
            exchange["duration"] = round(time.monotonic() - started, 6)
            if attempt == attempts:
                break
            # Exponential backoff with a little jitter, so bounded runs do not retry in lockstep;
            # the server's Retry-After wins when it asks for longer.
            backoff = self.config.retry_backoff * (2 ** (attempt - 1)) * (1 + random.random() / 10)
            time.sleep(min(max(backoff, wait or 0.0), MAX_BACKOFF))
        last = exchanges[-1].get("error", "failed")
        raise ProviderError(
            f"{last} from {self.url} (gave up after {attempts} attempt{'s' if attempts > 1 else ''})",
            tuple(exchanges),
        )


def _wire_message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    wire: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        wire["content"] = message.content or None
        wire["tool_calls"] = [
            {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            for call in message.tool_calls
        ]
    return wire


def _recorded(response: httpx.Response, key: str | None) -> dict[str, Any]:
    try:
        body: Any = response.json()
    except ValueError:
        body = _scrub(response.text, key)
    else:
        if key:
            body = json.loads(_scrub(json.dumps(body), key))
    recorded: dict[str, Any] = {"status": response.status_code, "body": body}
    if "retry-after" in response.headers:
        recorded["retry_after"] = response.headers["retry-after"]
    return recorded


def _reply(response: httpx.Response, exchanges: tuple[Mapping[str, Any], ...], key: str | None) -> ChatReply:
    try:
        message = response.json()["choices"][0]["message"]
        if not isinstance(message, dict):
            raise TypeError("message is not an object")
    except (ValueError, KeyError, IndexError, TypeError) as error:
        raise ProviderError(
            f"unreadable reply from {response.url} ({type(error).__name__}: {error}): "
            f"{_snippet(response, key)}",
            exchanges,
        ) from None
    calls = []
    for number, call in enumerate(message.get("tool_calls") or [], start=1):
        function = (call or {}).get("function") or {}
        arguments = function.get("arguments")
        # Some servers hand the arguments back as an object rather than JSON text.
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append(ToolCall(
            id=str(call.get("id") or f"call_{number}"),
            name=str(function.get("name") or ""),
            arguments=arguments,
        ))
    content = message.get("content")
    return ChatReply(
        content=content if isinstance(content, str) else "",
        tool_calls=tuple(calls),
        exchanges=exchanges,
    )


def _retry_after(response: httpx.Response) -> float | None:
    """``Retry-After`` in seconds (a number or an HTTP date), or ``None``."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def _snippet(response: httpx.Response, key: str | None) -> str:
    text = " ".join(response.text.split())
    return _scrub(text[:SNIPPET] + ("..." if len(text) > SNIPPET else ""), key) or "(empty body)"


def _scrub(text: str, key: str | None) -> str:
    # A server that echoes the request headers must not put the key in a file.
    return text.replace(key, "***") if key else text

"""Carrying one Messages request: the key and version headers, retries, the concurrency bound.

Behaves as the built-in ``openai`` provider does, so the judge and its
transcript cannot tell them apart: 408, 429, every 5xx (529, "overloaded",
included), a lost connection and a timeout are retried with exponential
backoff that honours ``retry-after``; any other refusal is final. At most
``max_concurrency`` requests are in flight per configuration.
"""

from __future__ import annotations

import email.utils
import json
import random
import threading
import time
from collections.abc import Mapping
from typing import Any

import httpx
from trysquare_judge.providers import ChatReply, ChatRequest, ProviderConfig, ProviderError, api_key

from trysquare_anthropic import wire
from trysquare_anthropic.provider import DEFAULT_BASE_URL

__all__ = ["ANTHROPIC_VERSION", "AnthropicConnection", "messages_url"]

ANTHROPIC_VERSION = "2023-06-01"  # the API's only stable version header value
RETRIED_STATUSES = frozenset({408, 429})
MAX_BACKOFF = 60.0  # seconds: no single wait is longer, retry-after included
SNIPPET = 500  # characters of an error body kept in a message


def messages_url(base_url: str | None) -> str:
    """``{base}/v1/messages``; a base already ending in ``/v1`` is taken as written."""
    base = (base_url or DEFAULT_BASE_URL).rstrip("/")
    return base + ("/messages" if base.endswith("/v1") else "/v1/messages")


class AnthropicConnection:
    """One endpoint: a shared httpx client and the semaphore that bounds it."""

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        self.url = messages_url(config.base_url)
        self.slots = threading.BoundedSemaphore(config.max_concurrency)
        limits = httpx.Limits(
            max_connections=config.max_concurrency, max_keepalive_connections=config.max_concurrency
        )
        # Redirects are never followed, so nothing can carry the key to another address.
        self.client = httpx.Client(
            timeout=config.timeout, limits=limits, verify=not self.url.startswith("http://")
        )

    def body(self, request: ChatRequest) -> dict[str, Any]:
        return wire.body(request, self.config.tool_choice)

    def complete(self, request: ChatRequest) -> ChatReply:
        body = self.body(request)
        exchanges: list[dict[str, Any]] = []
        attempts = self.config.max_retries + 1
        key = api_key(self.config)  # read when sending, never kept
        headers = {"content-type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if key:
            headers["x-api-key"] = key
        for attempt in range(1, attempts + 1):
            exchange: dict[str, Any] = {
                "attempt": attempt,
                "request": {"url": self.url, "body": body},
            }
            exchanges.append(exchange)
            started = time.monotonic()
            wait: float | None = None
            try:
                with self.slots:  # held while a request is in flight, not while backing off
                    response = self.client.post(self.url, json=body, headers=headers)
            except httpx.TimeoutException:
                exchange["error"] = f"no reply within {self.config.timeout:g} s"
            except httpx.TransportError as error:
                exchange["error"] = _scrub(
                    f"connection failed: {type(error).__name__}: {error}", key
                )
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
            # Doubling backoff with a little jitter so bounded runs do not retry in lockstep;
            # the server's retry-after wins when it asks for longer.
            backoff = self.config.retry_backoff * (2 ** (attempt - 1)) * (1 + random.random() / 10)
            time.sleep(min(max(backoff, wait or 0.0), MAX_BACKOFF))
        last = exchanges[-1].get("error", "failed")
        raise ProviderError(
            f"{last} from {self.url} (gave up after {attempts} attempt{'s' if attempts > 1 else ''})",
            tuple(exchanges),
        )


def _reply(
    response: httpx.Response, exchanges: tuple[Mapping[str, Any], ...], key: str | None
) -> ChatReply:
    try:
        content, calls = wire.read_reply(response.json())
    except (ValueError, TypeError) as error:  # not JSON, or not a message
        raise ProviderError(
            f"unreadable reply from {response.url} ({error}): {_snippet(response, key)}", exchanges
        ) from None
    return ChatReply(content=content, tool_calls=calls, exchanges=exchanges)


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
    if "request-id" in response.headers:
        recorded["request_id"] = response.headers["request-id"]  # what Anthropic support asks for
    return recorded


def _retry_after(response: httpx.Response) -> float | None:
    """``retry-after`` in seconds (a number or an HTTP date), or ``None``."""
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

"""Carrying one Messages request: the key and version headers, over the judge's transport.

Retries (408, 429, every 5xx — 529, "overloaded", included —, a lost connection,
a timeout; backoff honouring ``retry-after``), the concurrency bound and the
transcript come from ``trysquare_judge.providers.http``, exactly as for the
built-in ``openai`` provider, so the judge cannot tell them apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
from trysquare_judge.providers import ChatReply, ChatRequest, ProviderConfig, ProviderError, api_key
from trysquare_judge.providers.http import HttpEndpoint, snippet

from trysquare_anthropic import wire
from trysquare_anthropic.provider import ANTHROPIC_VERSION, DEFAULT_BASE_URL, AnthropicOptions

__all__ = ["ANTHROPIC_VERSION", "AnthropicConnection", "messages_url"]


def messages_url(base_url: str | None) -> str:
    """``{base}/v1/messages``; a base already ending in ``/v1`` is taken as written."""
    base = (base_url or DEFAULT_BASE_URL).rstrip("/")
    return base + ("/messages" if base.endswith("/v1") else "/v1/messages")


class AnthropicConnection:
    """One endpoint speaking the Messages API, over the judge's shared HTTP transport."""

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        # A config built by hand (a test, a caller of the judge) may carry no options.
        options = config.options
        if not isinstance(options, AnthropicOptions):
            options = AnthropicOptions()
        self.headers = {"content-type": "application/json", "anthropic-version": options.version}
        if options.beta:
            self.headers["anthropic-beta"] = ",".join(options.beta)
        self.url = messages_url(config.base_url)
        # request-id is what Anthropic support asks for: keep it in the transcript.
        self.endpoint = HttpEndpoint(
            config, self.url, recorded_headers={"request-id": "request_id"}
        )

    def body(self, request: ChatRequest) -> dict[str, Any]:
        return wire.body(request, self.config.tool_choice)

    def complete(self, request: ChatRequest) -> ChatReply:
        key = api_key(self.config)  # read when sending, never kept
        headers = dict(self.headers)
        if key:
            headers["x-api-key"] = key
        return self.endpoint.post(
            self.body(request),
            headers,
            key,
            lambda response, exchanges: _reply(response, exchanges, key),
        )


def _reply(
    response: httpx.Response, exchanges: tuple[Mapping[str, Any], ...], key: str | None
) -> ChatReply:
    try:
        content, calls = wire.read_reply(response.json())
    except (ValueError, TypeError) as error:  # not JSON, or not a message
        raise ProviderError(
            f"unreadable reply from {response.url} ({error}): {snippet(response, key)}", exchanges
        ) from None
    return ChatReply(
        content=content,
        tool_calls=calls,
        exchanges=exchanges,
        usage=wire.read_usage(response.json()),
    )

"""The ``anthropic`` provider type: what ``type = "anthropic"`` in ``[providers.NAME]`` names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from trysquare_judge.providers import ProviderConfig

    from trysquare_anthropic.batch import AnthropicBatchClient
    from trysquare_anthropic.connection import AnthropicConnection

__all__ = ["ANTHROPIC_VERSION", "AnthropicOptions", "AnthropicProvider"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_KEY_ENV = "ANTHROPIC_API_KEY"
ANTHROPIC_VERSION = "2023-06-01"  # the API's only stable version header value


@attrs.frozen(kw_only=True)
class AnthropicOptions:
    """The keys of ``[providers.NAME.options]`` for ``type = "anthropic"``."""

    version: str = ANTHROPIC_VERSION
    """Sent as the ``anthropic-version`` header."""

    beta: tuple[str, ...] = ()
    """Beta features to turn on, sent comma-joined as the ``anthropic-beta`` header (none
    by default: the header is then not sent)."""


class AnthropicProvider:
    """Registered as ``type = "anthropic"``."""

    name = "anthropic"
    options = AnthropicOptions

    def defaults(self) -> Mapping[str, Any]:
        return {"base_url": DEFAULT_BASE_URL, "api_key_env": DEFAULT_KEY_ENV}

    def connect(self, config: ProviderConfig) -> AnthropicConnection:
        # httpx is imported here, on the first request's way, not when plugins load.
        from trysquare_anthropic.connection import AnthropicConnection

        return AnthropicConnection(config)

    def batch_client(self, config: ProviderConfig) -> AnthropicBatchClient:
        """The Message Batches API of the endpoint (``batch = true`` on a judge)."""
        from trysquare_anthropic.batch import AnthropicBatchClient

        return AnthropicBatchClient(config)

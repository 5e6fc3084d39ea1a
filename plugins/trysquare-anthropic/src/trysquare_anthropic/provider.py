"""The ``anthropic`` provider type: what ``type = "anthropic"`` in ``[providers.NAME]`` names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trysquare_judge.providers import ProviderConfig

    from trysquare_anthropic.connection import AnthropicConnection

__all__ = ["AnthropicProvider"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_KEY_ENV = "ANTHROPIC_API_KEY"


class AnthropicProvider:
    """Registered as ``type = "anthropic"``."""

    name = "anthropic"

    def defaults(self) -> Mapping[str, Any]:
        return {"base_url": DEFAULT_BASE_URL, "api_key_env": DEFAULT_KEY_ENV}

    def connect(self, config: ProviderConfig) -> AnthropicConnection:
        # httpx is imported here, on the first request's way, not when plugins load.
        from trysquare_anthropic.connection import AnthropicConnection

        return AnthropicConnection(config)

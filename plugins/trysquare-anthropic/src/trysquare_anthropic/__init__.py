"""trysquare-anthropic: a judge provider type, ``anthropic``, for the Anthropic Messages API.

Installed as its own distribution, found through the ``trysquare`` entry point,
listed by ``trysquare plugins``. Plugins load on every trysquare command, so
nothing here imports httpx or the judge until a provider is actually needed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from trysquare.api import hookimpl

if TYPE_CHECKING:
    from trysquare_judge.providers import Provider

__all__ = ["trysquare_register_judge_providers"]


@hookimpl
def trysquare_register_judge_providers(register: Callable[[Provider], None]) -> None:
    from trysquare_anthropic.provider import AnthropicProvider

    register(AnthropicProvider())

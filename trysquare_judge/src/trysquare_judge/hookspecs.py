"""The hook the judge plugin adds: judge providers come from plugins too.

The judge adds this module from its ``trysquare_add_hookspecs`` hook when it is
registered, so the spec exists before any provider plugin is checked. Documented in
``docs/judge.md`` ("Writing a provider").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from trysquare.api import hookspec, listed_as

if TYPE_CHECKING:
    from trysquare_judge.providers import Provider


@listed_as("providers", "provider")
@hookspec
def trysquare_register_judge_providers(register: Callable[[Provider], None]) -> None:
    """Register judge provider types: what ``type = "..."`` in ``[providers.NAME]`` names.

    :param register: call it once per provider type. A provider (see
        :class:`trysquare_judge.providers.Provider`) has a ``name``, a
        ``defaults()`` mapping used when a scenario names the type with no
        ``[providers.NAME]`` section, and ``connect(config)`` returning a
        connection whose ``complete(request)`` sends one non-streamed request
        forcing the ``verdict`` tool and returns the reply (text and tool calls,
        plus the exchanges for the transcript, never a key). It retries what is
        worth retrying within ``config.max_concurrency`` requests in flight, and
        raises ``ProviderError`` when it gives up. A name registered by two
        plugins is refused, naming both.

    Example::

        @hookimpl
        def trysquare_register_judge_providers(register):
            register(AnthropicProvider())
    """

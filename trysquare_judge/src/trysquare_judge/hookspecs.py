"""The hook the judge plugin adds: judge providers come from plugins too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trysquare.hookspecs import hookspec


@hookspec
def trysquare_register_judge_providers(register: Callable[[Any], None]) -> None:
    """Register judge provider types (what ``type = "..."`` in ``[providers.NAME]`` names).

    :param register: call it once per provider type. A provider has a ``name``
        and sends one judge conversation (see ``trysquare_judge.providers``).

    Example::

        @hookimpl
        def trysquare_register_judge_providers(register):
            register(AnthropicProvider())
    """

"""The provider types shipped with the judge: ``openai``."""

from __future__ import annotations

from collections.abc import Callable

from trysquare.api import hookimpl

from trysquare_judge.providers import Provider


@hookimpl
def trysquare_register_judge_providers(register: Callable[[Provider], None]) -> None:
    from trysquare_judge.providers.openai import OpenAIProvider

    register(OpenAIProvider())

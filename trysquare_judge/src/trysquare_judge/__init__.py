"""trysquare's judge mode: a pinned model whose verdict is a schema-checked tool call."""

from __future__ import annotations

from collections.abc import Callable

from trysquare import hookimpl
from trysquare.modes import Mode
from trysquare_judge import hookspecs as trysquare_hookspecs
from trysquare_judge.builtin import trysquare_register_judge_providers
from trysquare_judge.mode import JudgeMode

__all__ = ["JudgeMode", "trysquare_hookspecs", "trysquare_register_judge_providers"]


@hookimpl
def trysquare_register_modes(register: Callable[[Mode], None]) -> None:
    register(JudgeMode())

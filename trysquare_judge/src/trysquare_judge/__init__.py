"""trysquare's judge mode: a pinned model whose verdict is a schema-checked tool call."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from trysquare.api import Mode, hookimpl
from trysquare_judge.builtin import trysquare_register_judge_providers
from trysquare_judge.mode import JudgeMode

if TYPE_CHECKING:
    import pluggy

__all__ = [
    "JudgeMode",
    "trysquare_add_hookspecs",
    "trysquare_protected_env",
    "trysquare_register_judge_providers",
]


@hookimpl
def trysquare_add_hookspecs(pluginmanager: pluggy.PluginManager) -> None:
    # Provider plugins implement the judge's own hook (pytest's pytest_addhooks idiom).
    from trysquare_judge import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def trysquare_register_modes(register: Callable[[Mode], None]) -> None:
    register(JudgeMode())


@hookimpl
def trysquare_protected_env(scenario_file: Path, config: Path | None) -> Mapping[str, str]:
    # Every key this machine's judges could use, whether this scenario judges or not:
    # a validator or the suite must not find any of them in its environment.
    from trysquare_judge.providers import protected_keys

    return protected_keys(scenario_file, config)

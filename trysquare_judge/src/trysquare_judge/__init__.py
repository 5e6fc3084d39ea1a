"""trysquare's judge mode: a pinned model whose verdict is a schema-checked tool call."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trysquare.api import hookimpl

from trysquare_judge.builtin import trysquare_register_judge_providers

if TYPE_CHECKING:
    import pluggy
    from trysquare.api import Commands, Mode

    from trysquare_judge.mode import JudgeMode

__all__ = [
    "JudgeMode",
    "trysquare_add_hookspecs",
    "trysquare_protected_env",
    "trysquare_register_commands",
    "trysquare_register_judge_providers",
]


@hookimpl
def trysquare_add_hookspecs(pluginmanager: pluggy.PluginManager) -> None:
    # Provider plugins implement the judge's own hook (pytest's pytest_addhooks idiom).
    from trysquare_judge import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def trysquare_register_commands(cli: Commands) -> None:
    # `trysquare batches`: what a batch judge has in flight, and cancelling it.
    from trysquare_judge.batch.command import register

    register(cli)


@hookimpl
def trysquare_register_modes(register: Callable[[Mode], None]) -> None:
    # Imported here: every validate asks this plugin for its protected keys, and a
    # scenario that judges nothing should not pay for the judge's mode.
    from trysquare_judge.mode import JudgeMode

    register(JudgeMode())


@hookimpl
def trysquare_protected_env(scenario_file: Path, config: Path | None) -> Mapping[str, str]:
    # Every key this machine's judges could use, whether this scenario judges or not:
    # a validator or the suite must not find any of them in its environment.
    from trysquare_judge.providers import protected_keys

    return protected_keys(scenario_file, config)


def __getattr__(name: str) -> Any:
    if name == "JudgeMode":
        from trysquare_judge.mode import JudgeMode

        return JudgeMode
    raise AttributeError(f"module 'trysquare_judge' has no attribute {name!r}")

"""trysquare's script mode: any executable, handed the path of one context file."""

from __future__ import annotations

from collections.abc import Callable

from trysquare.api import Mode, hookimpl

from trysquare_script.mode import ScriptMode, ScriptValidation

__all__ = ["ScriptMode", "ScriptValidation"]


@hookimpl
def trysquare_register_modes(register: Callable[[Mode], None]) -> None:
    register(ScriptMode())

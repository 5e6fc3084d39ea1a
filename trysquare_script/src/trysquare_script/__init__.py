"""trysquare's script mode: any executable, handed the path of one context file."""

from __future__ import annotations

from collections.abc import Callable

from trysquare import hookimpl
from trysquare.modes import Mode
from trysquare_script.mode import ScriptMode, ScriptValidation

__all__ = ["ScriptMode", "ScriptValidation"]


@hookimpl
def trysquare_register_modes(register: Callable[[Mode], None]) -> None:
    register(ScriptMode())

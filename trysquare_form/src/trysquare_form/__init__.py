"""trysquare's form mode: a blind, shuffled TOML file a human fills."""

from __future__ import annotations

from collections.abc import Callable

from trysquare import hookimpl
from trysquare.modes import Mode
from trysquare_form.mode import FormMode

__all__ = ["FormMode"]


@hookimpl
def trysquare_register_modes(register: Callable[[Mode], None]) -> None:
    register(FormMode())

"""One plugin as ``trysquare plugins`` shows it (apart from :mod:`trysquare.plugins`: no other
command needs the record, and each command's start would pay for building it)."""

from __future__ import annotations

import attrs

__all__ = ["PluginInfo"]


@attrs.frozen
class PluginInfo:
    """One plugin as ``trysquare plugins`` shows it."""

    name: str
    version: str | None
    hooks: tuple[str, ...]
    modes: tuple[str, ...] = ()
    providers: tuple[str, ...] = ()
    session_formats: tuple[str, ...] = ()
    executors: tuple[str, ...] = ()
    report_formats: tuple[str, ...] = ()
    error: str | None = None
    refused: tuple[str, ...] = ()  # names it registered that another plugin has (the rest stand)

"""The built-in session formats, registered like any plugin's.

``trysquare.plugins`` registers this module as an in-tree default, after the entry
points, so a plugin's format of another name installs beside these.
"""

from __future__ import annotations

from collections.abc import Callable

from trysquare.hookspecs import hookimpl
from trysquare.sessions import SessionFormat
from trysquare.sessions.claude_code import ClaudeCodeFormat
from trysquare.sessions.codex import CodexFormat
from trysquare.sessions.pi import PiFormat


@hookimpl
def trysquare_register_session_formats(register: Callable[[SessionFormat], None]) -> None:
    """Register ``pi``, ``claude-code`` and ``codex``."""
    register(PiFormat())
    register(ClaudeCodeFormat())
    register(CodexFormat())


def builtin_formats() -> dict[str, SessionFormat]:
    """The three built-in formats by name, without the plugin manager (tests, tools)."""
    formats: list[SessionFormat] = [PiFormat(), ClaudeCodeFormat(), CodexFormat()]
    return {fmt.name: fmt for fmt in formats}

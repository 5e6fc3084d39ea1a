"""The skeleton the built-in session readers share: a tool call's paths from a per-format table.

Every agent's log names a tool and hands it arguments; only the names differ between
formats (``Read``/``file_path`` for Claude Code, ``read``/``path`` for pi,
``read_file`` for Codex). A format states its names in a :class:`ToolTable`, and
:func:`call_paths` says what one call reads and writes; the call's arguments are taken
out of its content block (or read back from the log) by :func:`arguments_in` and
:func:`logged_call_arguments` with the format's own block type and key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from trysquare.sessions._shell import shell_reads
from trysquare.sessions._shell_writes import shell_effects
from trysquare.sessions.base import CallCollector, FilePart, LineCounter, PathResolver

__all__ = [
    "NOTHING_MORE",
    "ToolTable",
    "arguments_in",
    "call_paths",
    "finished_part",
    "logged_call_arguments",
    "shell_paths",
]

NOTHING_MORE: dict[str, Any] = {}  # shared: most calls need no more (it is never changed)

CallPaths = tuple[tuple[str, ...], tuple[str, ...], dict[str, Any]]
"""(reads, writes, what else :meth:`CallCollector.call` needs) of one call."""


@attrs.frozen
class ToolTable:
    """What one format's tool names mean.

    Each path-taking tool maps to the argument keys that may name its path, the first
    key present winning (as ``arguments.get("path", arguments.get("file_path"))``).
    """

    reader: str
    """The format's name, in "a tool the ``reader`` reader does not know"."""
    reads: Mapping[str, tuple[str, ...]]
    writes: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)
    shells: frozenset[str] = frozenset()
    """Tools whose ``command`` argument is a shell command, read for what it reads and writes."""
    quiet: frozenset[str] = frozenset()
    """Tools that write no file of the repository."""
    subagents: frozenset[str] = frozenset()
    """Tools that run a subagent, whose edits are not this log's calls."""


def _first(arguments: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if key in arguments:
            return arguments[key]
    return None


def shell_paths(command: object, paths: PathResolver) -> CallPaths:
    """What a shell command reads and writes, as a call's paths."""
    effects = shell_effects(command)
    return (
        paths.resolve_all(shell_reads(command)),
        paths.resolve_all(list(effects.writes)),
        {"shell": True, "unclear": effects.unclear, "mentions": effects.mentions},
    )


def call_paths(
    table: ToolTable, name: str, arguments: dict[str, Any], paths: PathResolver
) -> CallPaths:
    """What the call of tool ``name`` with ``arguments`` reads and writes, by ``table``."""
    if name in table.reads:
        return paths.resolve_all(_first(arguments, table.reads[name])), (), NOTHING_MORE
    if name in table.writes:
        return (), paths.resolve_all(_first(arguments, table.writes[name])), NOTHING_MORE
    if name in table.shells:
        return shell_paths(arguments.get("command"), paths)
    if name in table.subagents:
        return (
            (),
            (),
            {"unclear": f"{name!r} runs a subagent, whose edits are not this log's calls"},
        )
    if name in table.quiet:
        return (), (), NOTHING_MORE
    return (), (), {"unclear": f"{name!r} is a tool the {table.reader} reader does not know"}


def arguments_in(block: dict[str, Any], key: str) -> dict[str, Any]:
    """A call block's arguments under ``key`` as a dict (anything else kept under ``key``)."""
    arguments = block.get(key)
    if isinstance(arguments, dict):
        return arguments
    return {} if arguments is None else {key: arguments}


def logged_call_arguments(
    block_type: str, key: str
) -> Callable[[dict[str, Any], str | None], dict[str, Any]]:
    """How to read back a call's arguments from its logged message: the ``block_type``
    block of the message's content whose ``id`` is the call's, its ``key``."""

    def read_back(entry: dict[str, Any], call_id: str | None) -> dict[str, Any]:
        for block in entry["message"]["content"]:
            if (
                isinstance(block, dict)
                and block.get("type") == block_type
                and block.get("id") == call_id
            ):
                return arguments_in(block, key)
        return {}

    return read_back


def finished_part(
    file: Path,
    start: int,
    counter: LineCounter,
    calls: CallCollector,
    *,
    final_response: str | None,
    final_line: int | None,
    skills: set[str],
    more_skipped: int = 0,
    more_notes: tuple[str, ...] = (),
    doubts_first: tuple[str, ...] = (),
) -> FilePart:
    """One file's part once its lines are read: the calls numbered from ``start``, the
    counter's and the collector's sentences. ``doubts_first`` (the format's own doubts)
    come before the collector's and, failing any other, say why the response is unknown."""
    collected = calls.finish(start)  # first: finishing adds the collector's notes
    unknown = counter.response_unknown(file, final_line)
    return FilePart(
        calls=collected,
        final_response=final_response,
        skills=frozenset(skills),
        skipped=more_skipped + counter.skipped,
        notes=(*counter.notes(file), *calls.notes, *more_notes),
        doubts=(*doubts_first, *calls.doubts),
        response_unknown=unknown or (doubts_first[0] if doubts_first else None),
    )

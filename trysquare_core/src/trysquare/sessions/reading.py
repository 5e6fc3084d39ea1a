"""What a session format is, and what reading one session gives: the records every reader
returns and every metric of process reads.

Kept apart from the readers and from :func:`trysquare.sessions.open_session` (which asks
the plugin manager for the installed formats), so the hook specifications can name a
session format without reaching the engine: this module imports nothing of trysquare but
the readers' own JSON parse, and that on use.
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import attrs

__all__ = [
    "HEAD_LINES",
    "LoggedValue",
    "SessionFormat",
    "SessionReading",
    "ToolCall",
    "path_matches",
]

HEAD_LINES = 5
"""How many parsed lines :meth:`SessionFormat.sniff` is shown."""


def path_matches(path: str, pattern: str) -> bool:
    """Whether one POSIX path matches an ``fnmatch``-style glob, case-sensitively.

    Kept deliberately simple, so a reader of a metric knows what it counts:

    - ``*`` matches any run of characters, ``/`` included (``fnmatch`` semantics);
      ``?`` one character; ``[...]`` a set.
    - A leading ``**/`` also matches nothing, so ``**/SKILL.md`` matches ``SKILL.md``
      at the repo root as well as ``skills/x/SKILL.md`` and ``/home/u/.pi/.../SKILL.md``.
    - A pattern with no ``/`` is also tried against the last path component, so
      ``SKILL.md`` alone matches a ``SKILL.md`` anywhere.
    """
    if fnmatch.fnmatchcase(path, pattern):
        return True
    if pattern.startswith("**/") and fnmatch.fnmatchcase(path, pattern[3:]):
        return True
    return "/" not in pattern and fnmatch.fnmatchcase(posixpath.basename(path), pattern)


@attrs.frozen
class LoggedValue:
    """A value left in the log: the line at ``offset`` of ``file``, read back when asked for."""

    file: Path
    offset: int
    key: str | None
    """Which part of the line (a call's id, where one line holds several)."""
    extract: Callable[[dict[str, Any], str | None], Any] = attrs.field(repr=False)
    """Turns the parsed line (and ``key``) into the value."""

    def load(self) -> Any:
        """Read the line back and extract the value from it."""
        from trysquare.sessions._json import loads  # the reader's own parse: the same value

        with self.file.open("rb") as stream:
            stream.seek(self.offset)
            return self.extract(loads(stream.readline()), self.key)


@attrs.frozen
class ToolCall:
    """One call the agent made, in the order it made them.

    Hashable (the arguments do not enter the hash), so a metric may collect calls in
    a set. ``arguments`` is the agent's own dict: read it, do not change it.
    """

    index: int
    """0-based position in :meth:`SessionReading.tool_calls`."""
    name: str
    """The tool's name as the agent's runtime knows it (``read``, ``Edit``, ``shell``)."""
    _arguments: dict[str, Any] | LoggedValue = attrs.field(alias="arguments", hash=False)
    _result: str | LoggedValue | None = attrs.field(alias="result", hash=False)
    failed: bool
    """The result is an error, or no result was ever recorded."""
    reads: tuple[str, ...] = ()
    """Files it read: repo-relative POSIX paths; paths outside the repo stay absolute."""
    writes: tuple[str, ...] = ()
    """Files it wrote, edited, created or deleted, in the same form as ``reads``.

    A shell command's writes are those its words show (a redirection, ``tee``,
    ``sed -i``, ``cp``/``mv`` onto a file, ``rm``...); see ``docs/sessions.md``.
    """
    shell: bool = False
    """The call ran a shell command: its failure (an exit code) does not undo its writes."""
    unclear: str | None = None
    """Why the call may have written files it does not name (an unknown tool, a subagent,
    ``git stash``); ``None`` when the reader can tell."""
    mentions: frozenset[str] = frozenset()
    """File names (last path components) a program the reader does not know was given:
    it may have written any of them."""

    def may_have_written(self, path: str) -> str | None:
        """Why this call may have written ``path`` although the reader cannot tell, or ``None``.

        ``None`` also when the call plainly wrote it (see :attr:`writes`).
        """
        if self.unclear is not None:
            return self.unclear
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if name in self.mentions:
            return f"`{self.name}` ran a program the reader does not know, given {name!r}"
        return None

    def wrote(self, path: str) -> bool:
        """Whether ``path`` (or a folder holding it) is among :attr:`writes`."""
        return any(
            path == written or path.startswith(written.rstrip("/") + "/") for written in self.writes
        )

    @property
    def arguments(self) -> dict[str, Any]:
        """The arguments as the agent sent them (large ones read back from the log)."""
        value = self._arguments
        return value.load() if isinstance(value, LoggedValue) else value

    @property
    def result(self) -> str | None:
        """The result's text; ``None`` when no result was ever recorded.

        A long result (or long arguments: a whole file written) is not kept in memory
        with the call: it is read back from the log — one line — each time it is
        asked for, so a log made of tool output never has to fit in memory.
        """
        value = self._result
        return value.load() if isinstance(value, LoggedValue) else value

    def read_matches(self, pattern: str) -> bool:
        """Whether the call read a path matching ``pattern`` (see :func:`path_matches`).

        ``reads_a_skill = lambda call: call.read_matches("**/SKILL.md")``
        """
        return any(path_matches(path, pattern) for path in self.reads)

    def write_matches(self, pattern: str) -> bool:
        """Whether the call wrote a path matching ``pattern`` (see :func:`path_matches`)."""
        return any(path_matches(path, pattern) for path in self.writes)


@runtime_checkable
class SessionReading(Protocol):
    """One session read by a format; nothing is parsed until a method is called."""

    @property
    def skipped(self) -> int:
        """Malformed lines, unknown entries and a truncated last line passed over."""
        ...

    def tool_calls(self) -> list[ToolCall]:
        """Every call the agent made, in order (only the active branch, where it branched)."""
        ...

    def final_response(self) -> str | None:
        """The text of the agent's last message that carried text, or ``None``."""
        ...

    def skills_expanded(self) -> frozenset[str]:
        """Names of the skills whose body arrived expanded in a message, not fetched by a call."""
        ...

    def first_write(self, path: str) -> int | None:
        """Index of the first call that wrote ``path`` (repo-relative), or ``None``.

        Raises :class:`trysquare.assay.Unjudged` when a call before any write may
        have written it and the reader cannot tell.
        """
        ...


@runtime_checkable
class SessionFormat(Protocol):
    """A reader of one agent's session logs, registered by a plugin."""

    name: str
    """The value of ``session_format`` in ``run.toml`` (``pi``, ``claude-code``...)."""

    def sniff(self, head: list[dict[str, Any]]) -> bool:
        """Whether a log whose first parsed lines are ``head`` is written in this format."""
        ...

    def read(self, files: list[Path], repo: Path | None) -> SessionReading:
        """A lazy reading of ``files`` (in order; one session, one file per attempt).

        ``repo`` is where the measured clone lives now; paths are made repo-relative.
        """
        ...

"""Building blocks for a session format: a lazy reading, a call collector, line parsing.

A plugin's format may use these (see ``docs/sessions.md``): subclass
:class:`LoggedReading`, implement :meth:`LoggedReading.digest` with one streaming pass
(or two) over the files, feed a :class:`CallCollector`, and the accessors, caching
and ``first_write`` come for free.
"""

from __future__ import annotations

import gc
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs

from trysquare.sessions import LoggedValue, ToolCall
from trysquare.sessions._paths import PathResolver

__all__ = [
    "CallCollector",
    "Digest",
    "LineCounter",
    "LoggedReading",
    "PathResolver",
    "arguments_kept_or_logged",
    "iter_entries",
    "iter_positioned",
    "kept_or_logged",
    "skill_tags",
    "text_of",
]


@attrs.frozen
class Digest:
    """Everything a reading answers, computed in one go and then kept."""

    calls: tuple[ToolCall, ...]
    final_response: str | None
    skills_expanded: frozenset[str]
    skipped: int


@attrs.define
class LineCounter:
    """How many lines a pass skipped (malformed, truncated, unknown)."""

    skipped: int = 0


def iter_entries(file: Path, counter: LineCounter) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSONL file, one line at a time; broken lines are counted, not fatal.

    Blank lines are passed over silently; a line that is not JSON (a truncated last
    line included) or not an object adds one to ``counter.skipped``.
    """
    for _, entry in iter_positioned(file, counter):
        yield entry


def iter_positioned(file: Path, counter: LineCounter) -> Iterator[tuple[int, dict[str, Any]]]:
    """Like :func:`iter_entries`, with each entry's byte offset (for :class:`LoggedValue`)."""
    loads = json.loads
    offset = 0
    with file.open("rb") as stream:
        for line in stream:
            start = offset
            offset += len(line)
            try:
                entry = loads(line)
            except ValueError:
                if line.strip():
                    counter.skipped += 1
                continue
            if isinstance(entry, dict):
                yield start, entry
            else:
                counter.skipped += 1


INLINE_SIZE = 1024
"""Results and arguments up to this many characters are kept with the call; longer
ones stay in the log and are read back when asked for."""


def kept_or_logged(
    text: str,
    file: Path,
    offset: int,
    key: str | None,
    extract: Callable[[dict[str, Any], str | None], str | None],
) -> str | LoggedValue:
    """``text`` itself when short, else a pointer to where the log holds it."""
    if len(text) <= INLINE_SIZE:
        return text
    return LoggedValue(file, offset, key, extract)


def _size(value: object, depth: int = 0) -> int:
    if isinstance(value, str):
        return len(value)
    if depth < 3 and isinstance(value, dict):
        return sum(_size(item, depth + 1) for item in value.values())
    if depth < 3 and isinstance(value, list):
        return sum(_size(item, depth + 1) for item in value)
    return 8


def arguments_kept_or_logged(
    arguments: dict[str, Any],
    file: Path,
    offset: int,
    key: str | None,
    extract: Callable[[dict[str, Any], str | None], dict[str, Any]],
) -> dict[str, Any] | LoggedValue:
    """``arguments`` themselves when small, else a pointer to where the log holds them."""
    if _size(arguments) <= INLINE_SIZE:
        return arguments
    return LoggedValue(file, offset, key, extract)


def text_of(content: object, kinds: frozenset[str] = frozenset({"text"})) -> str:
    """The text of a message's content: a string, or the blocks of ``kinds`` joined by newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            block["text"]
            for block in content
            if isinstance(block, dict)
            and block.get("type") in kinds
            and isinstance(block.get("text"), str)
        ]
        return "\n".join(parts)
    return ""


_SKILL_TAG = re.compile(r"<skill\b([^>]*)>")
_NAME_ATTR = re.compile(r"""\bname\s*=\s*(?:"([^"]*)"|'([^']*)')""")
_CODEX_SKILL = re.compile(r"<skill>\s*<name>([^<]+)</name>")


def skill_tags(text: str) -> list[str]:
    """Names of skills expanded in a message: ``<skill name="N" location=...>`` blocks.

    Also accepts the ``<skill><name>N</name>`` shape some runtimes inject.
    """
    if "<skill" not in text:
        return []
    names = []
    for attributes in _SKILL_TAG.findall(text):
        found = _NAME_ATTR.search(attributes)
        if found:
            names.append(found.group(1) or found.group(2))
    names.extend(name.strip() for name in _CODEX_SKILL.findall(text))
    return [name for name in names if name]


class CallCollector:
    """Calls in the order they were made, their results paired by id in any order.

    A call whose result never comes is kept with ``result=None`` and ``failed=True``.
    A result for an id never called (another branch's, a lost line's) is ignored.
    """

    def __init__(self) -> None:
        self._calls: list[list[Any]] = []
        self._by_id: dict[str, int] = {}

    def call(
        self,
        key: str | None,
        name: str,
        arguments: dict[str, Any] | LoggedValue,
        reads: tuple[str, ...] = (),
        writes: tuple[str, ...] = (),
    ) -> int:
        """Record a call; returns its index. A repeated ``key`` replaces the earlier pairing."""
        index = len(self._calls)
        self._calls.append([name, arguments, None, True, reads, writes])
        if key is not None:
            self._by_id[key] = index
        return index

    def result(self, key: str | None, text: str | LoggedValue, failed: bool) -> int | None:
        """Pair a result with the call of id ``key``; returns that call's index, if any."""
        index = self._by_id.get(key) if key is not None else None
        if index is None:
            return None
        record = self._calls[index]
        record[2] = text
        record[3] = failed
        return index

    def index_of(self, key: str) -> int | None:
        """The index of the call of id ``key``, if it was recorded."""
        return self._by_id.get(key)

    def fail(self, key: str) -> None:
        """Mark the call of id ``key`` failed (an exit code reported apart from its output)."""
        index = self._by_id.get(key)
        if index is not None:
            self._calls[index][3] = True

    def add_reads(self, index: int, reads: tuple[str, ...]) -> None:
        """Add paths a call turned out to read (a skill body that arrived after it)."""
        record = self._calls[index]
        record[4] = tuple(dict.fromkeys((*record[4], *reads)))

    def last(self, name: str) -> int | None:
        """The index of the latest call named ``name``, if any."""
        for index in range(len(self._calls) - 1, -1, -1):
            if self._calls[index][0] == name:
                return index
        return None

    def __len__(self) -> int:
        return len(self._calls)

    def finish(self, start: int = 0) -> list[ToolCall]:
        """The collected calls as records, numbered from ``start``; the collector is emptied."""
        calls = [
            ToolCall(
                index=start + offset,
                name=name,
                arguments=arguments,
                result=result,
                failed=failed,
                reads=reads,
                writes=writes,
            )
            for offset, (name, arguments, result, failed, reads, writes) in enumerate(self._calls)
        ]
        self._calls = []
        self._by_id = {}
        return calls


@attrs.frozen
class FilePart:
    """What one file of a session contributed; a session's files are joined in order."""

    calls: list[ToolCall]
    final_response: str | None
    skills: frozenset[str]
    skipped: int


class LoggedReading:
    """A lazy reading: nothing is opened until a question is asked, then everything is kept.

    Subclasses implement :meth:`read_file`; files are read one by one, in the order
    given, each with its own cwd, and their calls are numbered on from the last.
    """

    def __init__(self, files: list[Path], repo: Path | None) -> None:
        self.files = list(files)
        self.repo = repo
        self._digest: Digest | None = None

    def read_file(self, file: Path, start: int) -> FilePart:
        """Read one file; its calls are numbered from ``start``."""
        raise NotImplementedError

    def digest(self) -> Digest:
        """Read every file once (on first use) and keep the answers."""
        if self._digest is None:
            # Reading keeps every call's arguments and result: tens of thousands of
            # young containers that the cyclic collector would rescan again and again
            # (it doubled the cost). None of them forms a cycle, so it waits.
            collecting = gc.isenabled()
            gc.disable()
            try:
                self._digest = self._read_all()
            finally:
                if collecting:
                    gc.enable()
        return self._digest

    def _read_all(self) -> Digest:
        calls: list[ToolCall] = []
        final: str | None = None
        skills: set[str] = set()
        skipped = 0
        for file in self.files:
            part = self.read_file(file, len(calls))
            calls.extend(part.calls)
            if part.final_response is not None:
                final = part.final_response
            skills.update(part.skills)
            skipped += part.skipped
        return Digest(tuple(calls), final, frozenset(skills), skipped)

    @property
    def skipped(self) -> int:
        """Malformed lines, unknown entries and truncated last lines passed over."""
        return self.digest().skipped

    def tool_calls(self) -> list[ToolCall]:
        """Every call, in order."""
        return list(self.digest().calls)

    def final_response(self) -> str | None:
        """The text of the last assistant message that carried text."""
        return self.digest().final_response

    def skills_expanded(self) -> frozenset[str]:
        """Skills whose body arrived expanded in a message."""
        return self.digest().skills_expanded

    def first_write(self, path: str) -> int | None:
        """Index of the first call that wrote ``path`` (repo-relative POSIX), or ``None``."""
        for call in self.digest().calls:
            if path in call.writes:
                return call.index
        return None

    def __repr__(self) -> str:
        names = ", ".join(file.name for file in self.files)
        return f"<{type(self).__name__} of {names}>"

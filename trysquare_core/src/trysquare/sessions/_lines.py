"""Reading a session log's lines, and what of each is kept.

A log is JSON Lines written by the measured agent: each line is parsed on its own, a
line that cannot be read is counted and named (never a crash), and a long result or
argument is kept as a pointer to where the log holds it rather than in memory.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs

from trysquare.sessions import LoggedValue, _json

_NAMED_LINES = 5
"""How many broken lines a note names by number (the count is always whole)."""


@attrs.define
class LineCounter:
    """How many lines a pass skipped (malformed, truncated, unknown), and which could not be read.

    ``skipped`` counts every line passed over; the lines that could not be *read*
    (not UTF-8, not JSON, nested too deep, not an object, cut off) are also counted
    in ``broken`` and the first few named by number in ``named``, so a metric's
    reason can say which. ``line`` is the number (1-based) of the line last read.
    """

    skipped: int = 0
    broken: int = 0
    named: list[str] = attrs.Factory(list)
    line: int = 0
    last_broken_line: int = 0

    def broke(self, why: str) -> None:
        """Count the current line as unreadable, for ``why``."""
        self.skipped += 1
        self.broken += 1
        self.last_broken_line = self.line
        if len(self.named) < _NAMED_LINES:
            self.named.append(f"line {self.line}: {why}")

    def response_unknown(self, file: Path, final_line: int | None) -> str | None:
        """Why the final response read (from line ``final_line``) is not known to be the last.

        A line after it that could not be read may have been the real last message.
        """
        if self.last_broken_line > (0 if final_line is None else final_line):
            return (
                f"{file.name} line {self.last_broken_line} could not be read and comes after "
                "the last message that was"
            )
        return None

    def notes(self, file: Path) -> tuple[str, ...]:
        """:meth:`note` as a tuple (empty when every line was read)."""
        note = self.note(file)
        return () if note is None else (note,)

    def note(self, file: Path) -> str | None:
        """The sentence naming this file's unreadable lines, or ``None`` when there were none."""
        if not self.broken:
            return None
        more = "; ..." if self.broken > len(self.named) else ""
        lines = "line" if self.broken == 1 else "lines"
        return (
            f"{file.name}: {self.broken} {lines} could not be read and "
            f"{'was' if self.broken == 1 else 'were'} skipped ({'; '.join(self.named)}{more})"
        )


def iter_entries(file: Path, counter: LineCounter) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSONL file, one line at a time; broken lines are counted, not fatal.

    Blank lines are passed over silently; a line that is not UTF-8, not JSON (a
    truncated last line included), nested too deep to parse, or not an object adds
    one to ``counter.skipped`` and is named in ``counter.named``.
    """
    for _, entry in iter_positioned(file, counter):
        yield entry


def parse_line(line: bytes, counter: LineCounter, offset: int) -> Any:
    """One line parsed, or ``None`` (counted and named in ``counter``) when it cannot be."""
    try:
        return json.loads(line)
    except UnicodeDecodeError:
        counter.broke("not UTF-8")
    except RecursionError:
        # json's C scanner refuses ~thousands of nested "[": a hostile line must not
        # crash the reader (nor `check`), only be skipped.
        counter.broke("nested too deep to read")
    except ValueError:
        if line.strip():
            counter.broke("cut off" if not line.endswith(b"\n") else "not JSON")
    return None


def iter_positioned(file: Path, counter: LineCounter) -> Iterator[tuple[int, dict[str, Any]]]:
    """Like :func:`iter_entries`, with each entry's byte offset (for :class:`LoggedValue`)."""
    fast = _json.fast_loads
    offset = 0
    with file.open("rb") as stream:
        for line in stream:
            start = offset
            offset += len(line)
            counter.line += 1
            try:
                entry = fast(line)
            except Exception:  # noqa: BLE001 - whatever msgspec refuses, json.loads decides
                entry = parse_line(line, counter, start)
                if entry is None:
                    continue
            if isinstance(entry, dict):
                yield start, entry
            else:
                counter.broke("not a JSON object")


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


def _small(arguments: dict[str, Any]) -> bool:
    """``_size(arguments) <= INLINE_SIZE``, without recursing for plain strings (most values)."""
    total = 0
    for item in arguments.values():
        total += len(item) if type(item) is str else _size(item, 1)
        if total > INLINE_SIZE:  # sizes are never negative: the answer is known
            return False
    return True


def arguments_kept_or_logged(
    arguments: dict[str, Any],
    file: Path,
    offset: int,
    key: str | None,
    extract: Callable[[dict[str, Any], str | None], dict[str, Any]],
) -> dict[str, Any] | LoggedValue:
    """``arguments`` themselves when small, else a pointer to where the log holds them."""
    if _small(arguments):
        return arguments
    return LoggedValue(file, offset, key, extract)


def text_of(content: object, kinds: frozenset[str] = frozenset({"text"})) -> str:
    """The text of a message's content: a string, or the blocks of ``kinds`` joined by newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        if len(content) == 1:  # the usual case: one block, kept as is (as the join would)
            block = content[0]
            if (
                isinstance(block, dict)
                and type(kind := block.get("type")) is str
                and kind in kinds
                and type(text := block.get("text")) is str
            ):
                return text
        parts = [
            block["text"]
            for block in content
            if isinstance(block, dict)
            and isinstance(kind := block.get("type"), str)  # a hostile list is no key
            and kind in kinds
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

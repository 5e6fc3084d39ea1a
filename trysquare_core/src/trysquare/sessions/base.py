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

from trysquare.sessions import LoggedValue, ToolCall, _json
from trysquare.sessions._json import loads
from trysquare.sessions._paths import PathResolver

__all__ = [
    "CallCollector",
    "Digest",
    "FilePart",
    "LineCounter",
    "LoggedReading",
    "PathResolver",
    "arguments_kept_or_logged",
    "iter_entries",
    "iter_positioned",
    "kept_or_logged",
    "loads",
    "parse_line",
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
    notes: tuple[str, ...] = ()
    """What a reader of a process metric must know about the log (see :attr:`LoggedReading.notes`)."""
    doubts: tuple[str, ...] = ()
    """Why the history is ambiguous: process metrics are unjudged with these reasons."""


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


_GONE: list[Any] = []  # what a collected record is replaced with (shared, never changed)


class CallCollector:
    """Calls in the order they were made, their results paired by id in any order.

    A call whose result never comes is kept with ``result=None`` and ``failed=True``.
    A result may come before its call (it pairs when the call arrives). What does
    not add up is written down rather than guessed, for the reasons of every
    process metric: a result for an id never called is counted in :attr:`notes`;
    a second result for a call is ignored (the first wins) and named; two results
    that disagree on whether the call failed, or two calls sharing one id, make the
    history ambiguous (:attr:`doubts`).
    """

    def __init__(self, file: Path | None = None) -> None:
        self._calls: list[list[Any]] = []
        self._by_id: dict[str, int] = {}
        self._early: dict[str, tuple[str | LoggedValue, bool, int]] = {}
        self._where = f"{file.name}: " if file is not None else ""
        self._orphans: list[str] = []
        self.notes: list[str] = []
        self.doubts: list[str] = []

    def call(
        self,
        key: str | None,
        name: str,
        arguments: dict[str, Any] | LoggedValue,
        reads: tuple[str, ...] = (),
        writes: tuple[str, ...] = (),
        *,
        shell: bool = False,
        unclear: str | None = None,
        mentions: frozenset[str] = frozenset(),
        line: int = 0,
    ) -> int:
        """Record a call; returns its index. A repeated ``key`` makes the history ambiguous."""
        if isinstance(key, (list, dict)):
            key = None  # a hostile id no result can name (and no dict can hold)
        index = len(self._calls)
        # The last slot: the line of the result paired with it (-1: none yet).
        self._calls.append(
            [name, arguments, None, True, reads, writes, shell, unclear, mentions, -1]
        )
        if key is not None:
            if key in self._by_id:
                self.doubts.append(
                    f"{self._where}calls {self._by_id[key]} and {index} share the id {key!r}"
                    f"{_at(line)}, so which one a result answers cannot be told"
                )
            self._by_id[key] = index
            early = self._early.pop(key, None)
            if early is not None:
                self._pair(index, *early)
        return index

    def result(
        self, key: str | None, text: str | LoggedValue, failed: bool, *, line: int = 0
    ) -> int | None:
        """Pair a result with the call of id ``key``; returns that call's index, if any yet."""
        if key is None or isinstance(key, (list, dict)):
            self._orphans.append(f"an unnamed result{_at(line)}")
            return None
        index = self._by_id.get(key)
        if index is None:
            if key in self._early:
                self._orphans.append(f"a second result for {key!r}{_at(line)}")
            else:
                self._early[key] = (text, failed, line)
            return None
        self._pair(index, text, failed, line)
        return index

    def _pair(self, index: int, text: str | LoggedValue, failed: bool, line: int) -> None:
        record = self._calls[index]
        if record[9] != -1:
            first_failed, first_line = record[3], record[9]
            if first_failed != failed:
                self.doubts.append(
                    f"{self._where}call {index} ({record[0]}) has two results that disagree on "
                    f"whether it failed{_at(first_line)} and{_at(line, ' ')}"
                )
            else:
                self.notes.append(
                    f"{self._where}call {index} ({record[0]}) has a second result{_at(line)}, "
                    "ignored: the first result counts"
                )
            return
        record[9] = line
        record[2] = text
        record[3] = failed

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
        """The collected calls as records, numbered from ``start``; the collector is emptied.

        Results that never found their call are added to :attr:`notes` here.
        """
        records, self._calls = self._calls, []
        calls: list[ToolCall] = []
        for offset, record in enumerate(records):
            name, arguments, result, failed, reads, writes, shell, unclear, mentions, _ = record
            # Positional (in ToolCall's field order): tens of thousands are built at once.
            calls.append(
                ToolCall(
                    start + offset,
                    name,
                    arguments,
                    result,
                    failed,
                    reads,
                    writes,
                    shell,
                    unclear,
                    mentions,
                )
            )
            records[offset] = _GONE  # each record goes as its call comes: the two never all coexist
        orphans = self._orphans + [
            f"{key!r}{_at(line)}" for key, (_, _, line) in self._early.items()
        ]
        if orphans:
            shown = ", ".join(orphans[:_NAMED_LINES]) + (
                ", ..." if len(orphans) > _NAMED_LINES else ""
            )
            self.notes.append(
                f"{self._where}{len(orphans)} tool result{'s' if len(orphans) != 1 else ''} "
                f"answer{'s' if len(orphans) == 1 else ''} no call ({shown})"
            )
        if start:
            # The sentences were written with the file's own indexes: number them on.
            self.notes = [_renumber(note, start) for note in self.notes]
            self.doubts = [_renumber(note, start) for note in self.doubts]
        self._by_id = {}
        self._early = {}
        self._orphans = []
        return calls


_CALL_NUMBER = re.compile(r"\bcalls? (\d+)(?: and (\d+))?")


def _renumber(sentence: str, start: int) -> str:
    def shift(match: re.Match[str]) -> str:
        text = match.group(0)
        for number in filter(None, match.groups()):
            text = text.replace(number, str(int(number) + start), 1)
        return text

    return _CALL_NUMBER.sub(shift, sentence, count=1)


def _at(line: int, lead: str = " ") -> str:
    return f"{lead}on line {line}" if line else ""


@attrs.frozen
class FilePart:
    """What one file of a session contributed; a session's files are joined in order."""

    calls: list[ToolCall]
    final_response: str | None
    skills: frozenset[str]
    skipped: int
    notes: tuple[str, ...] = ()
    """Sentences for the reasons of every process metric (broken lines, orphan results...)."""
    doubts: tuple[str, ...] = ()
    """Why this file's history is ambiguous (process metrics are then unjudged)."""
    response_unknown: str | None = None
    """Why the final response cannot be trusted to be the last one (it is then ``None``)."""


_SURROGATES = re.compile("[\ud800-\udfff]")


def _clean_text(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD (JSON allows them; UTF-8 does not)."""
    return _SURROGATES.sub("\ufffd", text)


def _cannot_tell(call: ToolCall, path: str, why: str) -> None:
    from trysquare.assay import Unjudged

    raise Unjudged(
        f"whether call {call.index} ({call.name}) wrote {path} cannot be told: {why}; "
        "no earlier call wrote it"
    )


def _enable_gc_past(kept: object) -> None:
    """Turn the cyclic collector back on without making it scan what the reading kept.

    Re-enabled as is, its next pass walks every young object — the tens of thousands
    of calls and logged values just built, none in a cycle — for nothing (a tenth of
    a reading's time). Freezing and unfreezing moves them straight to the oldest
    generation, where only a full collection looks at them. Done only when nothing
    was frozen before (a host that froze objects on purpose, say before forking,
    keeps them frozen).
    """
    if kept is not None and gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
    gc.enable()


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
                    _enable_gc_past(self._digest)
        return self._digest

    def _read_all(self) -> Digest:
        calls: list[ToolCall] = []
        final: str | None = None
        unknown: str | None = None
        skills: set[str] = set()
        skipped = 0
        notes: list[str] = []
        doubts: list[str] = []
        for file in self.files:
            part = self.read_file(file, len(calls))
            calls.extend(part.calls)
            if part.final_response is not None:
                final, unknown = part.final_response, None
            if part.response_unknown is not None:
                unknown = part.response_unknown
            skills.update(part.skills)
            skipped += part.skipped
            notes.extend(part.notes)
            doubts.extend(part.doubts)
        if unknown is not None:
            final = None
            notes.append(f"no final response is read: {unknown}")
        elif final is not None:
            final = _clean_text(final)
        return Digest(
            tuple(calls),
            final,
            frozenset(skills),
            skipped,
            tuple(doubts) + tuple(notes),
            tuple(doubts),
        )

    @property
    def skipped(self) -> int:
        """Malformed lines, unknown entries and truncated last lines passed over."""
        return self.digest().skipped

    @property
    def notes(self) -> tuple[str, ...]:
        """What a reader of a process metric must know about this log, one sentence each.

        Lines that could not be read (by number), tool results that answer no call,
        a second result for a call, recorded work the active branch leaves out, and
        everything in :attr:`doubts`. ``trysquare.assay`` adds them to the reason of
        every metric that read the session.
        """
        return self.digest().notes

    @property
    def doubts(self) -> tuple[str, ...]:
        """Why the history is ambiguous (reused ids, results that disagree); empty when it is not."""
        return self.digest().doubts

    def _unambiguous(self) -> Digest:
        digest = self.digest()
        if digest.doubts:
            from trysquare.assay import Unjudged

            raise Unjudged("the session log contradicts itself: " + "; ".join(digest.doubts))
        return digest

    def tool_calls(self) -> list[ToolCall]:
        """Every call, in order; raises ``Unjudged`` when the history is ambiguous."""
        return list(self._unambiguous().calls)

    def final_response(self) -> str | None:
        """The text of the last assistant message that carried text.

        ``None`` when none did, or when the log does not let it be trusted as the
        last one (a line after it could not be read; pi: reused entry ids).
        Lone surrogates (``"\\ud83d"`` in the JSON) become U+FFFD, so the text can
        always be written as UTF-8.
        """
        return self.digest().final_response

    def skills_expanded(self) -> frozenset[str]:
        """Skills whose body arrived expanded in a message; ``Unjudged`` when ambiguous."""
        return self._unambiguous().skills_expanded

    def first_write(self, path: str) -> int | None:
        """Index of the first call that wrote ``path`` (repo-relative POSIX), or ``None``.

        A call wrote the file when it did not fail and :meth:`ToolCall.wrote` says so
        (a deletion is a write, as in ``touched``). A failed call never wrote —
        except a shell command that plainly writes it: its exit code says nothing of
        whether the write ran before the failure, so it *may* have written. A call
        that may have written the file and cannot be told (an unknown tool, a
        subagent, ``git stash``, an unknown program given the file's name, that
        failed shell command) raises ``Unjudged`` naming the call, unless an
        earlier call already wrote the file.
        """
        for call in self._unambiguous().calls:
            if call.wrote(path):
                if not call.failed:
                    return call.index
                if call.shell:
                    _cannot_tell(call, path, "it writes the file but exited with an error")
                continue
            if call.failed and not call.shell:
                continue  # a tool that refused wrote nothing
            why = call.may_have_written(path)
            if why is not None:
                _cannot_tell(call, path, why)
        return None

    def __repr__(self) -> str:
        names = ", ".join(file.name for file in self.files)
        return f"<{type(self).__name__} of {names}>"

"""Collecting a file's tool calls in order, each paired with its result by id in any order."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from trysquare.sessions import LoggedValue, ToolCall
from trysquare.sessions._lines import _NAMED_LINES

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

"""Building blocks for a session format: a lazy reading, a call collector, line parsing.

A plugin's format may use these (see ``docs/sessions.md``): subclass
:class:`LoggedReading`, implement :meth:`LoggedReading.digest` with one streaming pass
(or two) over the files, feed a :class:`CallCollector`, and the accessors, caching
and ``first_write`` come for free.

This module is the one face of those blocks: the reading is here, line parsing lives in
:mod:`trysquare.sessions._lines` and the collector in :mod:`trysquare.sessions._collector`,
both importable from here.
"""

from __future__ import annotations

import gc
import re
from pathlib import Path

import attrs

from trysquare.sessions import ToolCall
from trysquare.sessions._collector import CallCollector
from trysquare.sessions._json import loads
from trysquare.sessions._lines import (
    LineCounter,
    arguments_kept_or_logged,
    iter_entries,
    iter_positioned,
    kept_or_logged,
    parse_line,
    skill_tags,
    text_of,
)
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

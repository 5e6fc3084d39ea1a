"""A session's reading as plain JSON, for validators in any language.

``trysquare.assay`` asks the reader one question at a time (``run.tool_calls()``,
``run.first_write(path)``); a script in another language gets the same answers,
computed by the same reader, written once into the run folder and printed by
``trysquare session``. Nothing here decides what a call did: it only writes down
what :class:`~trysquare.sessions.SessionReading` answers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the package imports this module lazily: no circle at run time
    from trysquare.sessions import SessionReading, ToolCall

__all__ = ["FACTS_VERSION", "session_facts"]

FACTS_VERSION = 1
"""Bumped when a key changes meaning; a key added leaves it as it is."""


def _call(call: ToolCall) -> dict[str, Any]:
    return {
        "index": call.index,
        "name": call.name,
        "failed": call.failed,
        "shell": call.shell,
        "reads": list(call.reads),
        "writes": list(call.writes),
        "unclear": call.unclear,
        "mentions": sorted(call.mentions),
    }


def session_facts(reading: SessionReading, paths: Iterable[str] = ()) -> dict[str, Any]:
    """What ``reading`` says, as one JSON object (see ``docs/any-language.md``).

    ``first_write`` answers for every path a call wrote and every one of ``paths``
    (the run's ``touched``): the index of the first call that wrote it, or ``null``
    when none did. A path whose first write cannot be told is in
    ``first_write_unjudged`` with the reason instead. Where the log contradicts
    itself, ``unjudged`` says why and no call is listed: the same answer
    ``run.tool_calls()`` gives.
    """
    from trysquare.assay import Unjudged

    facts: dict[str, Any] = {
        "version": FACTS_VERSION,
        "skipped": reading.skipped,
        "notes": list(getattr(reading, "notes", ())),
    }
    try:
        calls = reading.tool_calls()
        skills = reading.skills_expanded()
    except Unjudged as unjudged:
        facts["unjudged"] = unjudged.reason
        return facts
    facts["tool_calls"] = [_call(call) for call in calls]
    facts["failed_calls"] = [call.index for call in calls if call.failed]
    facts["skills_expanded"] = sorted(skills)
    written: dict[str, int | None] = {}
    unjudged_writes: dict[str, str] = {}
    asked = {path for call in calls for path in call.writes} | set(paths)
    for path in sorted(asked):
        try:
            written[path] = reading.first_write(path)
        except Unjudged as why:
            unjudged_writes[path] = why.reason
    facts["first_write"] = written
    facts["first_write_unjudged"] = unjudged_writes
    return facts

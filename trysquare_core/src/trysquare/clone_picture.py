"""The record of the measured clone as validation found it: what the runner plans a task with
and :mod:`trysquare.clone_guard` compares after the validator.

Kept apart from the guard (which reads results and run folders), so the runner's task
record can name it without reaching the engine: this module imports nothing of trysquare.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from trysquare._record import record

__all__ = ["ClonePicture", "Entry"]

Entry = tuple[int, int, int, int, int]  # inode, size, mtime_ns, ctime_ns, mode


@record
class ClonePicture:
    """The measured clone as validation found it, and what the check before it found."""

    entries: Mapping[str, Entry]
    root: tuple[int, int]  # (device, inode) of the clone folder
    # Why the run must not be validated: the clone differs from its recorded work.
    problem: str | None = None
    # The etalon checkout the run's validators read (shared with other runs): it
    # must come out of validation as it went in, too.
    etalon: Path | None = None
    etalon_entries: Mapping[str, Entry] = attrs.field(factory=dict)
    # When the walk behind ``entries`` began (time.time_ns()); 0: unknown, nothing settled.
    taken_ns: int = 0

    def as_record(self) -> tuple[Any, ...]:
        """Plain data (for :class:`trysquare._spill.Spill`); :meth:`from_record` undoes it."""
        etalon = None if self.etalon is None else os.fspath(self.etalon)
        return (
            dict(self.entries),
            self.root,
            self.problem,
            etalon,
            dict(self.etalon_entries),
            self.taken_ns,
        )

    @classmethod
    def from_record(cls, record: tuple[Any, ...]) -> ClonePicture:
        entries, root, problem, etalon, etalon_entries, taken_ns = record
        etalon_path = None if etalon is None else Path(etalon)
        return cls(entries, tuple(root), problem, etalon_path, etalon_entries, taken_ns)

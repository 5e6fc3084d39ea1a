"""What ``validate`` found, counted, and the closing line that says it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from trysquare._shown import shown
from trysquare.errors import RunError

__all__ = ["Summary"]


@attrs.define
class Summary:
    """The counts of one ``validate`` and its exit code."""

    runs: int = 0
    states: dict[str, int] = attrs.field(factory=lambda: {"valid": 0, "invalid": 0, "pending": 0})
    unpublishable: list[str] = attrs.field(factory=list)
    skipped_runs: list[RunError] = attrs.field(factory=list)
    executed: int = 0
    reused: int = 0
    interrupted: bool = False
    # Set when the disk filled up: the matrix stopped early, and exit is 1.
    stopped: str | None = None
    # Results that could not be recorded (a symlink, a full disk), by run folder.
    unrecorded: dict[Path, list[dict[str, str]]] = attrs.field(factory=dict)
    # -x: tasks never started (or ended unrecorded) after the first invalid result.
    not_started: int = 0

    def count(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Add measures rows to the closing line's counts."""
        for row in rows:
            self.runs += 1
            self.states[row["state"]] += 1
            if row["state"] == "invalid" and row["cell"] not in self.unpublishable:
                self.unpublishable.append(row["cell"])

    def add_counts(self, other: Summary) -> None:
        """Add the run counts of ``other`` (rows counted apart) to these."""
        self.runs += other.runs
        for state, number in other.states.items():
            self.states[state] += number
        self.unpublishable.extend(c for c in other.unpublishable if c not in self.unpublishable)

    @property
    def exit_code(self) -> int:
        return 1 if self.states["invalid"] or self.skipped_runs or self.stopped else 0

    def closing_line(self) -> str:
        """One line: runs by state, the cells not publishable, what could not be read."""
        parts = [f"{self.states[s]} {s}" for s in ("valid", "invalid", "pending") if self.states[s]]
        line = f"{self.runs} run{'s' if self.runs != 1 else ''}: " + (", ".join(parts) or "none")
        if self.unpublishable:
            cells = ", ".join(f"'{c}'" for c in self.unpublishable)
            verb = "is" if len(self.unpublishable) == 1 else "are"
            line += f" (cell{'s' if len(self.unpublishable) > 1 else ''} {cells} {verb} not publishable)"
        if self.skipped_runs:
            line += f"; {len(self.skipped_runs)} run folder(s) could not be read"
        if self.reused:
            line += f"; {self.reused} result{'s' if self.reused != 1 else ''} unchanged (reused)"
        if self.not_started:
            line += f"; stopped at the first invalid result (-x): {self.not_started} task(s) not run"
        if self.stopped:
            line += f"; stopped early: {self.stopped}"
        return shown(line)

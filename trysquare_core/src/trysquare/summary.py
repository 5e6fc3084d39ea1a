"""What ``validate`` found, counted, and the closing line that says it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from trysquare._record import mutable_record
from trysquare._shown import shown
from trysquare.errors import RunError

__all__ = ["Summary"]


@mutable_record
class Summary:
    """The counts of one ``validate`` and its exit code.

    Rows are counted over the validators ``validate`` ran (``--only``): a result of a
    validator not selected neither fails nor passes this command. ``criteria`` are the
    metrics a verdict rests on: a cell where none of its runs has a judged value of one
    of them measured nothing, and is not publishable. ``fail_on`` (``--fail-on``) adds
    ``unjudged`` or ``pending`` metrics to what makes the exit code 1.
    """

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
    # The selected validators' metrics (None: every validator's), the other validators'
    # names, the metrics a verdict rests on, and what --fail-on adds to a failure.
    selected: tuple[str, ...] | None = None
    others: frozenset[str] = frozenset()
    criteria: tuple[str, ...] = ()
    fail_on: frozenset[str] = frozenset()
    # Unjudged values by metric, and the runs holding one (counted runs only).
    unjudged: dict[str, int] = attrs.field(factory=dict)
    unjudged_runs: int = 0
    pending_metrics: int = 0
    # Results kept because asking again failed (--rejudge in an outage): what failed.
    kept_after: list[str] = attrs.field(factory=list)
    # Work left in flight (a batch judge under --no-wait): one sentence each.
    in_flight: list[str] = attrs.field(factory=list)
    # Per cell and criterion: [judged values, unjudged values].
    judged: dict[tuple[str, str], list[int]] = attrs.field(factory=dict)

    @classmethod
    def over(
        cls, scenario: Any, selected: Sequence[Any], *, fail_on: Sequence[str] = ()
    ) -> Summary:
        """An empty summary counting ``selected`` validations of ``scenario``."""
        every = tuple(scenario.validations)
        names = {v.name for v in selected}
        chosen = None if len(names) == len(every) else tuple(m for v in selected for m in v.metrics)
        verdict = getattr(scenario, "verdict", None)
        criteria = tuple(getattr(verdict, "criteria", None) or ())
        return cls(
            selected=chosen,
            others=frozenset(v.name for v in every if v.name not in names),
            criteria=tuple(m for m in criteria if chosen is None or m in chosen),
            fail_on=frozenset(fail_on),
        )

    def fresh(self) -> Summary:
        """An empty summary counting as this one does."""
        return Summary(
            selected=self.selected, others=self.others, criteria=self.criteria, fail_on=self.fail_on
        )

    def _state(self, row: Mapping[str, Any]) -> str:
        """The row's state over the selected validators."""
        if self.selected is None:
            return str(row["state"])
        if row["state"] == "invalid":
            errors = row.get("errors") or ()
            if not errors or any(e.get("validator") not in self.others for e in errors):
                return "invalid"
        if any(m in self.selected for m in row.get("pending") or ()):
            return "pending"
        return "valid"

    def count(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Add measures rows to the closing line's counts."""
        for row in rows:
            self.runs += 1
            state = self._state(row)
            self.states[state] += 1
            if state == "invalid":
                if row["cell"] not in self.unpublishable:
                    self.unpublishable.append(row["cell"])
                continue
            metrics = row.get("metrics") or {}
            chosen = self.selected if self.selected is not None else tuple(metrics)
            pending = row.get("pending") or ()
            self.pending_metrics += sum(
                1 for m in pending if self.selected is None or m in self.selected
            )
            missing = [m for m in chosen if m in metrics and metrics[m] is None]
            for metric in missing:
                self.unjudged[metric] = self.unjudged.get(metric, 0) + 1
            self.unjudged_runs += bool(missing)
            for metric in self.criteria:
                if metric in metrics:
                    tally = self.judged.setdefault((row["cell"], metric), [0, 0])
                    tally[metrics[metric] is None] += 1

    def add_counts(self, other: Summary) -> None:
        """Add the run counts of ``other`` (rows counted apart) to these."""
        self.runs += other.runs
        for state, number in other.states.items():
            self.states[state] += number
        self.unpublishable.extend(c for c in other.unpublishable if c not in self.unpublishable)
        for metric, number in other.unjudged.items():
            self.unjudged[metric] = self.unjudged.get(metric, 0) + number
        self.unjudged_runs += other.unjudged_runs
        self.pending_metrics += other.pending_metrics
        for key, (judged, unjudged) in other.judged.items():
            tally = self.judged.setdefault(key, [0, 0])
            tally[0] += judged
            tally[1] += unjudged

    def unmeasured(self) -> dict[str, list[str]]:
        """Cells (not already unpublishable for an invalid run) with a criterion no run
        could judge: the criteria, by cell."""
        found: dict[str, list[str]] = {}
        for (cell, metric), (judged, unjudged) in self.judged.items():
            if unjudged and not judged and cell not in self.unpublishable:
                found.setdefault(cell, []).append(metric)
        return found

    @property
    def exit_code(self) -> int:
        failed = (
            self.states["invalid"]
            or self.skipped_runs
            or self.stopped
            or self.unmeasured()
            or self.kept_after
        )
        if "unjudged" in self.fail_on and self.unjudged:
            failed = True
        if "pending" in self.fail_on and (self.pending_metrics or self.states["pending"]):
            failed = True
        return 1 if failed else 0

    def closing_line(self) -> str:
        """One line: runs by state, the cells not publishable, what could not be read."""
        parts = [f"{self.states[s]} {s}" for s in ("valid", "invalid", "pending") if self.states[s]]
        line = f"{self.runs} run{'s' if self.runs != 1 else ''}: " + (", ".join(parts) or "none")
        if self.unpublishable:
            cells = ", ".join(f"'{c}'" for c in self.unpublishable)
            verb = "is" if len(self.unpublishable) == 1 else "are"
            line += f" (cell{'s' if len(self.unpublishable) > 1 else ''} {cells} {verb} not publishable)"
        if self.unjudged:
            values = ", ".join(f"{metric} {n}" for metric, n in sorted(self.unjudged.items()))
            line += (
                f"; {self.unjudged_runs} run{'s' if self.unjudged_runs != 1 else ''} with unjudged "
                f"metrics ({values})"
            )
        for cell, metrics in self.unmeasured().items():
            names = ", ".join(metrics)
            line += (
                f"; cell '{cell}' is not publishable: no run has a judged value of {names} "
                "(a verdict rests on it)"
            )
        if self.skipped_runs:
            line += f"; {len(self.skipped_runs)} run folder(s) could not be read"
        if self.reused:
            line += f"; {self.reused} result{'s' if self.reused != 1 else ''} unchanged (reused)"
        if self.kept_after:
            number = len(self.kept_after)
            line += (
                f"; {number} result{'s' if number != 1 else ''} kept as recorded: asking again "
                f"failed ({self.kept_after[0]})"
            )
        if self.not_started:
            line += (
                f"; stopped at the first invalid result (-x): {self.not_started} task(s) not run"
            )
        if self.stopped:
            line += f"; stopped early: {self.stopped}"
        for sentence in self.in_flight:
            line += f"; {sentence}"
        return shown(line)

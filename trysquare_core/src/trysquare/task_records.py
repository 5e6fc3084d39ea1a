"""The records one validation task travels in: what the runner plans (:class:`PlannedTask`)
and what became of it (:class:`TaskResult`).

An executor carries these between the runner and :func:`trysquare.execute.execute_task`
(locally or to a cluster worker), and its protocol names them; they are kept apart from
the execution itself, which reaches the suite and the result files, so the executor's
protocol and the hook specifications name them without reaching the engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from trysquare import _convert
from trysquare._record import record
from trysquare.modes import Outcome, Validation, ValidationTask

if TYPE_CHECKING:
    from trysquare.clone_picture import ClonePicture
    from trysquare.run_records import Run

__all__ = ["PlannedTask", "TaskResult"]


@record
class PlannedTask:
    """The runner's record of one task: the :class:`ValidationTask` a mode is handed, and
    what the runner checks and records around its validator.

    An executor carries it, unopened, to :func:`execute_task` (locally or on a cluster
    worker); it reads ``task`` (or ``run`` and ``validation``) and nothing else.
    """

    task: ValidationTask
    """What the validator's mode is handed."""
    digest: str = ""
    """The validator's digest, recorded beside the outcome (an unchanged pair is reused)."""
    context_digest: str = ""
    """The context's digest, recorded beside the outcome."""
    declared_elsewhere: Mapping[str, str] = attrs.field(factory=dict)
    """Which validator declares each metric (its own included): a stray metric another one
    declares is dropped, the declarer wins. One mapping shared by every task."""
    clone_before: ClonePicture | None = None
    """The measured clone before validation, to catch a validator writing into it; ``None``
    when the clone is not there to look at."""
    rerun_suite: bool = False
    """``--rerun-suite``: no recorded suite outcome is reused."""
    replaces_as_planned: bytes | None = None
    """sha256 of the result file this task replaces, as planning read it (``None``: there
    was none), when that file is checked as it is replaced (``check_replaced``) rather than
    read before the validator starts."""
    check_replaced: bool = False
    """The result file this task replaces is held to ``replaces_as_planned`` as it is
    replaced: a file changed since planning makes the task's result invalid."""

    @property
    def run(self) -> Run:
        return self.task.run

    @property
    def validation(self) -> Validation:
        return self.task.validation


@record
class TaskResult:
    """What became of one task: its outcome as recorded, and the result file's document."""

    task: ValidationTask
    outcome: Outcome  # as recorded (foreign metrics dropped); its stderr is in the file
    document: Mapping[str, Any]  # validation/<name>.json as written
    # False when the run's folder refused the write (a symlink, a full disk): the
    # document then holds the invalid state and why, and is in no file.
    recorded: bool = True
    # The refused write met a full disk: the validate this task belongs to starts no other.
    no_space_left: bool = False
    # sha256 of the bytes the result file was given, where it was written here (None when
    # the record came from afar: then it is computed from ``document``).
    written_sha: bytes | None = None

    @classmethod
    def from_document(cls, planned: PlannedTask, document: Mapping[str, Any]) -> TaskResult:
        """The record for a result document that arrived as plain JSON from afar (a cluster
        worker sends back the document :func:`record_task` wrote, not the record).

        Structured by trysquare's strict converter: a document whose metrics,
        state or reasons are not what a result holds is refused (``ScenarioError``).
        """
        # Loaded here: only a result arriving from afar (a cluster worker's) is structured.
        from trysquare._recorded_outcome import RecordedOutcome

        task = planned.task
        fields = {f.name for f in attrs.fields(RecordedOutcome)}
        found = _convert.structure(
            {k: v for k, v in document.items() if k in fields},
            RecordedOutcome,
            file=Path(f"{task.validation.name}.json"),
            label=f"the result of validator '{task.validation.name}'",
        )
        outcome = Outcome(
            metrics=found.metrics,
            reasons=found.reasons,
            state=found.state,
            error=found.error,
            provenance=found.provenance,
            notes=found.notes,
            kept_after=found.kept_after,
        )
        return cls(
            task,
            outcome,
            document,
            recorded=not document.get("unrecorded"),
            no_space_left=bool(document.get("no_space_left")),
        )

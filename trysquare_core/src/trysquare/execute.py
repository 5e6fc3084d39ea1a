"""Running one validation task and recording its result: what every executor runs.

:func:`execute_task` evaluates one :class:`~trysquare.modes.ValidationTask` and
writes its result atomically into the run folder; it returns a
:class:`TaskResult`, the record the runner, the progress display and the
``trysquare_metrics_collected`` observers read. An executor running tasks
elsewhere (a cluster worker) runs exactly this function, so the files it writes
are the ones the local pool writes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from trysquare import _atomic, _convert, results
from trysquare._stop import is_no_space
from trysquare._suiteservice import SuiteService
from trysquare.modes import Outcome, State, Validation, ValidationTask

if TYPE_CHECKING:
    from trysquare.clone_guard import ClonePicture
    from trysquare.runs import Run

__all__ = [
    "Evaluated",
    "PlannedTask",
    "TaskResult",
    "evaluate_task",
    "execute_task",
    "record_invalid",
    "record_task",
    "write_problem",
]


@attrs.frozen
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

    @property
    def run(self) -> Run:
        return self.task.run

    @property
    def validation(self) -> Validation:
        return self.task.validation


@attrs.frozen
class _RecordedOutcome:
    """The part of a result document an observer is told, structured strictly."""

    metrics: dict[str, Any]
    reasons: dict[str, str]
    state: State
    error: str | None
    provenance: dict[str, dict[str, str]] | None = None
    notes: tuple[str, ...] = ()
    kept_after: str | None = None


@attrs.frozen
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

    @classmethod
    def from_document(cls, planned: PlannedTask, document: Mapping[str, Any]) -> TaskResult:
        """The record for a result document that arrived as plain JSON from afar (a cluster
        worker sends back the document :func:`record_task` wrote, not the record).

        Structured by trysquare's strict converter: a document whose metrics,
        state or reasons are not what a result holds is refused (``ScenarioError``).
        """
        task = planned.task
        fields = {f.name for f in attrs.fields(_RecordedOutcome)}
        found = _convert.structure(
            {k: v for k, v in document.items() if k in fields},
            _RecordedOutcome,
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


def execute_task(task: PlannedTask, *, interrupted: Callable[[], bool] = lambda: False) -> TaskResult | None:
    """Evaluate one task and record its result atomically; return what was recorded.

    Any executor runs exactly this, so a result written on a cluster worker is
    the same file the local pool writes. When ``interrupted()`` turns true while
    the validator ran, it was killed by the interruption, not failed: nothing is
    recorded and ``None`` is returned.
    """
    evaluated = evaluate_task(task, interrupted=interrupted)
    return None if evaluated is None else record_task(evaluated)


@attrs.frozen
class Evaluated:
    """A task evaluated and not yet recorded (:func:`evaluate_task`)."""

    task: PlannedTask
    outcome: Outcome
    refused: bool  # the clone was refused before validation: nothing ran on it
    duration: float


def evaluate_task(planned: PlannedTask, *, interrupted: Callable[[], bool] = lambda: False) -> Evaluated | None:
    """The first half of :func:`execute_task`: run the validator (``None`` when interrupted).

    The local pool records in its own thread while the next validator starts.
    """
    started = time.monotonic()
    task = planned.task
    refusal = None if planned.clone_before is None else planned.clone_before.problem
    refused = refusal is not None
    try:
        if refusal is not None:
            # The clone is not the agent's recorded work: nothing run on it is a measurement.
            # What was recorded (a human's answers, a paid verdict) is kept beside the
            # refusal, as a spoiled result keeps it, for when the clone is made right.
            kept = task.previous or {}
            outcome = Outcome.invalid(
                refusal,
                metrics=dict(kept.get("metrics") or {}),
                reasons=dict(kept.get("reasons") or {}),
                provenance=kept.get("provenance"),
            )
        elif "test_command" not in task.context:
            outcome = task.validation.evaluate(task)
        else:
            # run.tests() inside the validator asks this service: the suite runs in the jail.
            with SuiteService(planned) as suite:
                job = attrs.evolve(task, environment={**task.environment, **suite.environment})
                outcome = task.validation.evaluate(job)
            if suite.crash is not None:
                outcome = Outcome.invalid(suite.crash, stderr=outcome.stderr)
            elif suite.notes:
                outcome = attrs.evolve(outcome, notes=(*outcome.notes, *suite.notes))
    except Exception as error:  # noqa: BLE001 - a broken mode spoils one result, not the matrix
        outcome = Outcome.invalid(
            f"validator '{task.validation.name}' crashed inside trysquare: {type(error).__name__}: {error}"
        )
    if interrupted():
        return None
    return Evaluated(planned, _drop_foreign_metrics(outcome, planned), refused, time.monotonic() - started)


def record_task(evaluated: Evaluated) -> TaskResult:
    """The second half of :func:`execute_task`: write the result atomically, return the record."""
    planned, outcome = evaluated.task, evaluated.outcome
    task = planned.task
    document = results.result_document(
        task.validation,
        outcome,
        digest=planned.digest,
        # A refused clone's result is never reused: the next validate decides afresh.
        context_digest=None if evaluated.refused else planned.context_digest,
        duration=evaluated.duration,
    )
    try:
        document = results.write_result(task.run, task.validation.name, document, outcome.stderr)
    except OSError as error:
        # This run's folder refused the write (a symlink, a full disk): its task
        # is invalid, said by path; the matrix goes on (or stops cleanly on ENOSPC).
        problem = f"{task.run.label}: the result could not be recorded: {write_problem(error)}"
        full = is_no_space(error)
        document = {**document, "metrics": {}, "reasons": {}, "state": "invalid", "error": problem,
                    "unrecorded": True, **({"no_space_left": True} if full else {})}
        return TaskResult(task, Outcome.invalid(problem), document, recorded=False, no_space_left=full)
    # The stderr is in its file; the record travels (to observers, from a worker) without it.
    return TaskResult(task, attrs.evolve(outcome, stderr=None), document)


def record_invalid(task: PlannedTask, error: str) -> TaskResult:
    """Record ``task`` invalid for ``error`` without running its validator (a cluster that
    could not run it): the result file says why, as every invalid result does."""
    return record_task(Evaluated(task, Outcome.invalid(error), refused=False, duration=0.0))


def write_problem(error: OSError) -> str:
    """One phrase for a failed read or write of one run's data (a full disk said as such;
    the caller's :class:`trysquare._stop.StopState` decides what a full disk stops)."""
    if is_no_space(error):
        where = f" ({error.filename})" if error.filename else ""
        return f"no space left on device{where}"
    if isinstance(error, _atomic.UnsafePath):
        return str(error)
    text = error.strerror or type(error).__name__
    return f"{text} ({error.filename})" if error.filename else text


def _drop_foreign_metrics(outcome: Outcome, task: PlannedTask) -> Outcome:
    own = task.validation.name
    foreign = [m for m in outcome.metrics if task.declared_elsewhere.get(m, own) != own]
    if not foreign:
        return outcome
    notes = list(outcome.notes)
    for metric in foreign:
        notes.append(
            f"dropped metric '{metric}': it is declared by validator '{task.declared_elsewhere[metric]}'"
        )
    return attrs.evolve(
        outcome,
        metrics={k: v for k, v in outcome.metrics.items() if k not in foreign},
        reasons={k: v for k, v in outcome.reasons.items() if k not in foreign},
        notes=tuple(notes),
    )

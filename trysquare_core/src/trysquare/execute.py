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
from collections.abc import Callable

import attrs

from trysquare import _atomic, results, sandbox
from trysquare._record import record
from trysquare._stop import is_no_space
from trysquare.modes import Outcome
from trysquare.task_records import PlannedTask, TaskResult

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


def execute_task(
    task: PlannedTask, *, interrupted: Callable[[], bool] = lambda: False
) -> TaskResult | None:
    """Evaluate one task and record its result atomically; return what was recorded.

    Any executor runs exactly this, so a result written on a cluster worker is
    the same file the local pool writes. When ``interrupted()`` turns true while
    the validator ran, it was killed by the interruption, not failed: nothing is
    recorded and ``None`` is returned.
    """
    evaluated = evaluate_task(task, interrupted=interrupted)
    return None if evaluated is None else record_task(evaluated)


@record
class Evaluated:
    """A task evaluated and not yet recorded (:func:`evaluate_task`)."""

    task: PlannedTask
    outcome: Outcome
    refused: bool  # the clone was refused before validation: nothing ran on it
    duration: float


def evaluate_task(
    planned: PlannedTask, *, interrupted: Callable[[], bool] = lambda: False
) -> Evaluated | None:
    """The first half of :func:`execute_task`: run the validator (``None`` when interrupted).

    The local pool records in its own thread while the next validator starts.
    """
    started = time.monotonic()
    task = planned.task
    refusal = None if planned.clone_before is None else planned.clone_before.problem
    refused = refusal is not None
    # A cluster's worker knows only this task's run: no child of it writes /dev/shm if the run
    # or its clone lies there (the local validate named every run already).
    with sandbox.protecting((task.run.dir_text, task.run.repo)):
        outcome = _outcome(planned, refusal)
    if interrupted():
        return None
    return Evaluated(
        planned, _drop_foreign_metrics(outcome, planned), refused, time.monotonic() - started
    )


def _outcome(planned: PlannedTask, refusal: str | None) -> Outcome:
    """The task's outcome: the validator's, or invalid when the clone was refused or the mode
    crashed."""
    task = planned.task
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
            # Imported here: a validator without a test command never needs its socket.
            from trysquare._suiteservice import SuiteService

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
    return outcome


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
        try:
            document, written_sha = results.write_result_digested(
                task.run,
                task.validation.name,
                document,
                outcome.stderr,
                replacing=(
                    planned.replaces_as_planned if planned.check_replaced else results.REPLACING_ANY
                ),
            )
        except results.ReplacedChanged as changed:
            # Written meanwhile by something else (a validator of another run): not this
            # validator's measurement, nor the forger's; recorded invalid, as a task whose
            # previous result changed before it started is (planning._task).
            outcome = Outcome.invalid(str(changed))
            document = results.result_document(
                task.validation, outcome, digest=planned.digest, context_digest=None, duration=0.0
            )
            document, written_sha = results.write_result_digested(
                task.run, task.validation.name, document, None
            )
    except OSError as error:
        # This run's folder refused the write (a symlink, a full disk): its task
        # is invalid, said by path; the matrix goes on (or stops cleanly on ENOSPC).
        problem = f"{task.run.label}: the result could not be recorded: {write_problem(error)}"
        full = is_no_space(error)
        document = {
            **document,
            "metrics": {},
            "reasons": {},
            "state": "invalid",
            "error": problem,
            "unrecorded": True,
            **({"no_space_left": True} if full else {}),
        }
        return TaskResult(
            task, Outcome.invalid(problem), document, recorded=False, no_space_left=full
        )
    # The stderr is in its file; the record travels (to observers, from a worker) without it.
    return TaskResult(task, attrs.evolve(outcome, stderr=None), document, written_sha=written_sha)


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

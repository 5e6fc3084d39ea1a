"""``trysquare validate``: plan every run × validator, execute, check, record.

1. Plan (:mod:`trysquare.planning`): every clone is pictured and every context
   built before the first validator starts; what must run is kept as digests.
   Where nothing a validator runs can write outside its own folders (Landlock
   enforced, the local pool), planning goes on in a thread of its own while the
   first tasks already run, never more than
   :data:`~trysquare._planned_tasks.PLANNED_AHEAD_AT_MOST` runs ahead of them.
2. Execute: the executor takes the tasks, each built when it is reached, and
   yields what :func:`trysquare.execute.execute_task` recorded; progress and
   observers are told as each finishes.
3. Check (:mod:`trysquare.result_guard`, :mod:`trysquare.clone_guard`): result files
   written by anything but trysquare, and clones written during validation, make their runs invalid
   (under Landlock each clone is checked once its run's tasks are back).
4. Record: ``measures.json`` of each experiment, written row by row.

Nothing of a run is held but its :class:`~trysquare.runs.Run`, a record number
and a few digests, so 10,000 runs cost little more memory than 1,000. The matrix
carries on past every failure: a run that cannot be read is reported and skipped,
a validator that fails makes its run invalid, and every other run and validator
goes on.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO, TypeVar

from trysquare import (
    _clone_checks,
    _inflight,
    _prepared_scope,
    _process,
    _spill,
    plugins,
    result_guard,
    results,
    sandbox,
)
from trysquare._planned_tasks import PlannedTasks
from trysquare._shown import shown
from trysquare._stop import StopState
from trysquare.errors import RunError, UsageError
from trysquare.execute import PlannedTask, TaskResult, write_problem
from trysquare.gathering import gather
from trysquare.lock import experiment_lock
from trysquare.modes import Gathering, Validation
from trysquare.options import ValidateOptions
from trysquare.planning import RunPlan, plan_runs
from trysquare.progress import Progress
from trysquare.runs import Experiment, Run
from trysquare.scenario import Scenario
from trysquare.summary import Summary

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

__all__ = ["Summary", "ValidateOptions", "plan", "select_validations", "validate"]

T = TypeVar("T")


def select_validations(scenario: Scenario, only: Sequence[str]) -> tuple[Validation, ...]:
    if not only:
        return scenario.validations
    names = {v.name for v in scenario.validations}
    for name in only:
        if name not in names:
            raise UsageError(
                f"--only {name}: {scenario.path.name} has no validator named '{name}' "
                f"(it has: {', '.join(sorted(names))})"
            )
    return tuple(v for v in scenario.validations if v.name in only)


def plan(
    scenario: Scenario,
    runs: Sequence[Run],
    validations: Sequence[Validation],
    options: ValidateOptions,
    errors: list[RunError],
    pool: ThreadPoolExecutor,
) -> list[PlannedTask]:
    """Every task that must run, built whole (``validate`` builds each only when it runs)."""
    with _spill.Spill() as spill:
        plans, unbuilt = plan_runs(scenario, runs, validations, options, spill, pool)
        errors.extend(unbuilt)
        return [task for run_plan in plans for task in run_plan.tasks(spill)]


def validate(
    scenario: Scenario,
    experiments: Sequence[Experiment],
    options: ValidateOptions,
    *,
    out: TextIO | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> Summary:
    """Validate every run of ``experiments``; write results and ``measures.json``.

    Lines go to ``out``, by default the ``sys.stdout`` of the moment of the call.
    """
    return _ValidateRun(scenario, options, sys.stdout if out is None else out, should_stop).run(
        experiments
    )


class _ValidateRun:
    """One call of :func:`validate`: its options, its closing line and its stop state.

    Everything that stops this validate (the user, a full disk, ``-x``) is held here, never at
    module level: two validates in one process stop each other in nothing.
    """

    def __init__(
        self,
        scenario: Scenario,
        options: ValidateOptions,
        out: TextIO,
        should_stop: Callable[[], bool],
    ) -> None:
        from trysquare import executors

        self.scenario = scenario
        self.options = options
        self.out = out
        self.validations = select_validations(scenario, options.only)
        self.executor = executors.get(options.executor, options.executor_options, jobs=options.jobs)
        self.summary = Summary.over(scenario, self.validations, fail_on=options.fail_on)
        self.stop = StopState(should_stop)

    def run(self, experiments: Sequence[Experiment]) -> Summary:
        scenario, validations, options, summary, out = (
            self.scenario, self.validations, self.options, self.summary, self.out,
        )  # fmt: skip
        stop = self.stop
        for experiment in experiments:
            summary.skipped_runs.extend(experiment.errors)
        all_runs = [run for experiment in experiments for run in experiment.runs]
        with _locks(experiments), _spill.Spill() as spill, _protecting(experiments, out):
            flight = self._settle_what_ended(experiments)
            self._before_planning(all_runs)
            gathering = Gathering(
                experiments=experiments, runs=all_runs, wait=options.wait, rejudge=options.rejudge,
                out=out, should_stop=stop.user_asked,
            )  # fmt: skip
            # What an earlier validate sent in batches and left in flight: collected first, so
            # that planning finds those results recorded.
            collected = self._gather(gathering, "resume_gathered")
            # Before any validator can start: no result file is touched by planning.
            ledger = result_guard.ResultWatch(all_runs, [v.name for v in validations])
            tasks = PlannedTasks(
                scenario, all_runs, validations, options, spill,
                overlapped=_may_overlap_planning(self.executor, validations), stop=stop,
            )  # fmt: skip
            try:
                # Warm servers serve Python validators only where tasks run here (the local
                # pool); a cluster's workers start every validator cold. Stopped as validate ends.
                from trysquare import _warm

                warm = _warm.servers(enabled=getattr(self.executor, "runs_tasks_here", False))
                # One prepared tree per run, shared by run.tests() and hidden tests (prepare once).
                with warm, _prepared_scope.sharing():
                    _Execution(self, tasks, ledger, flight).run()
            except BaseException:
                flight.close(interrupted=True, complete=False)  # it ended trysquare's work
                raise
            else:
                flight.close(interrupted=stop.user_asked(), complete=stop.complete)
            finally:
                tasks.close()
            if not stop.user_asked():
                collected += self._gather(gathering, "send_gathered")
            summary.in_flight.extend(gathering.pending)
            unbuilt = tasks.unbuilt
            summary.skipped_runs.extend(unbuilt)
            # A result not signed here was not reused, run again or not: it is not "unchanged".
            not_reused = _say_unsigned(tasks.plans.unsigned(), out)
            # A run whose tasks could not be built reused nothing: it is not "unchanged".
            # Results collected (before planning, or after the tasks for runs they did not
            # cover) were recorded now: not reused.
            # Only the collected runs' plans are looked at: no set as large as the matrix.
            recorded_now = {(run.dir, name) for run, name in collected}
            collected_dirs = {run_dir for run_dir, _ in recorded_now}
            if collected_dirs:  # else no plan is read: each is made again when read
                recorded_now -= {
                    (p.run.dir, v.name)
                    for p in tasks.plans
                    if p.run.dir in collected_dirs
                    for v in validations
                    if p.plans(v.name)
                }
            summary.reused = max(
                0, len(tasks.plans) * len(validations) - len(tasks) - not_reused - len(recorded_now)
            )
            summary.interrupted = stop.user_asked()
            if stop.first_invalid:
                summary.not_started = len(tasks) - summary.executed
            del tasks, ledger  # what follows reads the files, one run at a time
            for experiment in experiments:
                _record_measures(scenario, experiment, summary, unbuilt, out, stop)
        if stop.disk_full:
            summary.stopped = "no space left on device; free some and run validate again"
        return summary

    def _settle_what_ended(self, experiments: Sequence[Experiment]) -> _inflight.InFlight:
        """Say what the last validate left running when trysquare ended (killed,
        interrupted), and record invalid what ended it too often."""
        flight = _inflight.InFlight(experiments, [v.name for v in self.validations])
        flight.say(self.out)
        for marker in flight.ended_too_often():
            _record_ended(marker, self.validations, self.out, self.stop)
            flight.settle(marker)
        return flight

    def _gather(
        self, gathering: Gathering, moment: Literal["resume_gathered", "send_gathered"]
    ) -> list[tuple[Run, str]]:
        """Each gathering validation's ``moment`` (see :mod:`trysquare.gathering`), its results
        recorded and counted as executed; returned as (run, validator) pairs."""
        recorded = gather(self.validations, gathering, moment, self.summary.kept_after)
        self.summary.executed += len({(run.dir, name) for run, name in recorded})
        return recorded

    def _before_planning(self, runs: Sequence[Run]) -> None:
        """Each mode's lines about these runs (the judge's blinding), then its preparation."""
        for validation in self.validations:
            for line in validation.check_runs(self.scenario, runs):
                if not self.options.quiet or line.startswith("!"):  # -q keeps the warnings only
                    print(shown(line), file=self.out)
        for validation in self.validations:
            _prepare(validation, self.out)


def _record_ended(
    marker: _inflight.Marker, validations: Sequence[Validation], out: TextIO, stop: StopState
) -> None:
    """Record invalid a validation during which trysquare ended too often: not retried."""
    from trysquare.modes import Outcome

    validation = next(v for v in validations if v.name == marker.name)
    again = "--rejudge" if validation.costly else "--force"
    reason = (
        f"trysquare ended {marker.ended} times while validator '{marker.name}' ran on this run "
        f"(killed or interrupted): not retried; validate {again} tries it again"
    )
    document = results.result_document(
        validation,
        Outcome.invalid(reason),
        digest=marker.digest,
        context_digest=marker.context_digest,
        duration=0.0,
    )
    try:
        results.write_result(marker.run, marker.name, document, None)
    except OSError as error:
        stop.note_write_failure(error)
        print(f"trysquare: {shown(marker.run.label)}: {shown(write_problem(error))}", file=out)


def _say_unsigned(plans: Iterable[RunPlan], out: TextIO) -> int:
    """Name each result found not signed here (one line each); return how many were not run
    again (a judge's, without --rejudge)."""
    left = 0
    for run_plan in plans:
        for name, why, again in run_plan.unsigned:
            said = results.unsigned_sentence(run_plan.run, name, why)
            if again:
                said += "; not reused: validated again"
            else:
                left += 1
                said += "; not reused: invalid until --rejudge asks the judge again"
            print(f"trysquare: {shown(said)}", file=out)
    return left


def _prepare(validation: Validation, out: TextIO) -> None:
    """Let a mode get ready while planning runs; one that fails at it is said, not fatal
    (its tasks will say what is wrong)."""
    try:
        validation.prepare()
    except Exception as error:  # noqa: BLE001 - a plugin's mode never stops the matrix here
        print(
            shown(
                f"trysquare: validator '{validation.name}' could not get ready: "
                f"{type(error).__name__}: {error}"
            ),
            file=out,
        )


def _record_measures(
    scenario: Scenario,
    experiment: Experiment,
    summary: Summary,
    unbuilt: Sequence[RunError],
    out: TextIO,
    stop: StopState,
) -> None:
    """Write the experiment's ``measures.json`` and count its runs for the closing line."""
    current = {v.name: v.digest() for v in scenario.validations}
    skipped_dirs = {error.run_dir for error in unbuilt}
    uncounted = {run.id for run in experiment.runs if run.dir in skipped_dirs}

    def rows() -> Iterator[dict[str, Any]]:
        found = results.iter_measures(
            scenario, experiment.runs, current, unusable=experiment.errors
        )
        return _mark_failed_runs(found, experiment.runs, summary.unrecorded, unbuilt)

    tally = summary.fresh()  # counted as the rows are written, added once all are
    try:
        results.write_measures(experiment.root, _counting(rows(), tally, uncounted))
    except OSError as error:
        stop.note_write_failure(error)
        problem = write_problem(error)
        print(
            shown(f"trysquare: {experiment.root / results.MEASURES_FILE} not written: {problem}"),
            file=out,
        )
        summary.stopped = summary.stopped or problem
        tally = summary.fresh()  # the closing line still counts every run
        for _ in _counting(rows(), tally, uncounted):
            pass
    summary.add_counts(tally)


@contextmanager
def _protecting(experiments: Sequence[Experiment], out: TextIO) -> Iterator[None]:
    """No validator or suite started by this validate writes ``/dev/shm`` when an experiment,
    a run or a clone lies there (:func:`trysquare.sandbox.protecting`); said once, when so."""
    from trysquare import sandbox

    def folders() -> Iterator[Path | str]:  # walked once, at the first confined start
        for experiment in experiments:
            yield experiment.root
            for run in experiment.runs:
                yield run.dir_text
                yield run.repo

    with sandbox.protecting(folders()):
        refused = sandbox.shared_memory_refusal() if sandbox.sandbox_enabled() else None
        if refused is not None:
            print(
                shown(
                    f"trysquare: validators and the suite cannot write {sandbox.SHARED_MEMORY} "
                    f"({refused}): POSIX shared memory and semaphores (Python's "
                    "multiprocessing locks) fail there with 'Permission denied'; keep "
                    "experiments, trysquare's cache and TMPDIR elsewhere to have them"
                ),
                file=out,
            )
        yield


def _may_overlap_planning(executor: Any, validations: Sequence[Validation]) -> bool:
    """Whether tasks may start while later runs are still planned.

    Only where nothing a validator runs can write into a clone not yet pictured:
    Landlock enforced, the tasks run in this process (so under its sandbox), and every
    validator confines what it starts. Elsewhere every clone is pictured first.
    """
    from trysquare.sandbox import sandbox_enabled

    return (
        getattr(executor, "runs_tasks_here", False)
        and all(v.confines_what_it_runs for v in validations)
        and sandbox_enabled()
    )


def _counting(
    rows: Iterable[dict[str, Any]], summary: Summary, uncounted: set[str]
) -> Iterator[dict[str, Any]]:
    """Pass measures rows on, adding to the closing line's counts all but those of
    ``uncounted`` runs (skipped, already said) — unusable runs that name their cell
    count there, invalid."""
    for row in rows:
        if row["id"] not in uncounted or row.get("unusable"):
            summary.count([row])
        yield row


def _mark_failed_runs(
    rows: Iterable[dict[str, Any]],
    runs: Sequence[Run],
    unrecorded: Mapping[Path, list[dict[str, str]]],
    unbuilt: Sequence[RunError],
) -> Iterator[dict[str, Any]]:
    """A run whose data could not be read or written is invalid in ``measures.json``, with why.

    Its files may still hold an older, valid result: that is not what this run is now.
    """
    failures: dict[Path, list[dict[str, str]]] = {d: list(e) for d, e in unrecorded.items()}
    for error in unbuilt:
        if error.run_dir is not None:
            failures.setdefault(error.run_dir, []).append(
                {"validator": "trysquare", "error": error.message}
            )
    if not failures:
        yield from rows
        return
    by_id = {run.id: run.dir for run in runs if run.dir in failures}
    for row in rows:
        found = failures.get(by_id.get(row["id"], Path()))
        if found:
            row = {**row, "state": "invalid", "errors": [*row["errors"], *found]}
        yield row


class _Execution:
    """The tasks of one validate run, and what is done as each comes back: the ledger of
    result files, progress, observers, ``-x``; then every validated clone checked.

    Each clone check is a stat walk of one clone. Where no validator can write into
    another run's clone (planning overlapped: Landlock), a run's clone is checked as
    soon as its last task is back, beside the tasks still running
    (:class:`trysquare._clone_checks.EarlyChecks`); elsewhere every check waits for the last task, which may
    have written into any clone.
    """

    def __init__(
        self,
        validate: _ValidateRun,
        tasks: PlannedTasks,
        ledger: result_guard.ResultWatch,
        flight: _inflight.InFlight,
    ) -> None:
        self.executor = validate.executor
        self.options = validate.options
        self.summary = validate.summary
        self.out = validate.out
        self.stop = validate.stop
        self.tasks = tasks
        self.ledger = ledger
        self.flight = flight
        self.progress = _ProgressLines(tasks, validate.options, validate.out)

    def run(self) -> None:
        early = _clone_checks.EarlyChecks(self.tasks)
        try:
            for result in self._results():
                self._take(result)
                if (back := self.tasks.task_back(result.task.run)) is not None:
                    _prepared_scope.release(result.task.run.repo)  # its validations are all back
                    if self.tasks.overlapped:
                        early.submit(*back)
        finally:
            early.close()
            self.progress.close()
        self.tasks.wait_planned()  # an executor stopped early (-x, Ctrl-C) may leave planning running
        self.progress.close_late()
        # After an interruption a worker may still record a task nobody waits for: no check then.
        if not self.stop.should_stop():
            result_guard.refuse_forged(self.ledger.forged(), self.out)
        _clone_checks.check_late(self.tasks, self.ledger, early, self.out)

    def _results(self) -> Iterator[TaskResult]:
        # Each task is marked in flight as the executor takes it; those during which
        # trysquare last ended come last, alone where the executor runs them here. Where tasks
        # are built ahead, the marker is made then, and only written as the task is taken.
        self.tasks.also_built = self._made_ahead
        taken = _inflight.Deferred(
            self.tasks, self.flight, alone=getattr(self.executor, "runs_tasks_here", False),
            stop=self.stop.should_stop,
        )  # fmt: skip
        return iter(self.executor.run(taken, should_stop=self.stop.should_stop))

    def _made_ahead(self, task: PlannedTask) -> None:
        """What is made for ``task`` as it is built ahead, not between two validators: its
        in-flight marker, and (its validator starting here) whether its run or clone lies on
        ``/dev/shm``."""
        self.flight.prepare(task)
        if getattr(self.executor, "runs_tasks_here", False):
            sandbox.look_ahead((task.run.dir_text, task.run.repo))

    def _take(self, result: TaskResult) -> None:
        """Book one result: in flight no more, counted, held to its file, shown, observed."""
        task, summary = result.task, self.summary
        self.flight.done(task.run, task.validation.name)
        summary.executed += 1
        kept = result.outcome.kept_after
        if kept is not None:  # asked again, failed: the result kept, and said
            summary.kept_after.append(f"{task.run.id} {task.validation.name}: {kept}")
        self.ledger.ran(task.run, task.validation.name)
        if result.recorded:
            # A result that could not be written is not one to hold the file to.
            self.ledger.wrote(task.run, task.validation.name, result.document, result.written_sha)
        else:
            summary.unrecorded.setdefault(task.run.dir, []).append(
                {"validator": task.validation.name, "error": str(result.outcome.error)}
            )
            if result.no_space_left:
                self.stop.note_disk_full()
        self.progress.advance(result)
        _notify(plugins.observe_outcome, result)
        if (
            self.options.exitfirst
            and result.outcome.state == "invalid"
            and self.stop.note_first_invalid()
        ):
            # -x: no task starts after this one; validators still running are ended, as on
            # Ctrl-C, and record nothing (their runs are validated next time).
            _process.kill_all()


_COUNTED_ONLY = ("counted", "")  # a finished task whose line is not shown


class _ProgressLines:
    """The progress display, started once the total is known.

    Planning may still run beside the first tasks: until it ends each finished task's line
    waits, as a few strings, and nothing else does. Where planning is held back (a matrix of
    more runs than it may plan ahead, :attr:`PlannedTasks.bounded`), it ends only near the
    last tasks: the display starts at once, with the tasks known so far (``[n/total+]``).
    """

    def __init__(self, tasks: PlannedTasks, options: ValidateOptions, out: TextIO) -> None:
        self.tasks = tasks
        self.options = options
        self.out = out
        self._progress: Progress | None = None
        self._waiting: list[tuple[str, str]] = []
        # A line never shown (a valid task's, under a bar or -q) waits as one shared pair.
        self._every_line = Progress.says_every_line(options.progress, out, quiet=options.quiet)

    def _start(self) -> Progress:
        progress = Progress(
            len(self.tasks), self.options.progress, self.out, quiet=self.options.quiet
        )
        for waited in self._waiting:
            progress.say(*waited)
        self._waiting.clear()
        return progress

    def advance(self, result: TaskResult) -> None:
        if self._progress is None and self.tasks.planned:
            self._progress = self._start()
        elif self._progress is None and self.tasks.bounded:
            self._progress = Progress(
                self.tasks.planned_so_far, self.options.progress, self.out,
                quiet=self.options.quiet, final=False,
            )  # fmt: skip
        elif self._progress is not None and not self._progress.final:
            if self.tasks.planned:
                self._progress.settle(len(self.tasks))
            else:
                self._progress.known(self.tasks.planned_so_far)
        if self._progress is None:
            state, line = Progress.describe(result)
            shown_later = self._every_line or state == "invalid"
            self._waiting.append((state, line) if shown_later else _COUNTED_ONLY)
        else:
            self._progress.advance(result)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.close()

    def close_late(self) -> None:
        """Every task came back before planning ended: their lines, now the total is known."""
        if self._waiting:
            self._start().close()


def _notify(observers: Any, result: TaskResult) -> None:
    # Each plugin's observer is called on its own (plugins.observe_outcome): one that
    # raises is a warning naming it, and the result stays recorded.
    observers(run=result.task.run, validation=result.task.validation, outcome=result.outcome)


@contextmanager
def _locks(experiments: Sequence[Experiment]) -> Iterator[None]:
    if not experiments:
        yield
        return
    first = experiments[0]
    with experiment_lock(first.root, first.runs), _locks(experiments[1:]):
        yield

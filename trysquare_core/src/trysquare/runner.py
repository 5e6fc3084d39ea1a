"""``trysquare validate``: plan every run × validator, execute, check, record.

1. Plan (:mod:`trysquare.planning`): every clone is pictured and every context
   built before the first validator starts; what must run is kept as digests.
   Where nothing a validator runs can write outside its own folders (Landlock
   enforced, the local pool), planning goes on in a thread of its own while the
   first tasks already run.
2. Execute: the executor takes the tasks, each built when it is reached, and
   yields what :func:`trysquare.execute.execute_task` recorded; progress and
   observers are told as each finishes.
3. Check (:mod:`trysquare.guard`): result files written by anything but
   trysquare, and clones written during validation, make their runs invalid
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
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO, TypeVar

from trysquare import _inflight, _prepared, _spill, guard, plugins, results
from trysquare._pool import bounded_map, io_workers
from trysquare._shown import shown
from trysquare.errors import RunError, UsageError
from trysquare.execute import TaskResult, disk_full as _disk_full, execute_task, first_invalid as _first_invalid
from trysquare.execute import write_problem as _write_problem
from trysquare.planning import RunPlan, iter_plans, plan_runs
from trysquare.lock import LOCK_FILE, experiment_lock  # noqa: F401 - the lock's old home
from trysquare.modes import Validation, ValidationTask
from trysquare.options import ValidateOptions
from trysquare.progress import Progress
from trysquare.runs import Experiment, Run
from trysquare.scenario import Scenario
from trysquare.summary import Summary

__all__ = ["Summary", "TaskResult", "ValidateOptions", "ValidationTask", "execute_task", "validate"]

# The runner's task has one type, the one modes are handed; this is its old name here.
# ValidateOptions, Summary and execute_task, now in their own modules, are
# re-exported here, where callers have always found them.
Task = ValidationTask

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
) -> list[ValidationTask]:
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
    from trysquare import executors

    if out is None:
        out = sys.stdout
    validations = select_validations(scenario, options.only)
    executor = executors.get(options.executor, options.executor_options, jobs=options.jobs)
    summary = Summary.over(scenario, validations, fail_on=options.fail_on)
    _disk_full.clear()
    _first_invalid.clear()
    user_stop = should_stop

    def stop_or_disk_full() -> bool:
        return user_stop() or _disk_full.is_set() or _first_invalid.is_set()

    should_stop = stop_or_disk_full

    for experiment in experiments:
        summary.skipped_runs.extend(experiment.errors)
    all_runs = [run for experiment in experiments for run in experiment.runs]
    with _locks(experiments), _spill.Spill() as spill:
        # What the last validate left running when trysquare ended (killed, interrupted).
        flight = _inflight.InFlight(experiments, [v.name for v in validations])
        flight.say(out)
        for marker in flight.ended_too_often():
            _record_ended(marker, validations, out)
            flight.settle(marker)
        for validation in validations:
            for line in validation.check_runs(scenario, all_runs):  # e.g. the judge's blinding line
                if not options.quiet or line.startswith("!"):  # -q keeps the warnings only
                    print(shown(line), file=out)
        for validation in validations:
            _prepare(validation, out)
        # Before any validator can start: no result file is touched by planning.
        ledger = guard.ResultWatch(all_runs, [v.name for v in validations])
        tasks = _PlannedTasks(
            scenario, all_runs, validations, options, spill,
            overlapped=_may_overlap_planning(executor, validations),
        )
        try:
            # One prepared tree per run, shared by run.tests() and hidden tests (prepare once).
            with _prepared.sharing():
                _execute(executor, tasks, options, summary, out, should_stop, ledger, flight)
        except BaseException:
            flight.close(interrupted=True, complete=False)  # it ended trysquare's work
            raise
        else:
            stopped = user_stop()
            flight.close(
                interrupted=stopped,
                complete=not (stopped or _first_invalid.is_set() or _disk_full.is_set()),
            )
        finally:
            tasks.close()
        unbuilt = tasks.unbuilt
        summary.skipped_runs.extend(unbuilt)
        # A result not signed here was not reused, run again or not: it is not "unchanged".
        not_reused = _say_unsigned(tasks.plans, out)
        # A run whose tasks could not be built reused nothing: it is not "unchanged".
        summary.reused = max(0, len(tasks.plans) * len(validations) - len(tasks) - not_reused)
        summary.interrupted = user_stop()
        if _first_invalid.is_set():
            summary.not_started = len(tasks) - summary.executed
        del tasks, ledger  # what follows reads the files, one run at a time
        for experiment in experiments:
            _record_measures(scenario, experiment, summary, unbuilt, out)
    if _disk_full.is_set():
        summary.stopped = "no space left on device; free some and run validate again"
    return summary


def _record_ended(marker: _inflight.Marker, validations: Sequence[Validation], out: TextIO) -> None:
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
        print(f"trysquare: {shown(marker.run.label)}: {shown(_write_problem(error))}", file=out)


def _say_unsigned(plans: Sequence[RunPlan], out: TextIO) -> int:
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
        print(shown(f"trysquare: validator '{validation.name}' could not get ready: "
                    f"{type(error).__name__}: {error}"), file=out)


def _record_measures(
    scenario: Scenario, experiment: Experiment, summary: Summary, unbuilt: Sequence[RunError], out: TextIO
) -> None:
    """Write the experiment's ``measures.json`` and count its runs for the closing line."""
    current = {v.name: v.digest() for v in scenario.validations}
    skipped_dirs = {error.run_dir for error in unbuilt}
    uncounted = {run.id for run in experiment.runs if run.dir in skipped_dirs}

    def rows() -> Iterator[dict[str, Any]]:
        found = results.iter_measures(scenario, experiment.runs, current, unusable=experiment.errors)
        return _mark_failed_runs(found, experiment.runs, summary.unrecorded, unbuilt)

    tally = summary.fresh()  # counted as the rows are written, added once all are
    try:
        results.write_measures(experiment.root, _counting(rows(), tally, uncounted))
    except OSError as error:
        problem = _write_problem(error)
        print(shown(f"trysquare: {experiment.root / results.MEASURES_FILE} not written: {problem}"), file=out)
        summary.stopped = summary.stopped or problem
        tally = summary.fresh()  # the closing line still counts every run
        for _ in _counting(rows(), tally, uncounted):
            pass
    summary.add_counts(tally)


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


class _PlannedTasks(Collection[ValidationTask]):
    """The planned tasks, as executors take them, each built when it is reached.

    Iterated once, in plan order (a run's tasks together). Planned whole before the
    first task is taken; or, ``overlapped``, in a thread of its own while the first
    tasks already run, the next task being built while one runs. ``len()`` is how
    many; it waits for planning to end.
    """

    def __init__(
        self,
        scenario: Scenario,
        runs: Sequence[Run],
        validations: Sequence[Validation],
        options: ValidateOptions,
        spill: _spill.Spill,
        *,
        overlapped: bool,
    ) -> None:
        self.spill = spill
        self.overlapped = overlapped
        self.plans: list[RunPlan] = []
        # Runs whose tasks are being taken: their plan and how many tasks are not back.
        self._out: dict[Path, tuple[RunPlan, int]] = {}
        self.unbuilt: list[RunError] = []
        self._count = 0
        self._ahead = max(options.jobs, 1) if overlapped else 0
        self._changed = threading.Condition()
        self._planned = False
        self._failure: BaseException | None = None
        self._closing = threading.Event()
        self._planner: threading.Thread | None = None
        if overlapped:
            self._planner = threading.Thread(
                target=self._plan, args=(scenario, runs, validations, options),
                name="trysquare-planning", daemon=True,
            )  # fmt: skip
            self._planner.start()
        else:
            self._plan(scenario, runs, validations, options)
            if self._failure is not None:
                raise self._failure

    def _plan(
        self, scenario: Scenario, runs: Sequence[Run], validations: Sequence[Validation], options: ValidateOptions
    ) -> None:
        # Building contexts is trysquare's own I/O (git, files): not bounded by --jobs,
        # which bounds the validators. A replay runs no git: its planning is Python
        # reading files already cached, and threads beyond --jobs only contend with the
        # tasks for the interpreter (a 2,000-run replay planned first, on two cores:
        # 31-35 s with one or two planning threads, 38 s with four).
        builders = max(options.jobs, 1) if options.replay else max(options.jobs, io_workers())
        try:
            with ThreadPoolExecutor(max_workers=builders) as pool:
                for outcome in iter_plans(
                    scenario, runs, validations, options, self.spill, pool, window=2 * builders
                ):
                    with self._changed:
                        if isinstance(outcome, RunError):
                            self.unbuilt.append(outcome)
                        else:
                            self.plans.append(outcome)
                            self._count += outcome.size
                        self._changed.notify_all()
            for error in self.unbuilt:
                print(f"trysquare: skipped: {shown(error.message)}", file=sys.stderr)
        except BaseException as error:  # noqa: BLE001 - raised where the tasks are taken
            self._failure = error
        finally:
            with self._changed:
                self._planned = True
                self._changed.notify_all()

    @property
    def planned(self) -> bool:
        """Whether every run is planned (``len()`` then answers at once)."""
        with self._changed:
            return self._planned

    def wait_planned(self) -> None:
        """Return once every run is planned; raise what stopped planning, if anything did."""
        with self._changed:
            while not self._planned:
                self._changed.wait()
        if self._failure is not None:
            raise self._failure

    def task_back(self, run: Run) -> RunPlan | None:
        """Count one of ``run``'s tasks back; its plan once they all are, else None.

        Only runs whose tasks are out are held here: a few at a time, not 10,000.
        """
        with self._changed:
            entry = self._out.get(run.dir)
            if entry is None:
                return None
            plan, left = entry
            if left > 1:
                self._out[run.dir] = (plan, left - 1)
                return None
            del self._out[run.dir]
            return plan

    def close(self) -> None:
        """No task is built ahead any more; planning, if it still runs, is waited for."""
        self._closing.set()
        if self._planner is not None:
            self._planner.join()

    def __len__(self) -> int:
        self.wait_planned()
        return self._count

    def _plans_as_decided(self) -> Iterator[RunPlan]:
        index = 0
        while True:
            with self._changed:
                while index == len(self.plans) and not self._planned:
                    self._changed.wait()
                if self._failure is not None:
                    raise self._failure
                if index == len(self.plans):
                    return
                run_plan = self.plans[index]
                if run_plan.size:
                    self._out[run_plan.run.dir] = (run_plan, run_plan.size)
            index += 1
            yield run_plan

    def __iter__(self) -> Iterator[ValidationTask]:
        built = (task for run_plan in self._plans_as_decided() for task in run_plan.tasks(self.spill))
        if not self._ahead:
            return built
        return _built_ahead(built, self._ahead, self._closing)

    def __contains__(self, task: object) -> bool:
        if not isinstance(task, ValidationTask):
            return False
        self.wait_planned()
        return any(run_plan.run == task.run and run_plan.plans(task.validation.name) for run_plan in self.plans)


def _built_ahead(items: Iterator[T], ahead: int, closing: threading.Event) -> Iterator[T]:
    """``items``, each taken from them in a thread of its own up to ``ahead`` before it is
    asked for (building a task reads files: done while a validator runs, not between two)."""
    import queue

    waiting: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=ahead)
    end = object()

    def put(entry: tuple[bool, Any]) -> bool:
        while not closing.is_set():
            try:
                waiting.put(entry, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def fill() -> None:
        try:
            for item in items:
                if not put((True, item)):
                    return
            put((True, end))
        except BaseException as error:  # noqa: BLE001 - raised where the item is asked for
            put((False, error))

    threading.Thread(target=fill, name="trysquare-task-builder", daemon=True).start()

    def taken() -> Iterator[T]:
        while True:
            ok, item = waiting.get()
            if not ok:
                raise item
            if item is end:
                return
            yield item

    return taken()


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
            failures.setdefault(error.run_dir, []).append({"validator": "trysquare", "error": error.message})
    if not failures:
        yield from rows
        return
    by_id = {run.id: run.dir for run in runs if run.dir in failures}
    for row in rows:
        found = failures.get(by_id.get(row["id"], Path()))
        if found:
            row = {**row, "state": "invalid", "errors": [*row["errors"], *found]}
        yield row


def _execute(
    executor: Any,
    tasks: _PlannedTasks,
    options: ValidateOptions,
    summary: Summary,
    out: TextIO,
    should_stop: Callable[[], bool],
    ledger: guard.ResultWatch,
    flight: _inflight.InFlight,
) -> None:
    """Run the tasks, showing progress and telling observers; then re-read each clone
    that was validated, and every result file (only trysquare writes them).

    Each clone check is a stat walk of one clone. Where no validator can write into
    another run's clone (planning overlapped: Landlock), a run's clone is checked as
    soon as its last task is back, beside the tasks still running; elsewhere every
    check waits for the last task, which may have written into any clone.
    """
    progress: Progress | None = None
    waiting: list[tuple[str, str]] = []  # lines of tasks back before the total is known
    observers = plugins.observe_outcome
    # Runs checked early (by their spill record's number: one byte a run) and what was
    # found where something was; no future is kept.
    checked = bytearray()
    found: dict[int, str] = {}
    marking = threading.Lock()

    def check(plan: RunPlan) -> str | None:
        return plan.clone_changes(tasks.spill)

    def check_early(plan: RunPlan) -> None:
        problem = check(plan)
        if problem is not None:
            found[plan.kept] = problem
        with marking:
            if len(checked) <= plan.kept:
                checked.extend(bytes(plan.kept + 1 - len(checked)))
            checked[plan.kept] = 1

    early = ThreadPoolExecutor(max_workers=io_workers(), thread_name_prefix="trysquare-check")
    with ThreadPoolExecutor(max_workers=io_workers()) as pool:
        try:
            # Each task is marked in flight as the executor takes it; those during which
            # trysquare last ended come last, alone where the executor runs them here.
            taken = _inflight.Deferred(
                tasks, flight, alone=getattr(executor, "runs_tasks_here", False), stop=should_stop
            )
            for item in executor.run(taken, should_stop=should_stop):
                result = _as_result(item)
                task = result.task
                flight.done(task.run, task.validation.name)
                summary.executed += 1
                kept = result.outcome.kept_after
                if kept is not None:  # asked again, failed: the result kept, and said
                    summary.kept_after.append(f"{task.run.id} {task.validation.name}: {kept}")
                ledger.ran(task.run, task.validation.name)
                if result.recorded:
                    # A result that could not be written is not one to hold the file to.
                    ledger.wrote(task.run, task.validation.name, result.document)
                else:
                    summary.unrecorded.setdefault(task.run.dir, []).append(
                        {"validator": task.validation.name, "error": str(result.outcome.error)}
                    )
                # The total is known once planning ends (it may still run beside the first
                # tasks): until then each line waits, as a few strings, and nothing else does.
                if progress is None and tasks.planned:
                    progress = Progress(len(tasks), options.progress, out, quiet=options.quiet)
                    for waited in waiting:
                        progress.say(*waited)
                    waiting.clear()
                if progress is None:
                    waiting.append(Progress.describe(result))
                else:
                    progress.advance(result)
                _notify(observers, result)
                if options.exitfirst and result.outcome.state == "invalid" and not _first_invalid.is_set():
                    _stop_at_first_invalid()
                if (plan := tasks.task_back(task.run)) is not None:
                    _prepared.release(task.run.repo)  # its validations are all back
                    if tasks.overlapped:
                        early.submit(check_early, plan)
        finally:
            early.shutdown(wait=True)
            if progress is not None:
                progress.close()
        tasks.wait_planned()  # an executor stopped early (-x, Ctrl-C) may leave planning running
        if waiting:  # every task came back before planning ended
            progress = Progress(len(tasks), options.progress, out, quiet=options.quiet)
            for waited in waiting:
                progress.say(*waited)
            progress.close()
        # After an interruption a worker may still record a task nobody waits for: no check then.
        if not should_stop():
            guard.refuse_forged(ledger.forged(), out)

        # The rest a bounded number at a time (each picture is read back from the spill as
        # its check starts); every problem is said in plan order.
        def late(plan: RunPlan) -> tuple[RunPlan, list[str], str | None]:
            names = ledger.ran_names(plan.run)
            if not names:
                return plan, names, None
            if plan.kept < len(checked) and checked[plan.kept]:
                return plan, names, found.get(plan.kept)
            return plan, names, check(plan)

        for plan, names, problem in bounded_map(pool, late, tasks.plans, window=2 * io_workers()):
            if problem is not None:
                guard.spoil(plan.run, names, problem, out)


def _stop_at_first_invalid() -> None:
    """-x: no task starts after this one; validators still running are ended, as
    on Ctrl-C, and record nothing (their runs are validated next time)."""
    from trysquare import _process

    _first_invalid.set()
    _process.kill_all()


def _as_result(item: TaskResult | tuple[ValidationTask, Mapping[str, Any]]) -> TaskResult:
    """An executor yields records; one written before they existed yields (task, document)."""
    if isinstance(item, TaskResult):
        return item
    task, document = item
    return TaskResult.from_document(task, document)


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

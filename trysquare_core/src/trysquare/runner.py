"""``trysquare validate``: plan every run × validator, execute, record.

The matrix carries on past every failure: a run that cannot be read is reported
and skipped, a validator that fails makes its run invalid, and every other run
and validator goes on.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from trysquare import _atomic, context as contexts, guard, plugins, results
from trysquare._pool import io_workers
from trysquare._shown import shown
from trysquare.errors import RunError, UsageError
from trysquare.execute import TaskResult, disk_full as _disk_full, execute_task, first_invalid as _first_invalid
from trysquare.execute import write_problem as _write_problem
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
    """Build (or, with ``--replay``, reread) every context and keep the tasks that must run."""
    digests = {v.name: v.digest() for v in validations}
    owners = scenario.declared_metrics

    def for_run(run: Run) -> list[ValidationTask] | RunError:
        if _disk_full.is_set():
            return RunError(f"{run.label}: not validated: no space left on device", run_dir=run.dir)
        try:
            return _tasks_for_run(scenario, run, validations, digests, owners, options)
        except RunError as error:
            return RunError(error.message, run_dir=run.dir)
        except OSError as error:
            return RunError(f"{run.label}: {_write_problem(error)}", run_dir=run.dir)
        except Exception as error:  # noqa: BLE001 - one run's data never fails the matrix
            return RunError(
                f"{run.label}: could not be read ({type(error).__name__}: {error})", run_dir=run.dir
            )

    tasks: list[ValidationTask] = []
    for outcome in pool.map(for_run, runs):
        if isinstance(outcome, RunError):
            errors.append(outcome)
        else:
            tasks.extend(outcome)
    return tasks


def _tasks_for_run(
    scenario: Scenario,
    run: Run,
    validations: Sequence[Validation],
    digests: Mapping[str, str],
    owners: Mapping[str, Validation],
    options: ValidateOptions,
) -> list[ValidationTask]:
    _remove_crash_litter(run, validations)
    facts = None if options.replay else contexts.gather_facts(run)
    # Taken whatever the validators: a --replay can damage a clone as much as a first run.
    # Checked against the work recorded at first measurement (and recorded then).
    clone_before = guard.picture_clone(run, facts)
    refused = clone_before is not None and clone_before.problem is not None
    tasks = []
    declarers = {m: v.name for m, v in owners.items()}  # shared by this run's tasks
    for validation in validations:
        archive = results.archive_dir(run, validation.name)
        context_path = archive / "context.json"
        if facts is None:
            context, text = _replayed_context(scenario, run, validation, context_path)
        else:
            context = contexts.build_context(scenario, run, validation, facts)
            text = contexts.dump_context(context)
            _atomic.write_text_if_changed(context_path, text, root=run.dir)
        context_digest = contexts.context_digest(text, context)
        results.refuse_planted_links(run, validation.name)
        previous = results.read_result(run, validation.name)
        if not refused and previous is not None and not _must_run(previous, digests[validation.name], context_digest, validation, options):
            continue
        tasks.append(ValidationTask(
            run=run,
            validation=validation,
            context=context,
            context_path=context_path,
            archive=archive,
            context_digest=context_digest,
            digest=digests[validation.name],
            previous=previous,
            declared_elsewhere=declarers,
            clone_before=clone_before,
            protected_env=frozenset(scenario.protected_env),
            suite_pass_env=scenario.task.pass_env,
            rerun_suite=options.rerun_suite,
        ))
    return tasks


def _replayed_context(
    scenario: Scenario, run: Run, validation: Validation, context_path: Path
) -> tuple[dict[str, Any], str]:
    """``--replay``: the archived context; built (and archived) when this validator has never
    had one — a validator added since (``--replay --only NEW``) — from the clone, if it is there."""
    if context_path.exists() or context_path.is_symlink():
        return contexts.load_archived(context_path)
    from trysquare.runs import RUN_FILE, load_run

    try:
        full = load_run(run.dir / RUN_FILE)  # with its base pinned: --replay loaded it without
    except RunError as error:
        raise RunError(
            f"{context_path}: no archived context to replay, and it cannot be built: {error.message}",
            run_dir=run.dir,
        ) from None
    context = contexts.build_context(scenario, full, validation, contexts.gather_facts(full))
    text = contexts.dump_context(context)
    _atomic.write_text_if_changed(context_path, text, root=run.dir)
    return context, text


def _remove_crash_litter(run: Run, validations: Sequence[Validation]) -> None:
    """Delete the temporary files a killed trysquare left in this run (its lock is held)."""
    folders = [run.dir, run.validation_dir, run.dir / ".trysquare"]
    folders += [results.archive_dir(run, v.name) for v in validations]
    for folder in folders:
        _atomic.remove_stale_temps(folder, root=run.dir)


def _must_run(
    previous: Mapping[str, Any], digest: str, context_digest: str, validation: Validation, options: ValidateOptions
) -> bool:
    if validation.costly:
        # A paid verdict is only asked again when asked for by name.
        if options.rejudge:
            return True
    elif options.force or options.rerun_suite:
        return True
    recorded = previous.get("validator") or {}
    return recorded.get("digest") != digest or previous.get("context_digest") != context_digest


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
    summary = Summary()
    _disk_full.clear()
    _first_invalid.clear()
    user_stop = should_stop

    def stop_or_disk_full() -> bool:
        return user_stop() or _disk_full.is_set() or _first_invalid.is_set()

    should_stop = stop_or_disk_full

    for experiment in experiments:
        summary.skipped_runs.extend(experiment.errors)
    all_runs = [run for experiment in experiments for run in experiment.runs]
    with _locks(experiments):
        for validation in validations:
            for line in validation.check_runs(scenario, all_runs):  # e.g. the judge's blinding line
                if not options.quiet or line.startswith("!"):  # -q keeps the warnings only
                    print(shown(line), file=out)
        tasks, unbuilt = _plan_all(scenario, all_runs, validations, options)
        summary.skipped_runs.extend(unbuilt)
        # A run whose tasks could not be built reused nothing: it is not "unchanged".
        built = len(all_runs) - len({error.run_dir for error in unbuilt})
        summary.reused = max(0, built * len(validations) - len(tasks))
        watched = guard.result_stats(all_runs, [v.name for v in validations])
        _execute(executor, tasks, options, summary, out, should_stop, watched=(all_runs, watched))
        summary.interrupted = user_stop()
        if _first_invalid.is_set():
            summary.not_started = len(tasks) - summary.executed
        skipped_dirs = {error.run_dir for error in unbuilt}
        current = {v.name: v.digest() for v in scenario.validations}
        for experiment in experiments:
            rows = results.build_measures(
                scenario, experiment.runs, current, unusable=experiment.errors
            )
            rows = _mark_failed_runs(rows, experiment.runs, summary.unrecorded, unbuilt)
            try:
                results.write_measures(experiment.root, rows)
            except OSError as error:
                problem = _write_problem(error)
                print(
                    shown(f"trysquare: {experiment.root / results.MEASURES_FILE} not written: {problem}"),
                    file=out,
                )
                summary.stopped = summary.stopped or problem
            counted = {run.id for run in experiment.runs if run.dir not in skipped_dirs}
            # An unusable run that names its cell is counted there, invalid.
            summary.count([row for row in rows if row["id"] in counted or row.get("unusable")])
    if _disk_full.is_set():
        summary.stopped = "no space left on device; free some and run validate again"
    return summary


def _mark_failed_runs(
    rows: list[dict[str, Any]],
    runs: Sequence[Run],
    unrecorded: Mapping[Path, list[dict[str, str]]],
    unbuilt: Sequence[RunError],
) -> list[dict[str, Any]]:
    """A run whose data could not be read or written is invalid in ``measures.json``, with why.

    Its files may still hold an older, valid result: that is not what this run is now.
    """
    failures: dict[Path, list[dict[str, str]]] = {d: list(e) for d, e in unrecorded.items()}
    for error in unbuilt:
        if error.run_dir is not None:
            failures.setdefault(error.run_dir, []).append({"validator": "trysquare", "error": error.message})
    if not failures:
        return rows
    by_id = {run.id: run.dir for run in runs}
    marked = []
    for row in rows:
        found = failures.get(by_id.get(row["id"], Path()))
        if found:
            row = {**row, "state": "invalid", "errors": [*row["errors"], *found]}
        marked.append(row)
    return marked


def _plan_all(
    scenario: Scenario, runs: Sequence[Run], validations: Sequence[Validation], options: ValidateOptions
) -> tuple[list[ValidationTask], list[RunError]]:
    """Every task that must run; runs whose context could not be built are reported by path."""
    unbuilt: list[RunError] = []
    # Building contexts is trysquare's own I/O (git, files): not bounded by --jobs,
    # which bounds the validators.
    builders = max(options.jobs, io_workers())
    with ThreadPoolExecutor(max_workers=builders) as pool:
        tasks = plan(scenario, runs, validations, options, unbuilt, pool)
    for error in unbuilt:
        print(f"trysquare: skipped: {shown(error.message)}", file=sys.stderr)
    return tasks, unbuilt


def _execute(
    executor: Any,
    tasks: Sequence[ValidationTask],
    options: ValidateOptions,
    summary: Summary,
    out: TextIO,
    should_stop: Callable[[], bool],
    watched: tuple[Sequence[Run], Mapping[Path, Any]] | None = None,
) -> None:
    """Run the tasks, showing progress and telling observers; then re-read each clone
    (and, with ``watched``, every result file: only trysquare writes them)."""
    progress = Progress(len(tasks), options.progress, out, quiet=options.quiet)
    observers = plugins.observe_outcome
    executed: dict[Path, list[ValidationTask]] = {}
    written: dict[Path, Any] = {}
    try:
        for item in executor.run(tasks, should_stop=should_stop):
            result = _as_result(item)
            task = result.task
            summary.executed += 1
            if not result.recorded:
                summary.unrecorded.setdefault(task.run.dir, []).append(
                    {"validator": task.validation.name, "error": str(result.outcome.error)}
                )
            executed.setdefault(task.run.dir, []).append(task)
            if result.recorded:
                # A result that could not be written is not one to hold the file to.
                written[results.result_path(task.run, task.validation.name)] = result.document
            progress.advance(result)
            _notify(observers, result)
            if options.exitfirst and result.outcome.state == "invalid" and not _first_invalid.is_set():
                _stop_at_first_invalid()
    finally:
        progress.close()
    # After an interruption a worker may still record a task nobody waits for: no check then.
    if watched is not None and not should_stop():
        guard.refuse_forged(watched[0], guard.forged_results(watched[1], written), out)
    # Each check is a stat walk of one clone: overlap them.
    with ThreadPoolExecutor(max_workers=io_workers()) as pool:
        problems = list(pool.map(guard.clone_problem, executed.values()))
    for run_tasks, problem in zip(executed.values(), problems):
        if problem is not None:
            guard.spoil(run_tasks, problem, out)


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

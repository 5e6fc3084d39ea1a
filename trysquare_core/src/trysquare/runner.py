"""``trysquare validate``: plan every run × validator, execute, record.

The matrix carries on past every failure: a run that cannot be read is reported
and skipped, a validator that fails makes its run invalid, and every other run
and validator goes on.
"""

from __future__ import annotations

import errno
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import attrs

from trysquare import _atomic, _suitecache, context as contexts, guard, plugins, results
from trysquare._pool import io_workers
from trysquare._shown import shown
from trysquare.errors import RunError, UsageError
from trysquare.lock import LOCK_FILE, experiment_lock  # noqa: F401 - the lock's old home
from trysquare.modes import Job, Outcome, Validation
from trysquare.runs import Experiment, Run
from trysquare.scenario import Scenario

__all__ = ["Summary", "Task", "ValidateOptions", "execute_task", "validate"]


@attrs.frozen
class ValidateOptions:
    only: tuple[str, ...] = ()
    jobs: int = attrs.field(factory=lambda: os.cpu_count() or 1)
    replay: bool = False
    force: bool = False
    rejudge: bool = False
    progress: bool | None = None  # None: a bar on a terminal, plain lines otherwise
    executor: str = "local"
    executor_options: Mapping[str, str] = attrs.field(factory=dict)
    rerun_suite: bool = False  # run.tests() runs the suite even when its outcome is recorded
    quiet: bool = False  # -q: no per-task line but an invalid result's, no bar
    exitfirst: bool = False  # -x: stop at the first invalid result


@attrs.frozen
class Task:
    """One run × one validator, its context built and archived: the unit an executor runs."""

    run: Run
    validation: Validation
    context: Mapping[str, Any]
    context_path: Path
    context_digest: str
    digest: str
    previous: Mapping[str, Any] | None
    # Which validator declares each metric (its own included): a stray metric another one
    # declares is dropped, the declarer wins. One mapping shared by every task: a copy per
    # task without its own metrics made 10,000 validators cost 10,000² entries.
    declared_elsewhere: Mapping[str, str]
    # The measured clone before validation, to catch a validator writing into it;
    # None when the clone is not there to look at (a --replay once it is gone).
    clone_before: guard.ClonePicture | None = None
    # The scenario's guarded variables (a judge's keys): never in a validator's environment.
    protected_env: frozenset[str] = frozenset()
    suite_pass_env: tuple[str, ...] = ()  # [task] pass_env
    rerun_suite: bool = False  # --rerun-suite: no recorded suite outcome is reused


@attrs.define
class Summary:
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

    @property
    def exit_code(self) -> int:
        return 1 if self.states["invalid"] or self.skipped_runs or self.stopped else 0

    def closing_line(self) -> str:
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


def execute_task(task: Task, *, interrupted: Callable[[], bool] = lambda: False) -> dict[str, Any] | None:
    """Evaluate one task and record its result atomically; return the recorded document.

    Any executor runs exactly this, so a result written on a cluster worker is
    the same file the local pool writes. When ``interrupted()`` turns true while
    the validator ran, it was killed by the interruption, not failed: nothing is
    recorded and ``None`` is returned.
    """
    started = time.monotonic()
    refusal = None if task.clone_before is None else task.clone_before.problem
    suite = None if refusal is not None else _suitecache.offer(task)
    job = Job(
        run=task.run,
        validation=task.validation,
        context=task.context,
        context_path=task.context_path,
        archive=results.archive_dir(task.run, task.validation.name),
        previous=task.previous,
        protected_env=task.protected_env,
        suite_pass_env=task.suite_pass_env,
        environment={} if suite is None else dict(suite.environment),
    )
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
        else:
            outcome = task.validation.evaluate(job)
            outcome = _suitecache.collect(task, suite, outcome)
    except Exception as error:  # noqa: BLE001 - a broken mode spoils one result, not the matrix
        outcome = Outcome.invalid(
            f"validator '{task.validation.name}' crashed inside trysquare: {type(error).__name__}: {error}"
        )
    if interrupted():
        return None
    outcome = _drop_foreign_metrics(outcome, task)
    document = results.result_document(
        task.validation,
        outcome,
        digest=task.digest,
        # A refused clone's result is never reused: the next validate decides afresh.
        context_digest=None if refused else task.context_digest,
        duration=time.monotonic() - started,
    )
    try:
        results.write_result(task.run, task.validation.name, document, outcome.stderr)
    except OSError as error:
        # This run's folder refused the write (a symlink, a full disk): its task
        # is invalid, said by path; the matrix goes on (or stops cleanly on ENOSPC).
        document = {
            **document,
            "metrics": {},
            "reasons": {},
            "state": "invalid",
            "error": f"{task.run.label}: the result could not be recorded: {_write_problem(error)}",
            "unrecorded": True,  # not in any file: the runner marks the run invalid in measures
        }
    return document


# Set when a write met a full disk: no further task starts, and validate exits 1.
_disk_full = threading.Event()
# Set by -x at the first invalid result: no further task starts.
_first_invalid = threading.Event()


def _write_problem(error: OSError) -> str:
    """One phrase for a failed read or write of one run's data; notes a full disk."""
    if error.errno == errno.ENOSPC:
        _disk_full.set()
        where = f" ({error.filename})" if error.filename else ""
        return f"no space left on device{where}"
    if isinstance(error, _atomic.UnsafePath):
        return str(error)
    text = error.strerror or type(error).__name__
    return f"{text} ({error.filename})" if error.filename else text


def _drop_foreign_metrics(outcome: Outcome, task: Task) -> Outcome:
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
) -> list[Task]:
    """Build (or, with ``--replay``, reread) every context and keep the tasks that must run."""
    digests = {v.name: v.digest() for v in validations}
    owners = scenario.declared_metrics

    def for_run(run: Run) -> list[Task] | RunError:
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

    tasks: list[Task] = []
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
) -> list[Task]:
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
        tasks.append(Task(
            run=run,
            validation=validation,
            context=context,
            context_path=context_path,
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


class Progress:
    """A bar on a terminal, plain lines otherwise."""

    def __init__(self, total: int, enabled: bool | None, stream: TextIO, *, quiet: bool = False) -> None:
        self.total = total
        self.quiet = quiet
        self.done = 0
        self.stream = stream
        self.bar = None
        if enabled is None:
            enabled = stream.isatty() and not quiet
        self.plain = not enabled
        if enabled and total:
            from rich.progress import Progress as RichProgress

            self.bar = RichProgress(transient=True)
            self.bar.start()
            self.task_id = self.bar.add_task("validating", total=total)

    def advance(self, task: Task, document: Mapping[str, Any]) -> None:
        self.done += 1
        state = document.get("state")
        detail = f": {document.get('error')}" if state == "invalid" else ""
        # Run ids, cells and errors come from run folders: escaped, one item one line.
        line = shown(
            f"[{self.done}/{self.total}] {task.run.id} ({task.run.cell} #{task.run.repetition}) "
            f"{task.validation.name}: {state}{detail}"
        )
        if state == "invalid":  # its error says what; its stderr's last lines say why
            from trysquare.failures import invalid_lines

            line = "\n".join([line, *invalid_lines(task.run.dir, task.validation.name, document)])
        if self.bar is not None:
            self.bar.advance(self.task_id)
            if state == "invalid":  # a failure stays on screen above the bar
                self.bar.console.print(line, markup=False, highlight=False)
        elif self.plain and (state == "invalid" or not self.quiet):
            print(line, file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def validate(
    scenario: Scenario,
    experiments: Sequence[Experiment],
    options: ValidateOptions,
    *,
    out: TextIO | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> Summary:
    """Validate every run of ``experiments``; write results and ``measures.json``.

    Lines go to ``out``, by default ``sys.stdout`` as it is at the call (not at import).
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
) -> tuple[list[Task], list[RunError]]:
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
    tasks: Sequence[Task],
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
    executed: dict[Path, list[Task]] = {}
    written: dict[Path, Any] = {}
    try:
        for task, document in executor.run(tasks, should_stop=should_stop):
            summary.executed += 1
            if document.get("unrecorded"):
                summary.unrecorded.setdefault(task.run.dir, []).append(
                    {"validator": task.validation.name, "error": str(document["error"])}
                )
            executed.setdefault(task.run.dir, []).append(task)
            if not document.get("unrecorded"):
                # A result that could not be written is not one to hold the file to.
                written[results.result_path(task.run, task.validation.name)] = document
            progress.advance(task, document)
            _notify(observers, task, document)
            if options.exitfirst and document.get("state") == "invalid" and not _first_invalid.is_set():
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


def _notify(observers: Any, task: Task, document: Mapping[str, Any]) -> None:
    outcome = Outcome(
        metrics=document["metrics"],
        reasons=document["reasons"],
        state=document["state"],
        error=document["error"],
        provenance=document.get("provenance"),
    )
    observers(task.run, task.validation, outcome)


@contextmanager
def _locks(experiments: Sequence[Experiment]) -> Iterator[None]:
    if not experiments:
        yield
        return
    first = experiments[0]
    with experiment_lock(first.root, first.runs), _locks(experiments[1:]):
        yield

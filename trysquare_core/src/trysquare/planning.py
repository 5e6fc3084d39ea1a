"""Planning a ``validate``: which run × validator must run, decided before any validator starts.

Every clone is pictured and every context built (or, with ``--replay``, reread)
before the first validator starts: where Landlock does not prevent it, a validator
of one run could otherwise write into another run's clone before its picture was
taken. Where it does (and every validator confines what it starts), the runner
takes each run's plan as it is decided (:func:`iter_plans`) and starts its tasks
while later runs are still planned. What planning keeps of each run is small — digests and where its clone's
picture lies, not its contexts, previous results or picture — so that 10,000 runs
cost little more memory than 1,000. A run's :class:`~trysquare.modes.ValidationTask`
is built whole only when an executor asks for it (:meth:`RunPlan.tasks`), from the
files planning archived, each checked against the digest planning took: a context
or result file changed meanwhile (by a validator of another run) makes that task
invalid, never a measurement of something else.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from trysquare import _atomic, _spill, _start_first, clone_guard, results
from trysquare import context as contexts
from trysquare._digests import sha256
from trysquare._pool import bounded_map
from trysquare._record import record
from trysquare._stop import StopState
from trysquare.clone_picture import ClonePicture
from trysquare.errors import RunError
from trysquare.execute import PlannedTask, write_problem
from trysquare.jail import JailPolicy
from trysquare.modes import Validation, ValidationTask
from trysquare.options import ValidateOptions
from trysquare.runs import Run
from trysquare.scenario import Scenario

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

__all__ = ["RunPlan", "iter_plans", "plan_runs"]


@record
class _Shared:
    """What every task of one validate shares (one object, not a copy per task)."""

    validations: tuple[Validation, ...]
    declarers: Mapping[str, str]
    digests: Mapping[str, str]
    protected_env: frozenset[str]
    suite_pass_env: tuple[str, ...]
    rerun_suite: bool
    jail: JailPolicy


# One validator that must run on a run, and the digests its task is rebuilt against:
# (index in _Shared.validations, the context digest recorded with the result, sha256 of
# the archived context.json's text as planned, sha256 of the result file it replaces or None,
# whether planning found that file a result signed here).
_Planned = tuple[int, str, bytes, "bytes | None", bool]


class _NotHeld:
    """No picture held in memory: :meth:`RunPlan.clone_changes` reads it from the spill."""


NOT_HELD = _NotHeld()


@record
class RunPlan:
    """What planning decided for one run: how many tasks, and where the rest is kept.

    The clone's picture and each task's digests are in a :class:`trysquare._spill.Spill`
    record (``kept``), not here: this is all a run costs in memory while validate runs.
    """

    run: Run
    which: int  # bit i set: shared.validations[i] must run on it
    kept: int  # its record's number in the spill
    shared: _Shared
    # Results found not signed here, never reused: (validator name, why, run again now).
    # A judge's is bought again only under --rejudge; until then the run is invalid.
    unsigned: tuple[tuple[str, str, bool], ...] = ()

    @property
    def size(self) -> int:
        """How many validators must run on the run."""
        return self.which.bit_count()

    def plans(self, name: str) -> bool:
        """Whether validator ``name`` must run on the run."""
        return any(
            v.name == name and self.which >> i & 1 for i, v in enumerate(self.shared.validations)
        )

    def clone_changes(
        self, spill: _spill.Spill, *, before: ClonePicture | None | _NotHeld = NOT_HELD
    ) -> str | None:
        """What validation changed in the run's clone since planning pictured it; None when
        nothing did (or there is no clone, or the run was refused before validation).

        ``before``: the picture :meth:`load` gave when the run's tasks were built, held in
        memory since (no validator can write there); else it is read back from the spill.
        """
        if isinstance(before, _NotHeld):
            try:
                record, _ = spill.load(self.kept)
            except _spill.Tampered as tampered:
                return f"trysquare's record of the clone before validation: {tampered}"
            before = None if record is None else clone_guard.ClonePicture.from_record(record)
        return None if before is None else clone_guard.clone_problem(self.run, before)

    def load(self, spill: _spill.Spill) -> tuple[ClonePicture | None, Sequence[_Planned]]:
        """The clone's picture before validation and each task's digests, from the spill.

        A record changed meanwhile gives a picture whose problem says so, and every task
        planned (each is then recorded invalid with why: execute_task refuses it).
        """
        try:
            record, planned = spill.load(self.kept)
        except _spill.Tampered as tampered:
            problem = f"trysquare's record of this run's plan: {tampered}"
            record = clone_guard.ClonePicture({}, (0, 0), problem).as_record()
            planned = [
                (i, "", b"", None, False)
                for i in range(len(self.shared.validations))
                if self.which >> i & 1
            ]
        picture = None if record is None else clone_guard.ClonePicture.from_record(record)
        return picture, planned

    def tasks(
        self,
        spill: _spill.Spill,
        loaded: tuple[ClonePicture | None, Sequence[_Planned]] | None = None,
    ) -> Iterator[PlannedTask]:
        """The run's tasks, each built whole now, from the files planning archived
        (``loaded``: what :meth:`load` gave, else it is read now)."""
        picture, planned = self.load(spill) if loaded is None else loaded
        for item in planned:
            yield _task(self, item, picture)


def plan_runs(
    scenario: Scenario,
    runs: Sequence[Run],
    validations: Sequence[Validation],
    options: ValidateOptions,
    spill: _spill.Spill,
    pool: ThreadPoolExecutor,
    *,
    window: int = 16,
) -> tuple[list[RunPlan], list[RunError]]:
    """Picture every clone, build (or reread) every context, and keep what must run.

    Returns one plan per run that could be read, in the order of ``runs`` (a run
    with nothing to run has an empty plan), and the runs that could not be, each
    said by path.
    """
    plans: list[RunPlan] = []
    errors: list[RunError] = []
    for outcome in iter_plans(scenario, runs, validations, options, spill, pool, window=window):
        if isinstance(outcome, RunError):
            errors.append(outcome)
        else:
            plans.append(outcome)
    return plans, errors


def iter_plans(
    scenario: Scenario,
    runs: Iterable[Run],
    validations: Sequence[Validation],
    options: ValidateOptions,
    spill: _spill.Spill,
    pool: ThreadPoolExecutor | None,
    *,
    window: int = 16,
    stop: StopState | None = None,
) -> Iterator[RunPlan | RunError]:
    """:func:`plan_runs` one run at a time, in the order of ``runs``: each run's plan, or
    the error that says (by path) why it could not be read, as soon as it is decided.
    Without ``pool``, each run is planned in the calling thread as it is asked for.

    ``stop`` is the validate's stop state: a full disk met here stops it, and once the disk
    is full no further run is planned."""
    shared = _shared(scenario, validations, options)
    stopping = StopState() if stop is None else stop

    def for_run(run: Run) -> RunPlan | RunError:
        if stopping.disk_full:
            return RunError(f"{run.label}: not validated: no space left on device", run_dir=run.dir)
        try:
            return _plan_run(scenario, run, shared, options, spill)
        except RunError as error:
            return RunError(error.message, run_dir=run.dir)
        except OSError as error:
            stopping.note_write_failure(error)
            return RunError(f"{run.label}: {write_problem(error)}", run_dir=run.dir)
        except Exception as error:  # noqa: BLE001 - one run's data never fails the matrix
            return RunError(
                f"{run.label}: could not be read ({type(error).__name__}: {error})", run_dir=run.dir
            )

    if pool is None:
        return map(for_run, runs)
    return bounded_map(pool, for_run, runs, window=window)


def _shared(
    scenario: Scenario, validations: Sequence[Validation], options: ValidateOptions
) -> _Shared:
    return _Shared(
        validations=tuple(validations),
        declarers={m: v.name for m, v in scenario.declared_metrics.items()},
        digests={v.name: v.digest() for v in validations},
        protected_env=frozenset(scenario.protected_env),
        suite_pass_env=tuple(scenario.task.pass_env),
        rerun_suite=options.rerun_suite,
        jail=attrs.evolve(scenario.task.jail, required=True)
        if options.require_isolation
        else scenario.task.jail,
    )


def _plan_run(
    scenario: Scenario, run: Run, shared: _Shared, options: ValidateOptions, spill: _spill.Spill
) -> RunPlan:
    _start_first.after_starts()
    _remove_crash_litter(run, shared.validations)
    facts = None if options.replay else contexts.gather_facts(run)
    # Taken whatever the validators: a --replay can damage a clone as much as a first run.
    # Checked against the work recorded at first measurement (and recorded then).
    picture = clone_guard.picture_clone(run, facts)
    refused = picture is not None and picture.problem is not None
    planned: list[_Planned] = []
    unsigned: list[tuple[str, str, bool]] = []
    for index, validation in enumerate(shared.validations):
        context_path = results.archive_dir(run, validation.name) / "context.json"
        if facts is None:
            context, text = _replayed_context(scenario, run, validation, context_path)
        else:
            context = contexts.build_context(scenario, run, validation, facts)
            text = contexts.dump_context(context)
            _atomic.write_text_if_changed(context_path, text, root=run.dir)
        context_digest = contexts.context_digest(text, context, root=run.dir, validation=validation)
        results.refuse_planted_links(run, validation.name)
        previous, previous_sha, why = _read_previous(run, validation.name)
        if why is not None:
            # Not trysquare's (here): never reused. A paid verdict is not bought again unasked.
            again = refused or not validation.costly or options.rejudge
            unsigned.append((validation.name, why, again))
            if not again:
                continue
        digest = shared.digests[validation.name]
        recorded = None if previous is None else previous.get("context_digest")
        if previous is not None and contexts.is_current(recorded, context_digest, text, context):
            previous = {**previous, "context_digest": context_digest}  # recorded where it lies
        if (
            not refused
            and previous is not None
            and not _must_run(previous, digest, context_digest, validation, options)
        ):
            continue
        planned.append((index, context_digest, _sha(text), previous_sha, previous is not None))
    record = None if picture is None else picture.as_record()
    which = sum(1 << item[0] for item in planned)
    return RunPlan(run, which, spill.keep((record, planned)), shared, unsigned=tuple(unsigned))


def _task(plan: RunPlan, item: _Planned, picture: clone_guard.ClonePicture | None) -> PlannedTask:
    index, context_digest, context_sha, previous_sha, trusted = item
    run, validation = plan.run, plan.shared.validations[index]
    archive = results.archive_dir(run, validation.name)
    context_path = archive / "context.json"
    context, context_problem = _context_as_planned(context_path, context_sha, run.dir)
    refused = context_problem is not None or (picture is not None and picture.problem is not None)
    # A mode that never reads the result it replaces (and a run not refused, whose refusal
    # would keep that result's metrics) is handed none: the file is held to what planning
    # read when it is replaced (results.write_result_digested), one read serving both.
    check_replaced = not validation.reads_previous and not refused
    previous, previous_problem = (
        (None, None)
        if check_replaced
        else _previous_as_planned(run, validation.name, previous_sha, trusted)
    )
    problem = context_problem or previous_problem
    if problem is not None and (picture is None or picture.problem is None):
        # Not run: recorded invalid with why, as a refused clone is (execute_task).
        picture = clone_guard.ClonePicture({}, (0, 0) if picture is None else picture.root, problem)
    digest = plan.shared.digests[validation.name]
    recorded = (previous or {}).get("validator")
    task = ValidationTask(
        run=run,
        validation=validation,
        context=context,
        context_path=context_path,
        archive=archive,
        previous=previous,
        previous_current=previous is not None
        and previous.get("context_digest") == context_digest
        and isinstance(recorded, Mapping)
        and recorded.get("digest") == digest,
        protected_env=plan.shared.protected_env,
        suite_pass_env=plan.shared.suite_pass_env,
        jail=plan.shared.jail,
    )
    return PlannedTask(
        task=task,
        digest=digest,
        context_digest=context_digest,
        declared_elsewhere=plan.shared.declarers,
        clone_before=picture,
        rerun_suite=plan.shared.rerun_suite,
        replaces_as_planned=previous_sha,
        check_replaced=check_replaced,
    )


def _context_as_planned(path: Path, sha: bytes, root: Path) -> tuple[Mapping[str, Any], str | None]:
    try:
        context, text = contexts.load_archived(path, root=root)
    except RunError as error:
        return {}, f"{error.message}: it was there when validate began"
    if _sha(text) != sha:
        return {}, f"{path} was changed during validate by something other than trysquare"
    return context, None


def _previous_as_planned(
    run: Run, name: str, sha: bytes | None, trusted: bool
) -> tuple[dict[str, Any] | None, str | None]:
    """The result the task replaces, as planning read it: the same bytes, or a problem.

    Its signature is not checked again: planning checked it on these very bytes (``trusted``)
    and the digest says they are the same.
    """
    path = results.result_path(run, name)
    raw: bytes | None
    try:
        raw = _atomic.read_bytes(path, root=run.dir)
        now: bytes | None = _sha_bytes(raw)
    except FileNotFoundError:
        raw, now = None, None
    except OSError:
        raw, now = None, b"unreadable"  # as _read_previous says it
    if now != sha:
        return None, f"{path} was changed during validate by something other than trysquare"
    if raw is None or not trusted:
        return None, None
    previous = results.parse_result(raw, path)
    previous.pop(results.SIGNATURE)
    return previous, None


def _read_previous(run: Run, name: str) -> tuple[dict[str, Any] | None, bytes | None, str | None]:
    """The recorded result (None if absent, damaged or not signed here), the digest of the
    file's bytes, and why a well-formed result is not trysquare's (None when it is)."""
    path = results.result_path(run, name)
    try:
        raw = _atomic.read_bytes(path, root=run.dir)
    except FileNotFoundError:
        return None, None, None
    except OSError:
        # A planted link or an unreadable file: no previous result, as read_result says.
        return None, b"unreadable", None
    try:
        previous = results.parse_result(raw, path)
    except results.UnreadableResult:
        return None, _sha_bytes(raw), None  # damaged: read as none, and run again
    why = results.signature_problem(run, name, previous)
    if why is not None:
        return None, _sha_bytes(raw), why
    previous.pop(results.SIGNATURE)
    return previous, _sha_bytes(raw), None


def _sha(text: str) -> bytes:
    return _sha_bytes(text.encode("utf-8", errors="surrogatepass"))


def _sha_bytes(data: bytes) -> bytes:
    return sha256(data).digest()


def _replayed_context(
    scenario: Scenario, run: Run, validation: Validation, context_path: Path
) -> tuple[dict[str, Any], str]:
    """``--replay``: the archived context; built (and archived) when this validator has never
    had one — a validator added since (``--replay --only NEW``) — from the clone, if it is there."""
    if context_path.exists() or context_path.is_symlink():
        archived, text = contexts.load_archived(context_path, root=run.dir)
        context = contexts.with_scenario(archived, scenario, validation)
        if context != archived:  # the scenario changed since: the script reads the file
            text = contexts.dump_context(context)
            _atomic.write_text_if_changed(context_path, text, root=run.dir)
        return context, text
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
    previous: Mapping[str, Any],
    digest: str,
    context_digest: str,
    validation: Validation,
    options: ValidateOptions,
) -> bool:
    if validation.costly:
        # A paid verdict is only asked again when asked for by name.
        if options.rejudge:
            return True
    elif options.force or options.rerun_suite:
        return True
    recorded = previous.get("validator") or {}
    return recorded.get("digest") != digest or previous.get("context_digest") != context_digest

"""What a validator mode is, what it is handed and what it returns.

A *mode* (``script``, ``judge``, ``form``, or one from a plugin) turns one
``[[validation]]`` table into a :class:`Validation`. The runner builds the
context once per run, archives it, and hands each validation a :class:`ValidationTask`;
the validation returns an :class:`Outcome`, which the runner records.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, TextIO, TypeVar

import attrs

from trysquare import _convert
from trysquare._canonical import digest as canonical_digest
from trysquare._record import record
from trysquare.errors import ScenarioError

if TYPE_CHECKING:
    from trysquare.jail import JailPolicy
    from trysquare.run_records import Experiment, Run

__all__ = [
    "Gathered",
    "Gathering",
    "LoadedScenario",
    "Mode",
    "Outcome",
    "State",
    "TableSource",
    "Validation",
    "ValidationTask",
    "check_timeout",
]

State = Literal["valid", "invalid", "pending"]
T = TypeVar("T")

# Names a metric may not take: the judge's and the form's pieces.
PIECES: tuple[str, ...] = ("prompt", "response", "diff")


@record
class TableSource:
    """Where a ``[[validation]]`` table came from, for loading and for messages."""

    file: Path
    """The scenario file."""
    path: str
    """The table's place in it, for messages: ``[[validation]][2]``."""
    config: Path | None = None
    """The ``trysquare.toml`` named by ``--config``; ``None``: the nearest above the scenario."""

    @property
    def folder(self) -> Path:
        """The scenario's folder: what the table's paths are relative to."""
        return self.file.parent

    def resolve(self, relative: str) -> Path:
        """A path the table names, relative to the scenario file."""
        return (self.folder / relative).resolve()

    def refuse(self, key: str, message: str) -> ScenarioError:
        """The refusal of ``key`` (raise it): ``scenario.toml: [[validation]][2].KEY: MESSAGE``,
        exit 2, as every load-time refusal reads."""
        return ScenarioError(f"{self.file.name}: {self.path}.{key}: {message}")

    def structure(self, table: Mapping[str, Any], cls: type[T]) -> T:
        """Structure the table strictly into a mode's own attrs class."""
        return _convert.structure(table, cls, file=self.file, path=self.path)


def check_timeout(source: TableSource, seconds: float, key: str = "timeout") -> None:
    """Refuse a timeout that is not a finite positive number of seconds.

    TOML has ``nan`` and ``inf``: ``nan`` compares false with everything, so a
    plain ``<= 0`` lets it through, and either would never time out.
    """
    if not math.isfinite(seconds) or seconds <= 0:
        raise source.refuse(key, f"must be a finite positive number of seconds, not {seconds!r}")


def check_pieces(source: TableSource, pieces: Sequence[str], key: str = "pieces") -> None:
    """Refuse a list of pieces (what a judge is sent, what a form shows) that names none,
    one trysquare does not know, or one twice."""
    choices = ", ".join(PIECES)
    if not pieces:
        raise source.refuse(key, f"names no piece (choose from {choices})")
    for piece in pieces:
        if piece not in PIECES:
            raise source.refuse(key, f"unknown piece '{piece}' (choose from {choices})")
    if len(set(pieces)) != len(pieces):
        raise source.refuse(key, "names a piece twice")


class LoadedScenario(Protocol):
    """What :meth:`Validation.check` is shown of the scenario being loaded (a
    :class:`trysquare.scenario.Scenario`), by shape: the loader sits above the modes."""

    @property
    def path(self) -> Path:
        """The scenario file."""
        ...

    @property
    def name(self) -> str: ...

    @property
    def folder(self) -> Path: ...

    @property
    def validations(self) -> tuple[Validation, ...]: ...

    @property
    def protected_env(self) -> Mapping[str, str]:
        """Variables no validator or suite may see: ``{name: where it is configured}``."""
        ...


@record(kw_only=True)
class Validation:
    """One loaded ``[[validation]]`` table. Modes subclass it with their own keys.

    The common keys are ``mode``, ``metrics`` and an optional ``name`` (default:
    the mode). Subclasses override :meth:`evaluate` and, where they need to,
    the other methods.
    """

    mode: str
    """The mode's name, as the table's ``mode = "..."`` says."""
    metrics: tuple[str, ...]
    """The metrics this validator declares: the names its outcome's ``metrics`` must use."""
    name: str = ""
    """The validator's name (results go to ``validation/<name>.json``); default: the mode."""

    withheld_context_keys: ClassVar[frozenset[str]] = frozenset()
    """Keys of the context a mode withholds from its validator (the judge: ``cell``, ``given``)."""
    costly: ClassVar[bool] = False
    """A costly validator (a paid judge) is re-run by ``--rejudge`` only, not by ``--force``."""
    reads_previous: ClassVar[bool] = True
    """Its :meth:`evaluate` reads ``task.previous`` or ``task.previous_current``. A mode that
    never does (the script mode) is handed neither: the result it replaces is not read
    before its validator starts, and is held to what planning saw when it is replaced."""
    starts_a_child: ClassVar[bool] = False
    """Its :meth:`evaluate` starts its validator as a child process at once (the script mode):
    the local pool hands the previous result over once that child has started, not before."""
    confines_what_it_runs: ClassVar[bool] = False
    # It runs the measured agent's code itself (its tree, its tests: hidden tests), not only
    # through ``run.tests()``: validate says before it starts where that code will run.
    runs_the_agents_code: ClassVar[bool] = False
    """Every process this validator starts is confined (``writable=`` of
    :func:`trysquare.api.run_process` / ``run_steps``), or it starts none. Where
    Landlock enforces that, validate starts its tasks while later runs are still planned
    (nothing it runs can write into a clone not yet pictured); a mode that leaves this
    ``False`` keeps every clone pictured before its first task."""
    wants_session_facts: ClassVar[bool] = False
    """Its context carries ``session_facts``: the path of the session's reading as JSON
    (tool calls, first writes, skills), written by
    :func:`trysquare.context.write_session_facts` before the validator starts — for
    validators that cannot import ``trysquare.assay``."""

    def check(self, scenario: LoadedScenario, source: TableSource) -> None:
        """Refuse, at load time, what this table cannot do within ``scenario``."""

    def check_runs(self, scenario: LoadedScenario, runs: Sequence[Run]) -> list[str]:
        """Refuse what these runs make impossible; return lines to print (blinding)."""
        return []

    def prepare(self) -> None:
        """Get ready to evaluate: called once by ``validate`` before planning starts (never
        by ``check``). A mode may start slow work here that its first task would otherwise
        wait for (the judge imports its HTTP client in the background); must not raise."""

    def digest(self) -> str:
        """What identifies this validator: a result with another digest is stale."""
        return _digest_of(attrs.asdict(self, recurse=True, value_serializer=_jsonable))

    def context_identity(self, context: Mapping[str, Any]) -> str | None:
        """What this validator is shown of ``context``, as a digest; ``None`` (the default):
        the whole context, wherever the experiment folder lives.

        A recorded result whose identity and :meth:`digest` are unchanged is reused. A
        mode shown only part of the context says which (the judge: its pieces as it
        sends them), so a change it is never shown costs no new result.
        """
        return None

    def evaluate(self, task: ValidationTask) -> Outcome:
        """Score one run. Never raises for a bad run: returns an invalid outcome."""
        raise NotImplementedError

    def resume_gathered(self, gathering: Gathering) -> Iterable[Gathered]:
        """Before any task: collect work an earlier ``validate`` gathered and left in flight
        (a judge's batches), yielding each result to record (see :mod:`trysquare.gathering`).
        A validation that scores each run in its own task yields nothing (the default)."""
        return ()

    def send_gathered(self, gathering: Gathering) -> Iterable[Gathered]:
        """After every task: send what the tasks gathered (their outcomes were pending) and,
        unless ``gathering.wait`` is false, wait for it, yielding each result to record."""
        return ()


class Mode(Protocol):
    """A validator mode, registered through ``trysquare_register_modes``."""

    name: str

    def load(self, table: Mapping[str, Any], source: TableSource) -> Validation:
        """Turn one ``[[validation]]`` table into a validation, or raise ScenarioError."""
        ...


def _archive_of(task: ValidationTask) -> Path:
    # Where results.archive_dir puts it; spelt here so a task needs nothing but its run.
    return task.run.validation_dir / task.validation.name


def _default_jail() -> JailPolicy:
    # The jail module (and subprocess with it) is loaded when a task is first made, not by
    # every command that names a mode (a report makes none).
    from trysquare.jail import JailPolicy

    return JailPolicy()


@record
class ValidationTask:
    """One run × one validation, its context already built and archived.

    What a mode's :meth:`Validation.evaluate` is handed. The runner plans it inside a
    record of its own (:class:`trysquare.task_records.PlannedTask`, with what it checks and
    records around the validator), which an executor carries to
    :func:`trysquare.execute.execute_task`.

    ``run`` is the :class:`trysquare.run_records.Run` (its folder, clone, ids);
    ``context`` the mapping the validator is handed (the context keys, see
    ``docs/api.md``), also archived at ``context_path`` (what a script is
    given). ``archive`` (``validation/<name>/``) is where a mode keeps evidence:
    write there through the no-follow writers of :mod:`trysquare.api`,
    never by following a symlink. ``previous`` is the recorded result this one
    replaces (a form keeps its human answers from it). A child process running
    untrusted code gets ``protected_env`` removed whatever ``suite_pass_env`` passes.
    """

    run: Run
    """The run: its folder, clone, cell, repetition and ids."""
    validation: Validation
    """The validation being evaluated (the table, loaded)."""
    context: Mapping[str, Any]
    """The mapping the validator is handed: the context keys (``docs/api.md``)."""
    context_path: Path
    """``validation/<name>/context.json``: the archived context, what a script is handed."""
    archive: Path = attrs.field(default=attrs.Factory(_archive_of, takes_self=True))
    """``validation/<name>/``: where a mode keeps evidence (a transcript), written through
    the no-follow writers of :mod:`trysquare.api`."""
    previous: Mapping[str, Any] | None = None
    """The recorded result this one would replace, if any (a form keeps its answers)."""
    protected_env: frozenset[str] = frozenset()
    """Variables a child of this task must never get (a judge provider's key), whatever
    ``pass_env`` says."""
    suite_pass_env: tuple[str, ...] = ()
    """Secret-looking variables the scenario's suite may see (``[task] pass_env``), from the
    scenario itself: never from an archived context, which lies inside the run folder."""
    environment: Mapping[str, str] = attrs.field(factory=dict)
    """trysquare's own variables for a validator process it starts (where ``run.tests()``
    finds a recorded suite outcome and reports a fresh one): set by the runner."""
    previous_current: bool = False
    """Whether ``previous`` was recorded by this same validator over this same context (so
    it runs again only because ``--force``/``--rejudge`` asked): a judge keeps such a verdict
    when asking again fails."""
    jail: JailPolicy = attrs.field(factory=_default_jail)
    """The jail the agent's code runs in for this task (the scenario's ``[task]`` keys): hand
    it to ``run_steps(..., jail=task.jail)`` when running the agent's tree."""


@record
class Outcome:
    """What one validation found for one run.

    ``metrics`` maps a name to its value; ``None`` is *unjudged* (the reason
    says why). An invalid outcome's metrics are never read as negatives.
    ``state`` is ``valid``, ``invalid`` (``error`` says why: a crash, a
    timeout, unreadable output) or ``pending`` (a metric a person has yet to
    fill). ``stderr`` is kept as ``validation/<name>.stderr``; ``notes`` are
    recorded beside the result; ``provenance`` says who filled a form metric.

    >>> Outcome(metrics={"in_scope": True, "tests": None}, reasons={"tests": "no test ran"}).state
    'valid'
    >>> Outcome.invalid("exited with code 1").metrics
    {}
    """

    metrics: Mapping[str, Any] = attrs.field(factory=dict)
    """Metric name to value (``True``/``False``, a number, a string); ``None`` is unjudged."""
    reasons: Mapping[str, str] = attrs.field(factory=dict)
    """Metric name to why it has its value (required reading for an unjudged one)."""
    state: State = "valid"
    """``valid``, ``invalid`` (``error`` says why; its metrics are never read as negatives)
    or ``pending`` (a metric a person has yet to fill)."""
    error: str | None = None
    """Why the outcome is invalid: one sentence (a crash, a timeout, unreadable output)."""
    stderr: bytes | None = None
    """The validator's stderr, kept as ``validation/<name>.stderr``."""
    provenance: Mapping[str, Mapping[str, str]] | None = None
    """Who filled a form metric and when: ``{metric: {"by": ..., "at": ...}}``."""
    notes: tuple[str, ...] = ()
    """Lines recorded beside the result."""
    usage: Mapping[str, Any] | None = None
    """What a paid validator spent (a judge: requests, tokens, the price in force), recorded
    as ``usage`` in the result whatever its state: invalid and unjudged results cost too."""
    kept_after: str | None = None
    """Set when asking again failed (a provider outage under ``--rejudge``) and the previous
    result, still current, was kept: the failure, said; the command exits 1."""

    @classmethod
    def invalid(cls, error: str, *, stderr: bytes | None = None, **kwargs: Any) -> Outcome:
        """A result that could not be produced, with its cause (never a negative)."""
        return cls(state="invalid", error=error, stderr=stderr, **kwargs)


# The two records of a gathering validation live here, beside Validation which names them,
# rather than in trysquare.gathering: that module records what they carry (results, plugins),
# and modes importing it would join it to the core's import circle.


@record(kw_only=True)
class Gathering:
    """What a gathering validation is handed at each of its two moments
    (:meth:`Validation.resume_gathered`, :meth:`Validation.send_gathered`)."""

    experiments: Sequence[Experiment]
    """The experiments validated: their ``.trysquare/`` folders hold a mode's own state."""
    runs: Sequence[Run]
    """The runs this command covers (after ``--cell`` / ``--run``): nothing else is recorded."""
    wait: bool
    """``False`` under ``--no-wait``: send, and return without waiting for the answers."""
    rejudge: bool
    """``--rejudge``: verdicts are asked for again."""
    out: TextIO
    """Where progress lines go."""
    should_stop: Callable[[], bool]
    """True once the command is interrupted: stop waiting, leave the work recorded."""
    pending: list[str] = attrs.field(factory=list)
    """Sentences for the closing line about work left in flight (a mode appends them)."""


@record(kw_only=True)
class Gathered:
    """One result a gathering validation produced, for the runner to record."""

    run: Run
    """The run it belongs to."""
    outcome: Outcome
    """The result itself, as :meth:`Validation.evaluate` would return it."""
    digest: str
    """The validator's digest the work was asked under (as recorded in the pending result)."""
    context_digest: str
    """The context digest the work was asked under (as recorded in the pending result)."""
    duration: float = 0.0
    """Seconds the work took, as the result records it."""


def _jsonable(_: Any, __: Any, value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    return value


def _digest_of(value: Any) -> str:
    return canonical_digest(value)  # the one canonical-JSON digest

"""The one import of a trysquare plugin or mode: everything it may stand on, and nothing else.

Like pluggy's ``__init__``, this module is a list: the hook markers, the records and
protocols a plugin implements or is handed (a mode, a validation, a task and its result,
an executor, a session format, a report format, a run, an experiment, the errors), and the
helpers plugins use (running a process, scratch folders, a child's environment, no-follow
readers and writers, digests, TOML tables, experiments, the lock, the report's rows).
Every name is documented in ``docs/api.md``. Anything else in ``trysquare`` (bar
``trysquare.assay`` for validators and ``trysquare.testing`` for tests) is internal and may
move in any release.

Importing this module is cheap: the records and helpers that live elsewhere in the core are
imported when they are first asked for, so a plugin registering itself (every command,
``--version`` included) loads none of them. It is over 600 lines because the whole floor is
here to be read in one place: the names kept elsewhere and the documented helpers, each a
thin wrapper over the module that does the work.

Example::

    from trysquare.api import Mode, Outcome, TableSource, Validation, ValidationTask, hookimpl
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from trysquare._canonical import digest
from trysquare._capped_output import DEFAULT_CAP, TAIL_CHARS, TAIL_LINES
from trysquare._record import record
from trysquare.hookspecs import hookimpl, hookspec, listed_as

if TYPE_CHECKING:
    from trysquare._digests import Hasher
    from trysquare._prepared import SharedTree
    from trysquare._process import ProcessResult, Steps
    from trysquare.commands import Commands, add_selection_options
    from trysquare.context import (
        RunFacts,
        build_context,
        context_digest,
        dump_context,
        gather_facts,
        write_session_facts,
    )
    from trysquare.errors import (
        ConfigError,
        NoRunsError,
        RepoError,
        RunError,
        ScenarioError,
        TrysquareError,
        UsageError,
    )
    from trysquare.execute import execute_task, record_invalid
    from trysquare.executor_protocol import Executor, RunningExecutor
    from trysquare.executors import execute_stoppable
    from trysquare.git.etalon import materialise_etalon
    from trysquare.git.patch import write_diff_patch
    from trysquare.git.suite_copy import copy_tree
    from trysquare.jail import JailPolicy
    from trysquare.lock import experiment_lock, folder_lock, sweep_temps
    from trysquare.modes import (
        PIECES,
        Gathered,
        Gathering,
        LoadedScenario,
        Mode,
        Outcome,
        State,
        TableSource,
        Validation,
        ValidationTask,
        check_pieces,
        check_timeout,
    )
    from trysquare.outputs import keep_output, parse_validator_output
    from trysquare.plugins import observe_outcome, registry
    from trysquare.report import report_source
    from trysquare.report.render import (
        cost_text,
        procedure_lines,
        runs_needed_method,
        runs_needed_text,
        tokens_text,
    )
    from trysquare.report.tables import Layout, build_report
    from trysquare.report.usage import usage_totals
    from trysquare.report_source import ReportFormat, ReportSource
    from trysquare.results import (
        archive_dir,
        build_measures,
        read_result,
        result_document,
        signature_problem,
        usage_of,
        write_measures,
        write_result,
    )
    from trysquare.run_records import Experiment, Run
    from trysquare.runs import discover, load_experiments
    from trysquare.scenario import Scenario, ShellWordError, load_scenario, split_command
    from trysquare.selection import Selection
    from trysquare.sessions import final_response, open_session
    from trysquare.sessions.reading import SessionFormat, SessionReading, ToolCall
    from trysquare.task_records import PlannedTask, TaskResult

# Where each name that is not defined here lives: imported when first asked for.
_ELSEWHERE: dict[str, str] = {
    **dict.fromkeys(["Commands", "add_selection_options"], "trysquare.commands"),
    **dict.fromkeys(
        [
            "RunFacts",
            "build_context",
            "context_digest",
            "dump_context",
            "gather_facts",
            "write_session_facts",
        ],
        "trysquare.context",
    ),
    **dict.fromkeys(
        [
            "ConfigError",
            "NoRunsError",
            "RepoError",
            "RunError",
            "ScenarioError",
            "TrysquareError",
            "UsageError",
        ],
        "trysquare.errors",
    ),
    **dict.fromkeys(["execute_task", "record_invalid"], "trysquare.execute"),
    **dict.fromkeys(["Executor", "RunningExecutor"], "trysquare.executor_protocol"),
    **dict.fromkeys(["execute_stoppable"], "trysquare.executors"),
    **dict.fromkeys(["JailPolicy"], "trysquare.jail"),
    **dict.fromkeys(["experiment_lock", "folder_lock", "sweep_temps"], "trysquare.lock"),
    **dict.fromkeys(
        [
            "PIECES",
            "Gathered",
            "Gathering",
            "LoadedScenario",
            "Mode",
            "Outcome",
            "State",
            "TableSource",
            "Validation",
            "ValidationTask",
            "check_pieces",
            "check_timeout",
        ],
        "trysquare.modes",
    ),
    **dict.fromkeys(["keep_output", "parse_validator_output"], "trysquare.outputs"),
    **dict.fromkeys(["ProcessResult", "Steps"], "trysquare._process"),
    **dict.fromkeys(["observe_outcome", "registry"], "trysquare.plugins"),
    **dict.fromkeys(["materialise_etalon"], "trysquare.git.etalon"),
    **dict.fromkeys(["write_diff_patch"], "trysquare.git.patch"),
    **dict.fromkeys(["copy_tree"], "trysquare.git.suite_copy"),
    **dict.fromkeys(["report_source"], "trysquare.report"),
    **dict.fromkeys(["ReportFormat", "ReportSource"], "trysquare.report_source"),
    **dict.fromkeys(
        ["cost_text", "procedure_lines", "runs_needed_method", "runs_needed_text", "tokens_text"],
        "trysquare.report.render",
    ),
    **dict.fromkeys(["Layout", "build_report"], "trysquare.report.tables"),
    **dict.fromkeys(["usage_totals"], "trysquare.report.usage"),
    **dict.fromkeys(
        [
            "archive_dir",
            "build_measures",
            "read_result",
            "result_document",
            "signature_problem",
            "usage_of",
            "write_measures",
            "write_result",
        ],
        "trysquare.results",
    ),
    **dict.fromkeys(["Experiment", "Run"], "trysquare.run_records"),
    **dict.fromkeys(["discover", "load_experiments"], "trysquare.runs"),
    **dict.fromkeys(
        ["Scenario", "ShellWordError", "load_scenario", "split_command"], "trysquare.scenario"
    ),
    **dict.fromkeys(["Selection"], "trysquare.selection"),
    **dict.fromkeys(["final_response", "open_session"], "trysquare.sessions"),
    **dict.fromkeys(["SessionFormat", "SessionReading", "ToolCall"], "trysquare.sessions.reading"),
    **dict.fromkeys(["PlannedTask", "TaskResult"], "trysquare.task_records"),
}

__all__ = [
    "DEFAULT_OUTPUT_CAP",
    "PIECES",
    "Commands",
    "ConfigError",
    "Executor",
    "Experiment",
    "Gathered",
    "Gathering",
    "JailPolicy",
    "Layout",
    "LoadedScenario",
    "Mode",
    "NoRunsError",
    "Outcome",
    "PlannedTask",
    "ProcessResult",
    "RepoError",
    "ReportFormat",
    "ReportSource",
    "Run",
    "RunError",
    "RunFacts",
    "RunningExecutor",
    "Scenario",
    "ScenarioError",
    "Selection",
    "SessionFormat",
    "SessionReading",
    "ShellWordError",
    "State",
    "Steps",
    "TableSource",
    "TaskResult",
    "ToolCall",
    "TrysquareError",
    "UsageError",
    "Validation",
    "ValidationTask",
    "add_selection_options",
    "append_line",
    "archive_dir",
    "build_context",
    "build_measures",
    "build_report",
    "cache_root",
    "check_pieces",
    "check_timeout",
    "child_environment",
    "context_digest",
    "copy_tree",
    "cost_text",
    "create_once",
    "digest",
    "discover",
    "dump_context",
    "execute_stoppable",
    "execute_task",
    "experiment_lock",
    "final_response",
    "folder_lock",
    "folders_of",
    "gather_facts",
    "hookimpl",
    "hookspec",
    "interrupted",
    "keep_output",
    "listed_as",
    "load_experiments",
    "load_scenario",
    "machine_mac",
    "machine_mac_holds",
    "materialise_etalon",
    "observe_outcome",
    "open_session",
    "parse_validator_output",
    "prepared_tree",
    "procedure_lines",
    "read_bytes",
    "read_result",
    "read_toml",
    "record",
    "record_invalid",
    "refuse_hard_link",
    "register_structure_hook",
    "registry",
    "report_source",
    "result_document",
    "run_process",
    "run_steps",
    "run_warm_if_served",
    "runs_needed_method",
    "runs_needed_text",
    "scratch_folder",
    "sha256",
    "shown",
    "signature_problem",
    "split_command",
    "structure",
    "sweep_temps",
    "tail",
    "throwaway_folder",
    "tokens_text",
    "usage_of",
    "usage_totals",
    "write_diff_patch",
    "write_json",
    "write_measures",
    "write_result",
    "write_session_facts",
    "write_text",
    "write_with_history",
]

T = TypeVar("T")

# How much of a child's stdout and stderr is kept (each); the rest is dropped and
# the result says so (``truncated``).
DEFAULT_OUTPUT_CAP = DEFAULT_CAP


# -- running a step -------------------------------------------------------------


def run_process(
    argv: Sequence[str],
    *,
    cwd: str | Path,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cap: int = DEFAULT_OUTPUT_CAP,
    writable: Sequence[str | Path] | None = None,
) -> ProcessResult:
    """Run one child in its own process group, output capped, killed whole at ``timeout``.

    The result has ``returncode`` (``None`` when killed for its timeout),
    ``stdout``/``stderr`` (bytes), ``timed_out``, ``truncated`` and ``duration``.
    With ``writable``, the child (and whatever it starts) may write only there
    where the kernel allows it (Linux Landlock), and nothing it started outlives
    the call. Raises ``OSError`` when the program cannot be started.
    """
    from trysquare._process import run_process as run
    from trysquare.sandbox import Sandbox

    sandbox = None if writable is None else Sandbox([str(path) for path in writable])
    return run(argv, cwd=cwd, timeout=timeout, env=env, cap=cap, sandbox=sandbox)


def run_steps(
    steps: Sequence[tuple[str, Sequence[str]]],
    *,
    cwd: str | Path,
    timeout: float,
    env: Mapping[str, str] | None = None,
    writable: Sequence[str | Path] | None = None,
    consequence: str = "so the command did not run",
    tail_lines: int = TAIL_LINES,
    jail: JailPolicy | None = None,
    guarded: Sequence[str | Path] = (),
    shown_as: str | None = None,
) -> Steps:
    """Run ``(label, argv)`` steps in turn (``prepare`` then the command) within one ``timeout``.

    Every step but the last must exit 0; the last one (the command) may fail:
    ``.last`` is its result, for the caller to read. ``.problem`` says why the
    command's outcome cannot be read — a step that could not start or timed out,
    an earlier step that failed (then it says ``consequence`` and ends with the
    tail of that step's output) — or is ``None``. ``.transcript`` holds every
    step's ``$ argv`` line, output and ``[exit N]`` as bytes.

    Steps that run the measured agent's code (its tree, its tests) pass ``jail=task.jail``
    with ``writable`` naming their scratch folder: they then run in the jail
    (:mod:`trysquare.jail`), see nothing but that folder, the system and the interpreter,
    never a ``guarded`` folder (pass the run's folder), and die with the call. Where the
    jail cannot start they fall back to ``writable``'s confinement, or, when the policy
    requires the jail, do not run (``.problem`` says so). ``shown_as`` (with ``jail``): the
    jail shows ``writable``'s one folder at this path instead of its own — a copy of a
    prepared tree, shown where ``prepare`` built it (:func:`prepared_tree`).

    Example::

        done = run_steps([("prepare", ["npm", "ci"]), ("the command", argv)],
                         cwd=copy, timeout=600, writable=[scratch], jail=task.jail,
                         guarded=[task.run.dir], consequence="so no test ran")
        if done.problem is not None:
            return Outcome(metrics=dict.fromkeys(metrics),
                           reasons=dict.fromkeys(metrics, done.problem))
    """
    from trysquare._process import run_steps as run
    from trysquare.sandbox import Sandbox

    if jail is not None and writable is None:
        raise ValueError("run_steps(jail=...) needs writable=[the scratch folder]")
    sandbox = None if writable is None else Sandbox([str(path) for path in writable])
    return run(
        steps,
        cwd=cwd,
        timeout=timeout,
        env=env,
        sandbox=sandbox,
        consequence=consequence,
        tail_lines=tail_lines,
        jail=jail,
        guarded=guarded,
        shown_as=shown_as,
    )


def folders_of(tree: Path) -> frozenset[str]:
    """Every folder below ``tree`` (POSIX paths relative to it, links not followed): taken
    before ``prepare`` runs in a copy, it tells the agent's folders from what ``prepare``
    built (as :func:`prepared_tree`'s ``folders_before``)."""
    from trysquare._prepared import folders_of as folders

    return folders(tree)


def prepared_tree(
    task: ValidationTask, env: Mapping[str, str], *, timeout: float, tail_lines: int = TAIL_LINES
) -> SharedTree | None:
    """The run's tree after the scenario's ``prepare``, shared with ``run.tests()`` and every
    other validator of this run within one ``validate`` (``prepare`` runs once per run), or
    ``None`` where it is not shared (no ``prepare``, no jail here, outside ``validate``):
    then run ``prepare`` on your own copy.

    ``env`` is what ``prepare`` runs with: :func:`child_environment` of the task's
    ``suite_pass_env`` and ``protected_env``, nothing of your own (the suite's ``prepare``
    must be the same one). The answer has ``problem_for(consequence)`` (why ``prepare``
    did not succeed, said with your consequence, or ``None``), ``transcript``, ``origin``
    (the path to pass as ``run_steps(shown_as=...)``: the tree's own paths stay true),
    ``folders_before`` (the tree's folders before ``prepare``: the rest is what it built)
    and ``copy_to(dest)``, which copies the prepared tree to ``dest`` (raises ``OSError``;
    then prepare your own). ``prepare`` never sees what you place afterwards. Example::

        shared = prepared_tree(task, env, timeout=600)
        with throwaway_folder() as scratch:
            copy = shared.copy_to(Path(scratch) / "repo")
            ...  # place your files
            done = run_steps([("the command", argv)], cwd=copy, timeout=600,
                             writable=[scratch], jail=task.jail, shown_as=shared.origin,
                             env={**env, "TMPDIR": shared.origin})
    """
    from trysquare import _prepared
    from trysquare._words import split_command as split

    steps = [("prepare", split(step)) for step in task.context.get("prepare") or ()]
    repo = Path(task.context["repo"])
    return _prepared.shared_prepare(
        repo,
        steps,
        env=env,
        timeout=timeout,
        jail=task.jail,
        guarded=[repo, task.run.dir],
        tail_lines=tail_lines,
    )


def scratch_folder(prefix: str = "trysquare-") -> AbstractContextManager[str]:
    """A context manager giving an empty folder only this user can enter (a validator's
    working directory and ``TMPDIR``); what the task left there is removed after it.

    Folders are reused once emptied where nothing a child started outlives it (creating
    and removing one goes through the filesystem's journal). Example::

        with scratch_folder("trysquare-mymode-") as scratch:
            done = run_process(argv, cwd=scratch, timeout=60, writable=[scratch])
    """
    from trysquare._scratch import scratch_folder as folder

    return folder(prefix)


def throwaway_folder(prefix: str = "trysquare-") -> AbstractContextManager[str]:
    """A context manager giving a fresh private temporary folder for the agent's code (its
    scratch copy), removed after it however deep a tree that code left there (``shutil.rmtree``
    and ``TemporaryDirectory`` fail on one deeper than the recursion limit or ``PATH_MAX``,
    which would turn the agent's failing suite into a crash); never raises on removal."""
    from trysquare._scratch import throwaway_folder as folder

    return folder(prefix)


def tail(text: str, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> str:
    """The last ``lines`` lines of ``text``, at most ``chars`` characters (a reason's evidence).

    >>> tail("a\\nb\\nc\\n", 2)
    'b\\nc'
    """
    from trysquare._process import tail as last

    return last(text, lines, chars)


def child_environment(
    *, passed: Iterable[str] = (), protected: Iterable[str] = ()
) -> dict[str, str]:
    """This process's environment minus what a validator or the suite must not see.

    ``protected`` names (every judge key, :attr:`ValidationTask.protected_env`)
    are always removed; secret-looking names (``*KEY*``, ``*TOKEN*``...) unless
    listed in ``passed`` (a ``pass_env``).
    """
    from trysquare._env import child_environment as environment

    return environment(passed=passed, protected=protected)


def shown(text: object) -> str:
    r"""``text`` for one terminal line: every control character (ESC, CR, newline, bidi
    overrides) shown as a visible escape, so agent- or human-written text cannot forge or
    hide a line. Text without them comes back unchanged.

    >>> print(shown("run\x1b[2J\nall valid"))
    run\x1b[2J\x0aall valid
    """
    from trysquare._shown import shown as escaped

    return escaped(text)


# -- writing inside a run folder ------------------------------------------------
# Everything in a run folder may be the measured agent's: these never read or
# write through a symlink below ``root`` (an ``OSError`` names the path), and
# every write is a temporary file renamed into place.


def write_text(path: Path, text: str, *, root: Path | None = None) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically, following no link below ``root``."""
    from trysquare import _atomic

    _atomic.write_text(path, text, root=root)


def write_json(path: Path, value: Any, *, root: Path | None = None) -> None:
    """Write ``value`` as stable JSON (sorted keys) to ``path`` atomically."""
    from trysquare import _atomic

    _atomic.write_json(path, value, root=root)


def read_bytes(path: Path, *, root: Path | None = None) -> bytes:
    """Read ``path`` following no link below ``root`` (``FileNotFoundError`` when absent)."""
    from trysquare import _atomic

    return _atomic.read_bytes(path, root=root)


def machine_mac(value: Any) -> str:
    """The MAC of ``value`` (canonical JSON) with this machine's signing key, the key results are
    signed with: what a plugin records beside state it must know it wrote itself (the judge's
    batch store), where the measured agent could have planted a forgery."""
    from trysquare import _signing

    return _signing.mac(value)


def machine_mac_holds(tag: object, value: Any) -> bool:
    """Whether ``tag`` is :func:`machine_mac` of ``value`` (compared in constant time)."""
    from trysquare import _signing

    return _signing.verifies(tag, value)


def interrupted() -> bool:
    """Whether the user asked ``validate`` to stop (SIGINT/SIGTERM). A plugin that waits on
    something other than :func:`run_process` (a request on the network) looks at it at least
    every few tenths of a second and gives up; what it returns then is not recorded."""
    from trysquare import _process

    return _process.interrupted()


def refuse_hard_link(info: os.stat_result, path: Path) -> None:
    """Raise an ``OSError`` naming ``path`` when the regular file ``info`` describes (an
    ``fstat`` of what you opened) has more than one link: a hard link the agent left to a
    file elsewhere. :func:`read_bytes` and :func:`append_line` check it themselves; a plugin
    that opens a run's file its own way calls this on the open file."""
    from trysquare import _atomic

    _atomic.refuse_hard_link(info, path)


def append_line(path: Path, value: Any, *, root: Path | None = None) -> None:
    """Append ``value`` as one JSON line to ``path``, following no link below ``root``."""
    from trysquare import _atomic

    _atomic.append_line(path, value, root=root)


def create_once(path: Path, data: bytes, *, root: Path, mode: int = 0o600) -> bytes:
    """Create ``path`` holding ``data`` unless it exists; return what it holds either way."""
    from trysquare import _atomic

    return _atomic.create_once(path, data, root=root, mode=mode)


def write_with_history(
    path: Path, document: Any, history: Path, *, root: Path, compact: bool = False
) -> None:
    """Write ``document`` as JSON to ``path``, first appending the one it replaces to ``history``.

    The replaced document becomes one line of ``history`` (JSON lines); an
    unreadable one is kept as ``{"unreadable": text}``. A kill between the two
    writes leaves the old document in place and as the history's last line; the
    next write sees that line and does not append it twice. ``compact`` writes the
    document on one line (json's fast encoder) rather than indented.
    """
    from trysquare.results import write_with_history as write

    write(path, document, history, root=root, compact=compact)


# -- tables ---------------------------------------------------------------------


def structure(
    data: Mapping[str, Any], cls: type[T], *, file: Path, path: str = "", label: str | None = None
) -> T:
    """Structure a TOML table into the attrs class ``cls`` with trysquare's strict converter.

    An unknown key, a missing one or a wrong type (``1`` is not a string) raises
    one :class:`trysquare.errors.ScenarioError` (exit 2) whose lines name the file
    (``label``, default its name) and the key path (``path``), with a close-match
    suggestion: ``scenario.toml: [[validation]][1].metircs: unknown key (did you
    mean 'metrics'?)``.
    """
    from trysquare import _convert

    return _convert.structure(data, cls, file=file, path=path, label=label)


def register_structure_hook(kind: Any, hook: Callable[[Any, Any], Any]) -> None:
    """Add a strict check for a type of your own (``hook(value, kind)`` raises ``ValueError``)."""
    from trysquare import _convert

    _convert.register_structure_hook(kind, hook)


def read_toml(
    path: Path, *, error: type[TrysquareError], label: str | None = None
) -> dict[str, Any]:
    """Parse a TOML file, or raise ``error`` with one sentence naming it (``label``)."""
    from trysquare import _convert

    return _convert.read_toml(path, error=error, label=label)


def cache_root() -> Path:
    """trysquare's cache folder on this machine (``$XDG_CACHE_HOME/trysquare``): where a plugin
    keeps what it may reuse across runs and validates (hidden tests' control outcomes)."""
    from trysquare._cache_folder import cache_root as root

    return root()


def sha256(data: bytes | bytearray | memoryview = b"") -> Hasher:
    """A SHA-256 hasher with ``hashlib.sha256``'s methods and digests, which loads OpenSSL
    only once the process has much to hash (``hashlib`` loads it at import, a cost a one-run
    ``validate`` notices): for a mode's :meth:`Validation.digest`, say."""
    from trysquare._digests import sha256 as hasher

    return hasher(data)


def run_warm_if_served(
    script: Path,
    argv: Sequence[str],
    *,
    cwd: str,
    timeout: float,
    base_env: Mapping[str, str],
    env: Mapping[str, str],
    writable: Sequence[str | Path],
) -> ProcessResult | None:
    """Run a script validator in a child of its warm server, or return ``None`` for the cold
    path: no server here (another executor, ``try``), or ``script`` is not an ``assay``
    validator that may be served warm (see ``docs/warm.md``). ``base_env`` is the environment
    the validator starts with (the server's), ``env`` the run's own."""
    from trysquare import _warm

    if not _warm.serving():
        return None
    entry = _warm.entry_point(script, base_env.get("PATH"))
    if entry is None:
        return None
    return _warm.run_warm(
        script, entry, argv, cwd=cwd, timeout=timeout, base_env=base_env, env=env, writable=writable
    )


def __getattr__(name: str) -> Any:
    # The records and helpers that live elsewhere are loaded when asked for: importing this
    # module (every plugin does as it registers) stays free of the engine.
    home = _ELSEWHERE.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return list(__all__)

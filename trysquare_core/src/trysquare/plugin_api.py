"""What a trysquare plugin may import: the stable surface its modes, commands and executors stand on.

Everything here is public and documented in ``docs/plugins.md`` ("The plugin
API"). A plugin imports from this module (and the public modules it names:
:mod:`trysquare.modes`, :mod:`trysquare.runs`, :mod:`trysquare.errors`...),
never from a ``trysquare._*`` module, whose contents may change in any release.

Importing this module is cheap: what each function needs is imported when it is
first called.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from trysquare._canonical import digest
from trysquare._process import DEFAULT_CAP, TAIL_CHARS, TAIL_LINES, ProcessResult, Steps
from trysquare.commands import Commands
from trysquare.hookspecs import hookimpl, hookspec

if TYPE_CHECKING:
    from trysquare.errors import TrysquareError
    from trysquare.jail import JailPolicy
    from trysquare.runs import Experiment

__all__ = [
    "DEFAULT_OUTPUT_CAP",
    "Commands",
    "JailPolicy",
    "ProcessResult",
    "Steps",
    "add_selection_options",
    "append_line",
    "child_environment",
    "create_once",
    "digest",
    "folders_of",
    "hookimpl",
    "hookspec",
    "interrupted",
    "load_experiments",
    "prepared_tree",
    "read_bytes",
    "read_toml",
    "refuse_hard_link",
    "register_structure_hook",
    "run_process",
    "run_steps",
    "scratch_folder",
    "shown",
    "structure",
    "tail",
    "throwaway_folder",
    "write_json",
    "write_text",
    "write_with_history",
]

T = TypeVar("T")

# How much of a child's stdout and stderr is kept (each); the rest is dropped and
# the result says so (``truncated``).
DEFAULT_OUTPUT_CAP = DEFAULT_CAP


# -- commands -------------------------------------------------------------------


def add_selection_options(parser: argparse.ArgumentParser, *, files_note: bool = False) -> None:
    """Add ``--cell GLOB`` and ``--run GLOB`` to a command, as ``validate`` and ``report`` have them.

    Read them back with :class:`trysquare.selection.Selection`; ``files_note`` says in the
    help that files covering every run (``measures.json``) are still written whole.
    """
    note = "; measures.json and synthesis.md still cover every run" if files_note else ""
    parser.add_argument(
        "--cell", action="append", default=[], metavar="GLOB",
        help="only runs whose cell matches this fnmatch glob (repeatable; a glob matching "
        f"nothing is an error){note}",
    )  # fmt: skip
    parser.add_argument(
        "--run", action="append", default=[], metavar="GLOB",
        help="only runs whose id matches this fnmatch glob (repeatable; a glob matching nothing is an error)",
    )  # fmt: skip


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

    Steps that run the measured agent's code (its tree, its tests) pass ``jail=job.jail``
    with ``writable`` naming their scratch folder: they then run in the jail
    (:mod:`trysquare.jail`), see nothing but that folder, the system and the interpreter,
    never a ``guarded`` folder (pass the run's folder), and die with the call. Where the
    jail cannot start they fall back to ``writable``'s confinement, or, when the policy
    requires the jail, do not run (``.problem`` says so). ``shown_as`` (with ``jail``): the
    jail shows ``writable``'s one folder at this path instead of its own — a copy of a
    prepared tree, shown where ``prepare`` built it (:func:`prepared_tree`).

    Example::

        done = run_steps([("prepare", ["npm", "ci"]), ("the command", argv)],
                         cwd=copy, timeout=600, writable=[scratch], jail=job.jail,
                         guarded=[job.run.dir], consequence="so no test ran")
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
        steps, cwd=cwd, timeout=timeout, env=env, sandbox=sandbox, consequence=consequence,
        tail_lines=tail_lines, jail=jail, guarded=guarded, shown_as=shown_as,
    )


def folders_of(tree: Path) -> frozenset[str]:
    """Every folder below ``tree`` (POSIX paths relative to it, links not followed): taken
    before ``prepare`` runs in a copy, it tells the agent's folders from what ``prepare``
    built (as :func:`prepared_tree`'s ``folders_before``)."""
    from trysquare._prepared import folders_of as folders

    return folders(tree)


def prepared_tree(
    job: Any,
    env: Mapping[str, str],
    *,
    timeout: float,
    tail_lines: int = TAIL_LINES,
) -> Any:
    """The run's tree after the scenario's ``prepare``, shared with ``run.tests()`` and every
    other validator of this run within one ``validate`` (``prepare`` runs once per run), or
    ``None`` where it is not shared (no ``prepare``, no jail here, outside ``validate``):
    then run ``prepare`` on your own copy.

    ``env`` is what ``prepare`` runs with: :func:`child_environment` of the job's
    ``suite_pass_env`` and ``protected_env``, nothing of your own (the suite's ``prepare``
    must be the same one). The answer has ``problem_for(consequence)`` (why ``prepare``
    did not succeed, said with your consequence, or ``None``), ``transcript``, ``origin``
    (the path to pass as ``run_steps(shown_as=...)``: the tree's own paths stay true),
    ``folders_before`` (the tree's folders before ``prepare``: the rest is what it built)
    and ``copy_to(dest)``, which copies the prepared tree to ``dest`` (raises ``OSError``;
    then prepare your own). ``prepare`` never sees what you place afterwards. Example::

        shared = prepared_tree(job, env, timeout=600)
        with throwaway_folder() as scratch:
            copy = shared.copy_to(Path(scratch) / "repo")
            ...  # place your files
            done = run_steps([("the command", argv)], cwd=copy, timeout=600,
                             writable=[scratch], jail=job.jail, shown_as=shared.origin,
                             env={**env, "TMPDIR": shared.origin})
    """
    from trysquare import _prepared

    from trysquare._words import split_command

    steps = [("prepare", split_command(step)) for step in job.context.get("prepare") or ()]
    return _prepared.shared_prepare(
        Path(job.context["repo"]), steps, env=env, timeout=timeout, jail=job.jail,
        guarded=[Path(job.context["repo"]), job.run.dir], tail_lines=tail_lines,
    )


def scratch_folder(prefix: str = "trysquare-") -> AbstractContextManager[str]:
    """A context manager giving an empty folder only this user can enter (a validator's
    working directory and ``TMPDIR``); what the task left there is removed after it.

    Folders are reused once emptied where nothing a child started outlives it (a
    folder costs a millisecond to create and remove on ext4). Example::

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


def child_environment(*, passed: Iterable[str] = (), protected: Iterable[str] = ()) -> dict[str, str]:
    """This process's environment minus what a validator or the suite must not see.

    ``protected`` names (every judge key, :attr:`trysquare.modes.Job.protected_env`)
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


# -- identity -------------------------------------------------------------------




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


def read_toml(path: Path, *, error: type[TrysquareError], label: str | None = None) -> dict[str, Any]:
    """Parse a TOML file, or raise ``error`` with one sentence naming it (``label``)."""
    from trysquare import _convert

    return _convert.read_toml(path, error=error, label=label)


# -- experiments ----------------------------------------------------------------


def load_experiments(paths: Sequence[Path], *, replay: bool = False) -> list[Experiment]:
    """The experiments below ``paths``, as every command reads them (plugin commands too).

    Unreadable run folders are reported on stderr and skipped; no run at all is a
    :class:`trysquare.errors.NoRunsError` (exit 2); runs that all failed to read,
    a :class:`trysquare.errors.RunError` (exit 1).
    """
    from trysquare._shown import shown
    from trysquare.errors import NoRunsError, RunError
    from trysquare.runs import discover

    try:
        experiments = discover(paths, replay=replay)
    except RunError as error:
        raise NoRunsError(error.message) from None
    for experiment in experiments:
        for unreadable in experiment.errors:
            print(f"trysquare: skipped: {shown(unreadable.message)}", file=sys.stderr)
    if not any(experiment.runs for experiment in experiments):
        where = ", ".join(str(p) for p in paths)
        count = sum(len(experiment.errors) for experiment in experiments)
        if count:
            # Runs were there and could not be used: the work fell short (1), not a usage slip (2).
            raise RunError(
                shown(f"no run under {where} could be used: {count} run folder(s) could not be read")
            )
        raise NoRunsError(f"no run found under {where} (a run is a folder holding run.toml)")
    return experiments


def __getattr__(name: str) -> Any:
    # JailPolicy is loaded when asked for: importing this module (every command does, even
    # --version) stays free of the jail and of attrs.
    if name == "JailPolicy":
        from trysquare.jail import JailPolicy

        return JailPolicy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Finished runs: ``run.toml`` files, and finding every one below a folder.

(It is over 600 lines because every input a ``run.toml`` names is checked here, against
links, hard links and special files the agent may have left, before any command reads it.)

A run whose ``run.toml`` is malformed, whose ``repo`` is not a git repository or
whose ``base`` does not resolve is reported by path and skipped; the others
proceed.
"""

from __future__ import annotations

import functools
import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from trysquare import _convert
from trysquare._pool import bounded_map, io_workers
from trysquare._record import record
from trysquare.errors import RepoError, RunError, ScenarioError
from trysquare.run_records import Etalon, Experiment, Run

__all__ = ["RUN_FILE", "Etalon", "Experiment", "Run", "discover", "load_run"]

RUN_FILE = "run.toml"


@record
class _EtalonTable:
    tag: str
    checkout: str | None = None


@record
class _RunFile:
    cell: str
    repetition: int
    prompt: str
    id: str | None = None
    repo: str = "repo"
    base: str = "HEAD"
    session: str | None = None
    session_format: str | None = None
    trace: str | None = None
    model: str | None = None
    given: tuple[str, ...] = ()
    etalon: _EtalonTable | None = None
    excluded: tuple[str, ...] = ()


def _resolve(folder: Path, value: str) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else folder / path


def load_run(run_file: Path, *, replay: bool = False, real_folder: str | None = None) -> Run:
    """Load one ``run.toml``, or raise :class:`RunError` naming it.

    With ``replay``, the measured clone is not consulted: archived contexts are
    replayed as they are, even months later when the clone is gone. ``real_folder``: the
    real path of the run's folder (``run_file``'s), when the caller knows it already.
    """
    run_file = run_file.absolute()
    folder = run_file.parent
    data = _convert.read_toml(run_file, error=RunError)
    try:
        table = _convert.structure(data, _RunFile, file=run_file, label=str(run_file))
    except ScenarioError as error:
        raise RunError(error.message) from None
    if not table.cell.strip():
        raise RunError(f"{run_file}: cell is empty; name the configuration this run belongs to")
    if table.repetition < 0:
        raise RunError(f"{run_file}: repetition must be 0 or more, not {table.repetition}")
    repo_path = _resolve(folder, table.repo)
    try:
        base_commit = None if replay else _base_commit(run_file, repo_path, table)
    except RepoError as error:
        raise RunError(f"{run_file}: {error.message}") from None
    except OSError as error:
        raise RunError(
            f"{run_file}: repo '{table.repo}' cannot be read ({error.strerror})"
        ) from None
    prompt = _resolve(folder, table.prompt)
    _refuse_special_input(run_file, "prompt", table.prompt, prompt, folder_ok=False)
    if not replay and not prompt.is_file():
        raise RunError(f"{run_file}: prompt '{table.prompt}' does not exist")
    session = _optional_path(run_file, folder, "session", table.session, replay)
    trace = _optional_path(run_file, folder, "trace", table.trace, replay)
    response = folder / "response.md"
    try:
        # Looked at once, not followed: what it is and whether it is a link.
        response_lstat: os.stat_result | None = os.lstat(response)
    except OSError:
        response_lstat = None
    _refuse_special_input(
        run_file, "response", "response.md", response, folder_ok=False, lstat=response_lstat
    )
    # trysquare writes diff.patch, by a rename; validators and a replay read it as it lies
    # (its readers never wait on one that is not a file).
    _stat_input(run_file, "diff", "diff.patch", folder / "diff.patch")
    _refuse_special_lock(folder)
    etalon = None
    if table.etalon is not None:
        checkout = table.etalon.checkout
        etalon = Etalon(table.etalon.tag, _resolve(folder, checkout) if checkout else None)
    for given in table.given:
        if Path(given).is_absolute() or ".." in Path(given).parts:
            raise RunError(f"{run_file}: given '{given}' must be a path inside the repo")
    _check_excluded(run_file, table.excluded)
    # Whether a run input lies below the folder through no link, asked once per input.
    plain: dict[str, bool] = {}

    def plainly_inside(value: str) -> bool:
        if value not in plain:
            plain[value] = _plainly_inside(folder, value)
        return plain[value]

    _check_links(
        run_file,
        folder,
        repo_path,
        table,
        plainly_inside,
        response_linked=response_lstat is not None and stat.S_ISLNK(response_lstat.st_mode),
    )  # a replay reads the prompt too (the judge's blinding line)
    if not replay:
        assert base_commit is not None
        _check_given(run_file, repo_path, table, base_commit)
    # An experiment holds every run while validate works: the strings most runs share
    # (cell, base, model, ...) are kept once, and a path that resolves to itself is kept
    # as it was built, beside its folder, not parsed again.
    return Run(
        dir=folder,
        # Not folder.name: pathlib interns each part, and an interned id per run would grow
        # the interpreter's table of interned strings by an entry a run for as long as it lives.
        id=table.id or os.path.basename(os.fspath(folder)),
        cell=_shared(table.cell),
        repetition=table.repetition,
        repo=_resolved_in(folder, real_folder, table.repo, repo_path, plainly_inside),
        base=_shared(table.base),
        base_commit=None if base_commit is None else _shared(base_commit),
        prompt=_resolved_in(folder, real_folder, table.prompt, prompt, plainly_inside),
        session=session,
        session_format=None if table.session_format is None else _shared(table.session_format),
        trace=trace,
        model=None if table.model is None else _shared(table.model),
        given=tuple(sorted(set(table.given))),
        etalon=None if etalon is None else _shared_etalon(etalon),
        excluded=tuple(table.excluded),
    )


def _shared(text: str) -> str:
    return sys.intern(text)


@functools.lru_cache(maxsize=64)
def _shared_etalon(etalon: Etalon) -> Etalon:
    return etalon


def _resolved(path: Path) -> Path:
    resolved = path.resolve()
    return path if os.fspath(resolved) == os.fspath(path) else resolved


def _resolved_in(
    folder: Path,
    real_folder: str | None,
    value: str,
    path: Path,
    plainly_inside: Callable[[str], bool],
) -> Path:
    """:func:`_resolved` of ``path``, the run input ``value`` found from the run ``folder``.

    Where the real path of ``folder`` is known and ``value`` names a path below it through
    no link, that path is ``real_folder`` joined with ``value``: one ``lstat`` a part of
    ``value``, not one a part of the whole path resolved again (and a ``stat``).
    """
    if (
        real_folder is None
        or path != folder / value
        or value.startswith("~")
        or not plainly_inside(value)
    ):
        return _resolved(path)
    resolved = os.path.join(real_folder, *Path(value).parts)
    return path if resolved == os.fspath(path) else Path(resolved)


def _base_commit(run_file: Path, repo_path: Path, table: _RunFile) -> str:
    # The git layer is imported by a fresh load only: --replay and report never ask git.
    from trysquare.git.dotgit import is_git_repo
    from trysquare.git.refs import resolve_commit

    if not repo_path.is_dir() or not is_git_repo(repo_path):
        raise RunError(f"{run_file}: repo '{table.repo}' is not a git repository")
    clone, folder = repo_path.resolve(), run_file.parent.resolve()
    # trysquare's own files in the run folder must never become the agent's work.
    if clone == folder or clone in folder.parents:
        where = "is the run folder" if clone == folder else "contains the run folder"
        raise RunError(
            f"{run_file}: repo '{table.repo}' {where}; the clone must be a folder of its own"
        )
    commit = resolve_commit(repo_path, table.base)
    pinned = read_pinned_base(run_file.parent)
    if pinned is not None and pinned.get("base") != commit:
        raise RunError(
            f"{run_file}: base '{table.base}' now resolves to {commit}, but it was "
            f"{pinned.get('base')} at first measurement ({run_file.parent / BASE_PIN}); "
            "a moved tag or branch is refused (delete that file only if the change is yours)"
        )
    return commit


BASE_PIN = Path(".trysquare") / "base.json"


def read_pinned_base(folder: Path) -> dict[str, Any] | None:
    """What ``<run>/.trysquare/base.json`` recorded at first measurement, or ``None``."""
    import json

    from trysquare import _atomic

    path = folder / BASE_PIN
    try:
        # Never through a symlink: a planted link must not make us read another file.
        value = json.loads(_atomic.read_bytes(path, root=folder).decode("utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise RunError(
            f"{path}: cannot be read ({error}); delete it to pin the base again"
        ) from None
    if not isinstance(value, dict) or not isinstance(value.get("base"), str):
        raise RunError(f"{path}: is not a pinned base; delete it to pin the base again")
    return value


def _check_excluded(run_file: Path, patterns: tuple[str, ...]) -> None:
    for pattern in patterns:
        if not pattern.strip() or "\n" in pattern or "\r" in pattern or pattern.startswith("#"):
            raise RunError(
                f"{run_file}: excluded {pattern!r} is not a gitignore-style pattern "
                "(one non-empty line, not a comment)"
            )


def _inside(path: Path, *roots: Path) -> bool:
    return any(path == root or root in path.parents for root in roots)


def _check_links(
    run_file: Path,
    folder: Path,
    repo_path: Path,
    table: _RunFile,
    plainly_inside: Callable[[str], bool],
    *,
    response_linked: bool,
) -> None:
    """Refuse inputs that leave the run: symlinks followed, each must stay in the run
    folder or the clone. A path below the folder with no link on the way is inside as it
    is (one lstat a part); only the others are resolved (every run pays this, a replay too)."""
    resolved: list[tuple[Path, Path]] = []

    def roots() -> tuple[Path, Path]:
        if not resolved:
            resolved.append((folder.resolve(), repo_path.resolve()))
        return resolved[0]

    named = [("prompt", table.prompt), ("session", table.session), ("trace", table.trace)]
    for key, value in named:
        if value is None or plainly_inside(value):
            continue
        if not _inside(_resolve(folder, value).resolve(), *roots()):
            raise RunError(
                f"{run_file}: {key} '{value}' resolves outside the run folder and its clone"
            )
    if table.session is not None:
        _check_session_folder(run_file, table.session, _resolve(folder, table.session), roots)
    response = folder / "response.md"
    if response_linked and not _inside(response.resolve(), *roots()):
        raise RunError(f"{run_file}: {response} resolves outside the run folder and its clone")


def _plainly_inside(folder: Path, value: str) -> bool:
    """Whether ``value`` names a path below ``folder`` with no link on the way (absent
    from some part on: nothing there to follow)."""
    relative = Path(value)
    if relative.is_absolute() or ".." in relative.parts:
        return False
    current = os.fspath(folder)
    for part in relative.parts:
        current = os.path.join(current, part)
        try:
            if stat.S_ISLNK(os.lstat(current).st_mode):
                return False
        except OSError:
            return True
    return True


def _check_given(run_file: Path, repo_path: Path, table: _RunFile, base_commit: str) -> None:
    """Every given file stays in the clone and exists at base."""
    from trysquare.git.refs import missing_at

    clone = repo_path.resolve()
    for given in table.given:
        if "\n" in given or not _inside((repo_path / given).resolve(), clone):
            raise RunError(f"{run_file}: given '{given}' resolves outside the clone")
    missing = missing_at(repo_path, base_commit, table.given)
    if missing:
        raise RunError(
            f"{run_file}: given '{missing[0]}' does not exist at base {base_commit}; a given "
            "file must be in the commit the agent started from"
        )


def _refuse_special_input(
    run_file: Path,
    key: str,
    value: str,
    path: Path,
    *,
    folder_ok: bool,
    lstat: os.stat_result | None = None,
) -> None:
    """Refuse an input the agent may have written that is a FIFO, socket or device (or a
    link to one): every reader of it (the judge's pieces, a validator, a form) would wait
    on it for ever or read without end. A file with more than one link is refused too: a
    hard link to a file elsewhere (a 0600 secret) would be read, judged and reported as the
    run's. Absent is said elsewhere, when it matters. ``lstat``: the path's own entry, when
    the caller has it (followed only if it is a link)."""
    info = _stat_input(run_file, key, value, path, lstat)
    if info is None:
        return
    mode = info.st_mode
    if stat.S_ISREG(mode) or (folder_ok and stat.S_ISDIR(mode)):
        return
    kind = _convert.kind_of(mode)
    raise RunError(f"{run_file}: {key} '{value}' is {kind}, not a file: it cannot be read as one")


def _stat_input(
    run_file: Path, key: str, value: str, path: Path, lstat: os.stat_result | None = None
) -> os.stat_result | None:
    """``path``'s stat (``None`` when absent or unreadable), refusing a file with more than
    one link (:func:`trysquare._atomic.refuse_hard_link`). ``lstat``: the path's own entry
    when the caller has it: that is its stat unless it is a symlink."""
    from trysquare import _atomic

    if lstat is not None and not stat.S_ISLNK(lstat.st_mode):
        info = lstat
    else:
        try:
            info = path.stat()
        except OSError:
            return None
    try:
        _atomic.refuse_hard_link(info, path)
    except _atomic.UnsafePath as unsafe:
        raise RunError(f"{run_file}: {key} '{value}': {unsafe}") from None
    return info


def _refuse_special_lock(folder: Path) -> None:
    """Refuse a run whose lock file is a FIFO, socket, folder or device: trysquare never makes
    one, every command would wait on it or fail to lock it, and the run folder is the agent's.
    Looked at without following a link (a linked lock is refused when it would be opened)."""
    from trysquare.lock import LOCK_FILE

    lock = folder / LOCK_FILE
    try:
        mode = os.lstat(lock).st_mode
    except OSError:
        return
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return
    kind = _convert.kind_of(mode)
    raise RunError(
        f"{lock} is {kind}, not a regular file: trysquare never makes its lock so, and will not "
        "wait on it; remove it to validate this run"
    )


def _check_session_folder(
    run_file: Path, value: str, session: Path, roots: Callable[[], tuple[Path, Path]]
) -> None:
    """A session folder's logs (its ``*.jsonl``, as the session readers list them) are the
    agent's too: each must be a file that stays in the run folder or the clone. A link
    to another session on the machine would be read, and its last answer judged."""
    if not session.is_dir():
        return
    for child in sorted(session.iterdir()):
        if child.suffix != ".jsonl":
            continue
        shown = f"{value.rstrip('/')}/{child.name}"
        _refuse_special_input(run_file, "session", shown, child, folder_ok=True)
        if not _inside(child.resolve(), *roots()):
            raise RunError(
                f"{run_file}: session '{shown}' resolves outside the run folder and its clone"
            )


def _optional_path(
    run_file: Path, folder: Path, key: str, value: str | None, replay: bool
) -> Path | None:
    if value is None:
        return None
    path = _resolve(folder, value)
    _refuse_special_input(
        run_file, key, value, path, folder_ok=True
    )  # a session may be a folder of logs
    if not path.exists() and not replay:
        raise RunError(f"{run_file}: {key} '{value}' does not exist")
    return path.resolve()


def _run_files(root: Path) -> Iterator[str]:
    """Every run.toml below ``root``, not descending into a run's own folders.

    As strings: 10,000 of them are held while the runs load, and a path object
    costs three times the memory of its text.
    """
    if (root / RUN_FILE).is_file():
        yield os.path.join(root, RUN_FILE)
        return
    for current, folders, files in os.walk(root):
        if RUN_FILE in files:
            yield os.path.join(current, RUN_FILE)
            folders.clear()  # a run's clone and archives hold no further runs
            continue
        folders[:] = sorted(f for f in folders if not f.startswith(".") and f != "node_modules")


def _real_run_file(run_file: str, root: str, real_root: str) -> str:
    """``os.path.realpath(run_file)`` for a ``run_file`` :func:`_run_files` found below ``root``.

    The walk descends into no symlinked folder, so every folder between ``root`` and the
    file is a real one: only ``root`` (resolved once by the caller) and the file itself
    can be links. One ``lstat`` a run instead of one per part of its path.
    """
    if not run_file.startswith(root + os.sep) or os.path.islink(run_file):
        return os.path.realpath(run_file)
    return real_root + run_file[len(root) :]


def _real_folder(run_file: str, root: str, real_root: str) -> str | None:
    """The real path of the folder of a ``run_file`` :func:`_run_files` found below ``root``
    (whose real path is ``real_root``): the walk follows no symlinked folder."""
    folder = os.path.dirname(run_file)
    if folder == root:
        return real_root
    return real_root + folder[len(root) :] if folder.startswith(root + os.sep) else None


def _path_order(path: str) -> str:
    """Sort key ordering path texts as their path objects order (part by part).

    The separator becomes ``"\\0"``, which no part holds and every other character sorts
    after, so one string compares as the list of parts would: the key of 100,000 runs is
    one string each, not a list of parts (about 500 bytes a run, all held while sorting).
    """
    return path.replace(os.sep, "\0")


def _drain(items: list[str]) -> Iterator[str]:
    """``items`` from the last to the first, each taken out of the list as it is handed out."""
    while items:
        yield items.pop()


def _load_each(
    load: Callable[[str], Run | RunError], run_files: list[str], *, in_this_thread: bool
) -> Iterator[Run | RunError]:
    """``load`` of each of ``run_files`` (last first), in order. A lone run, or any number
    ``in_this_thread`` (a replay, which asks git nothing), is loaded here, since a pool would
    only hand it to another thread and back (and a one-run command would import
    ``concurrent.futures`` with ``logging`` for it).

    Otherwise runs are loaded here too until one of them asks git (its base is a packed
    object, say): reading a clone's refs and loose objects is the interpreter's work, and
    threads doing it only hand the interpreter back and forth at every file read; git
    processes are worth overlapping, so the rest go to a pool then."""
    pending = _drain(run_files)
    if in_this_thread or len(run_files) <= 1:
        yield from map(load, pending)
        return
    from trysquare.git.running import processes_started

    for run_file in pending:
        before = processes_started()
        yield load(run_file)
        if processes_started() != before:
            break
    else:
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=io_workers()) as pool:
        yield from bounded_map(pool, load, pending, window=2 * io_workers())


def discover(paths: Iterable[Path], *, replay: bool = False) -> list[Experiment]:
    """Find the runs below each path; unreadable runs are collected, not raised."""
    experiments: list[Experiment] = []
    seen_roots: set[Path] = set()
    seen_run_files: set[str] = set()
    named = list(paths)
    for index, path in enumerate(named):
        root = Path(path).absolute()
        if not root.is_dir():
            raise RunError(f"{path}: no such folder")
        if root.resolve() in seen_roots:
            continue  # the same folder named twice is one experiment
        seen_roots.add(root.resolve())
        runs: list[Run] = []
        errors: list[RunError] = []
        real_root = os.path.realpath(root)

        def load(
            found: str, root: str = os.fspath(root), real_root: str = real_root
        ) -> Run | RunError:
            run_file = Path(found)
            try:
                real_folder = _real_folder(found, root, real_root)
                return load_run(run_file, replay=replay, real_folder=real_folder)
            except RunError as error:
                # Keep the folder: a run that names its cell still counts there (invalid).
                return RunError(error.message, run_dir=run_file.parent)
            except Exception as error:  # noqa: BLE001 - one run never fails the matrix (RecursionError too)
                return RunError(
                    f"{run_file}: cannot be read ({type(error).__name__}: {error})",
                    run_dir=run_file.parent,
                )

        # A folder inside one already named holds runs already found: each is validated once.
        run_files = []
        for run_file in sorted(_run_files(root), key=_path_order):
            real = _real_run_file(run_file, os.fspath(root), real_root)
            if real not in seen_run_files:
                # Mostly the same text as the path found: kept once, not twice.
                seen_run_files.add(run_file if real == run_file else real)
                run_files.append(run_file)
        if not run_files and experiments:
            continue
        if index == len(named) - 1:
            seen_run_files.clear()  # no path left to compare: not held while the runs load
        # Loading asks git about each clone: overlap those calls, keep the order. Each path
        # text is let go once handed out, so it is not held beside the run loaded from it.
        # A replay asks git nothing: loading is the interpreter's work alone, which threads
        # would only hand back and forth (a pool of four on two cores made more futex
        # calls than system calls of any other kind in a replay).
        run_files.reverse()
        for loaded in _load_each(load, run_files, in_this_thread=replay):
            if isinstance(loaded, RunError):
                errors.append(loaded)
            else:
                runs.append(loaded)
        seen: dict[str, Run] = {}
        for run in runs:
            if run.id in seen:
                errors.append(
                    RunError(
                        f"{run.dir / RUN_FILE}: id '{run.id}' is also the id of {seen[run.id].dir}"
                    )
                )
            seen.setdefault(run.id, run)
        unique = [run for run in runs if seen[run.id] is run]
        experiments.append(Experiment(root, tuple(unique), tuple(errors)))
    return experiments


def run_toml(fields: dict[str, Any]) -> str:
    """The text of a ``run.toml`` for ``trysquare record``."""
    import tomli_w

    return tomli_w.dumps({k: v for k, v in fields.items() if v is not None})


def load_experiments(paths: Sequence[Path], *, replay: bool = False) -> list[Experiment]:
    """The experiments below ``paths``, as every command reads them (plugin commands too).

    Unreadable run folders are reported on stderr and skipped; no run at all is a
    :class:`trysquare.errors.NoRunsError` (exit 2); runs that all failed to read,
    a :class:`trysquare.errors.RunError` (exit 1).
    """
    from trysquare._shown import shown
    from trysquare.errors import NoRunsError

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
                shown(
                    f"no run under {where} could be used: {count} run folder(s) could not be read"
                )
            )
        raise NoRunsError(f"no run found under {where} (a run is a folder holding run.toml)")
    return experiments

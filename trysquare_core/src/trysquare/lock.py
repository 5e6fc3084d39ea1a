"""One lock model for every command that writes results: ``validate`` and ``form ingest``.

A command working on a folder holds ``<folder>/.trysquare/validate.lock`` (an
``flock``) and then looks for a held lock on every folder that overlaps its own:
each folder above it, and each folder between it and one of its runs (the runs
included). Two commands on overlapping folders — the same, one above, one
inside — therefore exclude each other, and of two starting together at least
one sees the other. Every path is resolved first, so the same run reached
through a symlinked path is the same lock. The lock file is opened without
following symlinks: the agent cannot make trysquare write into a victim file.
Every open and probe of a lock file is non-blocking and takes a regular file only:
a FIFO planted as a run's lock never holds a command (the run itself is refused
at load, naming the file, see :mod:`trysquare.runs`).
"""

from __future__ import annotations

import fcntl
import os
import re
import stat
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from trysquare import _atomic
from trysquare._lazy_pattern import LazyPattern
from trysquare.errors import LockedError, RunError

__all__ = ["LOCK_FILE", "RunFolder", "experiment_lock", "folder_lock", "sweep_temps"]

LOCK_FILE = Path(".trysquare") / "validate.lock"


class RunFolder(Protocol):
    """What the lock reads of a run (a :class:`trysquare.runs.Run`): its folder. Named here
    by shape, so that the lock stays below the runs it guards."""

    @property
    def dir(self) -> Path: ...


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# Locks this process holds (several experiments in one command): never "another command".
_held_here: set[Path] = set()


@contextmanager
def experiment_lock(
    root: Path, runs: Iterable[RunFolder] = (), *, command: str = "validate"
) -> Iterator[None]:
    """Hold the lock on ``root`` (and see that nothing overlapping is held) while working.

    ``command`` ("validate", "form ingest") is written in the lock file, so that
    a refused command can say what holds it. Raises :class:`LockedError` (exit 1)
    naming the folder another process holds, or :class:`RunError` when the lock
    file is a symlink.
    """
    root = Path(root).resolve()
    lock_path = root / LOCK_FILE
    try:
        fd = _atomic.open_lock(lock_path, root=root)
    except _atomic.UnsafePath as unsafe:
        raise RunError(f"cannot lock {root}: {unsafe}", run_dir=root) from None
    except OSError as error:
        raise RunError(f"cannot lock {root}: {lock_path}: {_why(error)}", run_dir=root) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LockedError(
                f"another trysquare {_holder(fd)} is running on {root} (it holds {lock_path})"
            ) from None
        except OSError as error:
            raise RunError(
                f"cannot lock {root}: {lock_path}: {_why(error)}", run_dir=root
            ) from None
        for other in _overlapping_locks(root, runs):
            if other not in _held_here and _held(other):
                raise LockedError(
                    f"another trysquare {_holder_of(other)} is running on {other.parent.parent}, "
                    f"which overlaps {root} (it holds {other})"
                )
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {command}\n".encode(), 0)
        _held_here.add(lock_path)
        # Under this lock no validate or ingest is writing measures.json here: its temporary
        # files are a killed writer's (run folders are swept as each run is planned). `report`
        # rewrites it without the lock: a temporary file younger than a minute may be its own.
        sweep_temps(root, of="measures.json", older_than=60.0)
        yield
    finally:
        _held_here.discard(lock_path)
        os.close(fd)


def _why(error: OSError) -> str:
    return error.strerror or str(error)


def _holder(fd: int) -> str:
    """The command named in a held lock file ("validate" when it says nothing readable)."""
    try:
        words = os.pread(fd, 200, 0).decode("ascii").split(maxsplit=1)
    except (OSError, UnicodeDecodeError):
        return "validate"
    command = words[1].strip() if len(words) == 2 else ""
    return command if command in ("validate", "form ingest") else "validate"


def _open_probe(lock_path: Path) -> int | None:
    """A read-only fd on ``lock_path`` when it is a regular file, else ``None``.

    Never blocks (a FIFO planted there would hold the open for ever) and never follows a
    symlink: the lock files below an experiment sit in the agent's run folders. No
    trysquare holds a lock that is not a regular file (:func:`_atomic.open_lock` refuses
    one), so such a file is never "held".
    """
    try:
        fd = os.open(lock_path, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC)
    except OSError:
        return None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        regular = False
    if not regular:
        os.close(fd)
        return None
    return fd


def _holder_of(lock_path: Path) -> str:
    fd = _open_probe(lock_path)
    if fd is None:
        return "validate"
    try:
        return _holder(fd)
    finally:
        os.close(fd)


def _overlapping_locks(root: Path, runs: Iterable[RunFolder]) -> Iterator[Path]:
    """Existing lock files of every folder above ``root`` or between it and a run."""
    folders = {os.fspath(parent) for parent in root.parents}
    top = os.fspath(root)
    below = top.rstrip(os.sep) + os.sep
    # Runs share their parent folders: each is resolved once, and a run folder itself
    # only when it is a link (the same run reached through a symlinked path).
    resolved: dict[str, str] = {}
    for run in runs:
        name = os.fspath(run.dir)
        parent, base = os.path.split(name)
        try:
            if parent not in resolved:
                resolved[parent] = os.path.realpath(parent)
            folder = os.path.join(resolved[parent], base)
            if os.path.islink(folder):
                folder = os.path.realpath(folder)
        except OSError:
            continue
        # Strings, not Paths: this walk runs once per run folder.
        while folder != top and folder.startswith(below):
            folders.add(folder)
            folder = os.path.dirname(folder)
    for folder in sorted(folders):
        candidate = Path(folder) / LOCK_FILE
        if candidate.exists():
            yield candidate


def _held(lock_path: Path) -> bool:
    """Whether another process holds ``lock_path``; probed read-only, without blocking,
    never through a symlink, a regular file only."""
    fd = _open_probe(lock_path)
    if fd is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


# A temporary file of trysquare's atomic writes: `.<target name>.<random>.tmp`. Compiled for
# the first name that starts with a dot and ends in `.tmp`: most folders hold none.
_TEMP_NAME = LazyPattern(r"\.(?P<target>.+)\.[A-Za-z0-9_]{6,16}\.tmp\Z", re.DOTALL)


def sweep_temps(folder: Path, *, of: str | None = None, older_than: float = 0.0) -> list[str]:
    """Delete the temporary files a killed writer left in ``folder`` (of target ``of`` only,
    when given, and last written more than ``older_than`` seconds ago); a link is removed as
    a link, never followed. Call it only where no live writer can be at work: under the lock
    every writer there holds."""
    removed: list[str] = []
    before = time.time() - older_than
    try:
        with os.scandir(folder) as entries:
            names = [
                entry.name
                for entry in entries
                if entry.name.startswith(".")
                and entry.name.endswith(".tmp")
                and (match := _TEMP_NAME.match(entry.name)) is not None
                and (of is None or match.group("target") == of)
                and entry.is_file(follow_symlinks=False)
                and (not older_than or entry.stat(follow_symlinks=False).st_mtime < before)
            ]
    except OSError:
        return removed  # absent, not a folder, unreadable: nothing of ours to remove
    for name in names:
        try:
            os.unlink(os.path.join(folder, name))
            removed.append(name)
        except OSError:
            pass
    return removed


@contextmanager
def folder_lock(folder: Path, *, wait: float = 10.0) -> Iterator[None]:
    """Hold a shared lock on ``folder`` (its ``.lock`` file) while writing there, sweeping it
    first when no other writer is at work.

    Every writer into the folder holds the shared lock; whoever can take it exclusively
    knows nobody writes there and removes the temporary files a killed writer left. A
    busy folder is not swept this time (the next writer alone sweeps it). The lock file
    is opened as every lock is: no link, a regular file only, without blocking; the
    shared lock is waited for at most ``wait`` seconds (another writer's sweep is short).
    """
    folder = Path(folder)
    lock_path = folder / ".lock"
    folder.mkdir(parents=True, exist_ok=True)
    try:
        fd = _atomic.open_lock(lock_path, root=folder)
    except OSError as error:
        raise RunError(f"cannot lock {folder}: {lock_path}: {_why(error)}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            sweep_temps(folder)
        except BlockingIOError:
            pass  # another writer is at work: its files stay
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LockedError(f"another trysquare holds {lock_path}; try again") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)

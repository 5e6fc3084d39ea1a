"""Scratch folders for validators: empty and private when handed out, reused once emptied.

A script validator runs in a scratch folder of its own (its working directory
and ``TMPDIR``). Creating and removing a folder costs about a millisecond on
ext4 (journalled allocation), as much as the rest of a task's bookkeeping, so a
folder a task left empty — or that is emptied after it — serves the next task.

A folder is reused only where nothing a validator started outlives it (Linux,
sandbox not switched off: :func:`trysquare._process.run_process` ends strays), so
no process of an earlier task can write into a later one's folder; and only when
it is still the very folder made here (same inode, not a link, owner-only mode):
a validator that replaced or opened up its folder gets it removed instead.
Dependency-free.
"""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from trysquare.sandbox import switched_off

__all__ = ["scratch_folder"]

# Per prefix, folders emptied and ready: (path, (device, inode)).
_free: dict[str, list[tuple[str, tuple[int, int]]]] = {}
_lock = threading.Lock()


@contextmanager
def scratch_folder(prefix: str = "trysquare-") -> Iterator[str]:
    """An empty folder only this user can enter, for one task; emptied (or removed) after it.

    Raises ``OSError`` when what the task left cannot be removed.
    """
    with _lock:
        kept = _free.get(prefix)
        found = kept.pop() if kept else None
    if found is None:
        path = tempfile.mkdtemp(prefix=prefix)
        made = os.lstat(path)
        found = (path, (made.st_dev, made.st_ino))
    path, identity = found
    try:
        yield path
    finally:
        if _reusable() and _emptied(path, identity):
            with _lock:
                if not _free:
                    atexit.register(remove_kept)  # once: _free keeps its keys
                _free.setdefault(prefix, []).append(found)
        else:
            _remove(path)


def remove_kept() -> None:
    """Remove every folder kept for reuse (at exit: nothing of ours stays in the temp folder)."""
    with _lock:
        kept = [path for folders in _free.values() for path, _ in folders]
        for folders in _free.values():
            folders.clear()
    for path in kept:
        try:
            _remove(path)
        except OSError:
            pass


def _reusable() -> bool:
    return sys.platform == "linux" and not switched_off()


def _emptied(path: str, identity: tuple[int, int]) -> bool:
    """Whether ``path`` is still our folder and now empty (what was left in it removed)."""
    try:
        now = os.lstat(path)
    except OSError:
        return False
    if (
        not stat.S_ISDIR(now.st_mode)
        or (now.st_dev, now.st_ino) != identity
        or stat.S_IMODE(now.st_mode) != 0o700
        or now.st_uid != os.getuid()
    ):
        return False
    try:
        with os.scandir(path) as entries:
            left = [entry.name for entry in entries]
        for name in left:
            _remove(os.path.join(path, name))
        with os.scandir(path) as entries:
            return next(entries, None) is None
    except OSError:
        return False


def _remove(path: str) -> None:
    """Remove ``path`` (a file, link or folder tree), opening up what the task made read-only.

    Raises ``OSError`` for what still cannot be removed (as ``TemporaryDirectory`` would).
    """
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(found.st_mode):
        os.unlink(path)
        return

    def opened_up(_function: Callable[..., Any], failed: str, error: Any) -> None:
        if issubclass(error[0], FileNotFoundError):
            return  # gone meanwhile
        if not issubclass(error[0], PermissionError):
            raise error[1]
        try:
            if failed != path:
                os.chmod(os.path.dirname(failed), 0o700)
            if not stat.S_ISLNK(os.lstat(failed).st_mode):
                os.chmod(failed, 0o700)
            try:
                os.unlink(failed)
            except IsADirectoryError:
                _remove(failed)
        except FileNotFoundError:
            pass

    shutil.rmtree(path, onerror=opened_up)

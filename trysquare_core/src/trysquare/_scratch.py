"""Scratch folders for validators: empty and private when handed out, reused once emptied.

A script validator runs in a scratch folder of its own (its working directory
and ``TMPDIR``). Creating and removing a folder goes through the filesystem's journal
and weighs as much as the rest of a task's bookkeeping, so a folder a task left empty —
or that is emptied after it — serves the next task.

A folder is reused only where nothing a validator started outlives it (Linux,
sandbox not switched off: :func:`trysquare._process.run_process` ends strays), so
no process of an earlier task can write into a later one's folder; and only when
it is still the very folder made here (same inode, not a link, owner-only mode):
a validator that replaced or opened up its folder gets it removed instead.

In a worker thread that starts one validator after another, a folder is looked at and emptied
once the next validator has started (:func:`trysquare._start_first.when_started`), not between
the two: the next task takes another folder meanwhile, so two serve in turn. A folder is
handed out again only once emptied, and only after the processes of its task are all gone.
Dependency-free.
"""

from __future__ import annotations

import atexit
import errno
import os
import stat
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from trysquare import _start_first
from trysquare.sandbox import switched_off

__all__ = ["remove_tree", "scratch_folder", "throwaway_folder"]

# Per prefix, folders emptied and ready: (path, (device, inode), its ctime once emptied).
_free: dict[str, list[tuple[str, tuple[int, int], int]]] = {}
# Folders whose leftovers could not be removed when their task ended: tried again at exit.
_stuck: list[str] = []
_exit_hook: list[object] = []  # remove_kept, once registered to run at exit
_lock = threading.Lock()


@contextmanager
def scratch_folder(prefix: str = "trysquare-") -> Iterator[str]:
    """An empty folder only this user can enter, for one task; emptied (or removed) after it.

    Raises ``OSError`` when what the task left cannot be removed, where folders are not reused
    (where they are, such a folder is tried again at exit and never handed out).
    """
    found = _taken(prefix)
    if found is None:
        path = tempfile.mkdtemp(prefix=prefix)
        made = os.lstat(path)
        found = (path, (made.st_dev, made.st_ino))
    path = found[0]
    try:
        yield path
    finally:
        if _reusable():
            # Looked at and emptied once the worker's next child has started (at once in any
            # other thread): nothing of this folder is on the way to that start.
            _start_first.when_started(lambda: _give_back(prefix, found))
        else:
            _remove(path)


def _taken(prefix: str) -> tuple[str, tuple[int, int]] | None:
    """A folder kept for ``prefix`` and untouched since it was emptied, or ``None``.

    A kept folder waits while other validators run (the next one, in a worker, or another
    worker's), and one of them may open it up (``chmod`` is no write to Landlock) for someone
    else to write there: it is handed out only while it is still the very folder, private, with
    the change time it had once emptied (any chmod, entry made or removed changes that); one
    touched since is removed instead. (Before Linux 6.13 a change made within the clock tick
    of the emptying may keep that time; the folder must still be private then.)
    """
    with _lock:
        kept = _free.get(prefix)
        ready = kept.pop() if kept else None
    if ready is None:
        return None
    path, identity, emptied_at = ready
    try:
        now = os.lstat(path)
    except OSError:
        now = None
    if now is not None and _ours(now, identity) and now.st_ctime_ns == emptied_at:
        return path, identity
    _discard(path)
    return None


def _give_back(prefix: str, found: tuple[str, tuple[int, int]]) -> None:
    """Keep ``found`` for a later task once it is emptied; remove it otherwise. What cannot be
    removed is tried again at exit (it is never handed out): this may run after the task's
    result was handed over, so nothing is raised into another task."""
    path, identity = found
    with _lock:
        if not _exit_hook:
            _exit_hook.append(atexit.register(remove_kept))
    emptied_at = _emptied(path, identity)
    if emptied_at is not None:
        with _lock:
            _free.setdefault(prefix, []).append((path, identity, emptied_at))
        return
    _discard(path)


def _discard(path: str) -> None:
    """Remove a folder never to be handed out again; if that fails, at exit."""
    try:
        _remove(path)
    except OSError:
        with _lock:
            _stuck.append(path)


def remove_kept() -> None:
    """Remove every folder kept for reuse (at exit: nothing of ours stays in the temp folder)."""
    with _lock:
        kept = [ready[0] for folders in _free.values() for ready in folders] + _stuck
        for folders in _free.values():
            folders.clear()
        _stuck.clear()
    for path in kept:
        try:
            _remove(path)
        except OSError:
            pass


def _reusable() -> bool:
    return sys.platform == "linux" and not switched_off()


def _ours(now: os.stat_result, identity: tuple[int, int]) -> bool:
    """Whether ``now`` (an lstat) is still the folder made here, only this user's to enter."""
    return (
        stat.S_ISDIR(now.st_mode)
        and (now.st_dev, now.st_ino) == identity
        and stat.S_IMODE(now.st_mode) == 0o700
        and now.st_uid == os.getuid()
    )


def _emptied(path: str, identity: tuple[int, int]) -> int | None:
    """``path``'s change time once it is emptied (what was left in it removed), or ``None``
    when it is no longer our folder or cannot be emptied."""
    try:
        now = os.lstat(path)
        if not _ours(now, identity):
            return None
        with os.scandir(path) as entries:
            left = [entry.name for entry in entries]
        if not left:
            return now.st_ctime_ns  # most tasks leave nothing: one listing says so
        for name in left:
            _remove(os.path.join(path, name))
        with os.scandir(path) as entries:
            if next(entries, None) is not None:
                return None
        now = os.lstat(path)
    except OSError:
        return None
    return now.st_ctime_ns if _ours(now, identity) else None


def _remove(path: str) -> None:
    """Remove ``path`` (a file, link or folder tree), opening up what the task made read-only.

    Raises ``OSError`` for what still cannot be removed (as ``TemporaryDirectory`` would).
    """
    remove_tree(path)


_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(path: str) -> None:
    """Remove ``path`` and all it holds, however deep, never following a link.

    A task's (or the agent's) tree may be deeper than ``PATH_MAX`` and than Python's
    recursion limit (``shutil.rmtree`` fails on both): the folders are emptied by moving
    what each folder of the top one holds up into the top one, so every name used is
    relative to an open folder one level down, and few are ever open. Read-only folders are
    opened up first. Raises ``OSError`` for what still cannot be removed.
    """
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(found.st_mode):
        os.unlink(path)
        return
    _open_up(path)
    top = os.open(path, _DIRECTORY)
    try:
        fresh = 0
        while names := os.listdir(top):
            for name in names:
                try:
                    kind = os.stat(name, dir_fd=top, follow_symlinks=False).st_mode
                except FileNotFoundError:
                    continue
                if not stat.S_ISDIR(kind):
                    os.unlink(name, dir_fd=top)
                    continue
                _open_up(name, kind, top)
                inner = os.open(name, _DIRECTORY, dir_fd=top)
                try:
                    for held in os.listdir(inner):
                        mode = os.stat(held, dir_fd=inner, follow_symlinks=False).st_mode
                        if stat.S_ISDIR(mode):
                            _open_up(held, mode, inner)  # moving a folder rewrites its ".."
                        while True:  # a name free in the top folder (nothing else writes there)
                            fresh += 1
                            target = f".trysquare-removed-{fresh}"
                            try:
                                os.stat(target, dir_fd=top, follow_symlinks=False)
                            except FileNotFoundError:
                                break
                        os.rename(held, target, src_dir_fd=inner, dst_dir_fd=top)
                finally:
                    os.close(inner)
                os.rmdir(name, dir_fd=top)
    finally:
        os.close(top)
    os.rmdir(path)


def _open_up(name: str, mode: int | None = None, folder: int | None = None) -> None:
    """Make a folder of ours (``name`` in the open ``folder``, known to be a folder, not a
    link) readable, writable and searchable: the task may have shut it."""
    try:
        if mode is None:
            mode = os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
        if stat.S_IMODE(mode) & 0o700 != 0o700:
            # Through a handle of the folder itself, never by its name: chmod follows a link,
            # and one put in the folder's place since it was looked at would have its target
            # changed (as root) instead.
            held = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
            try:
                os.chmod(f"/proc/self/fd/{held}", (mode & 0o777) | 0o700)
            finally:
                os.close(held)
    except PermissionError:
        pass  # not ours: root needs no permission, and a user cannot change it anyway
    except OSError as error:
        if error.errno not in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
            raise  # ELOOP, ENOTDIR: no longer a folder (a link now); ENOENT: gone


@contextmanager
def throwaway_folder(prefix: str) -> Iterator[str]:
    """A fresh private temporary folder, removed after (the agent's scratch copy).

    Unlike ``TemporaryDirectory``, its removal survives any tree the agent's code left in it
    (:func:`remove_tree`); what cannot be removed is left behind, never raised.
    """
    path = tempfile.mkdtemp(prefix=prefix)
    try:
        yield path
    finally:
        try:
            remove_tree(path)
        except OSError:
            pass

"""Hostile-file checks: reading what the agent wrote without waiting on it or following it.

A FIFO makes git (and a plain ``open()``) wait for a writer for ever, a character device
may never end, a link may point anywhere. The readers here open without following and
without blocking, and the checks refuse, by name, a special file where git would read
one: in the object store, its alternates, or a ``.gitattributes`` git is about to read.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from trysquare.errors import RepoError
from trysquare.git.quoting import _unquote

_SMALL = 4096  # .git/HEAD, a gitfile, a loose ref: anything longer is not one


def _read_small(path: Path | str) -> bytes | None:
    """A small regular file's bytes (never through a FIFO or device), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, _SMALL + 1)[:_SMALL]
    finally:
        os.close(fd)


#
# git opens the files it reads with a plain open(): on a FIFO it waits for a writer for
# ever, on a character device it may read without end. No config is needed for that, so
# the shadow does not help: what can be seen beforehand is refused here, by name, and
# every git process runs under git_timeout() for the rest.


def _special(path: bytes | str, mode: int) -> str | None:
    """What ``path`` is when git must not open it ("a FIFO", "a link to a device", ...):
    anything but a regular file or a folder, a link read through (git follows it)."""
    link = stat.S_ISLNK(mode)
    if link:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            return None  # a dangling link: git fails to open it, and says so
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    kind = {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket"}.get(stat.S_IFMT(mode), "a device")
    return f"a link to {kind}" if link else kind


def _refuse_special(path: bytes | str, kind: str) -> RepoError:
    return RepoError(f"{os.fsdecode(path)} is {kind} where git reads a file: git would wait on it")


_ALTERNATES_DEPTH = 5  # as git: alternates of alternates, so deep and no deeper


def _check_object_store(objects: Path) -> None:
    """Refuse an object store holding anything but folders and regular files.

    Loose objects, packs and their indexes, the multi-pack index, commit-graphs, the
    alternates file: git opens any of them, none deeper than ``info/commit-graphs/``, so
    two levels are listed (an entry's type comes with the listing), links read through,
    and the store's alternates followed as git follows them. A folder is listed again
    when it is reached nearer a store's top than before (a link may lead back up).
    """
    nearest: dict[tuple[int, int], int] = {}
    stores = [(os.fsencode(objects), 0)]
    while stores:
        store, depth = stores.pop()
        todo = [(store, 0)]
        while todo:
            folder, level = todo.pop()
            try:
                info = os.stat(folder)
                key = (info.st_dev, info.st_ino)
                if nearest.get(key, 3) <= level:
                    continue
                nearest[key] = level
                entries = list(os.scandir(folder))
            except OSError:
                continue  # unreadable: git cannot open it either, and says so
            for entry in entries:
                if entry.is_file(follow_symlinks=False):
                    continue
                if entry.is_dir(follow_symlinks=True):
                    if level < 2:
                        todo.append((entry.path, level + 1))
                elif kind := _special(entry.path, entry.stat(follow_symlinks=False).st_mode):
                    raise _refuse_special(entry.path, kind)
        if depth < _ALTERNATES_DEPTH:
            # As git: a relative one from this store, through its links (and named so).
            stores.extend(
                (os.path.realpath(os.path.join(store, alt)), depth + 1)
                for alt in _alternates(store)
            )


_ALTERNATES_LIMIT = 1 << 24


def _alternates(store: bytes) -> list[bytes]:
    """The object stores ``<store>/info/alternates`` names, read as git reads them: lines
    split on LF only, ``#`` comments and empty lines skipped, a C-quoted line unquoted
    (kept as it is when it does not unquote), nothing stripped; a link followed."""
    path = os.path.join(store, b"info", b"alternates")
    data = _read_regular(path, _ALTERNATES_LIMIT, follow=True)
    if data is None:  # absent, or not a file (a FIFO here was refused by the listing), or too large
        with contextlib.suppress(OSError):
            if (size := os.stat(path).st_size) > _ALTERNATES_LIMIT:
                raise RepoError(
                    f"{os.fsdecode(path)} holds {size} bytes: too many to be a list of object stores"
                )
        return []
    found: list[bytes] = []
    for line in data.split(b"\n"):
        if not line or line.startswith(b"#"):
            continue
        if line.startswith(b'"'):
            try:
                line = _unquote(line, 0)
            except (ValueError, IndexError):
                pass  # git takes such a line as it is
        found.append(line)
    return found


def _folders_of(paths: Iterable[bytes]) -> set[bytes]:
    """Every folder on the way to each path, the top (b"") included."""
    folders = {b""}
    for path in paths:
        folder = path.rpartition(b"/")[0]
        while folder and folder not in folders:
            folders.add(folder)
            folder = folder.rpartition(b"/")[0]
    return folders


def _check_attribute_files(repo: Path, folders: Iterable[bytes]) -> None:
    """Refuse a ``.gitattributes`` in one of ``folders`` of the work tree that is not a
    file: git reads every one on the way to a path whose attributes it needs."""
    top = os.fsencode(repo)
    for folder in folders:
        path = os.path.join(top, folder, b".gitattributes")
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            continue
        if not stat.S_ISREG(mode) and (kind := _special(path, mode)):
            raise _refuse_special(path, kind)


_LOOSE_LIMIT = 1 << 20


def _read_regular(path: Path | bytes, limit: int, *, follow: bool = False) -> bytes | None:
    """A regular file's bytes, if it holds at most ``limit`` (never through a FIFO; through
    a link only when ``follow``)."""
    nofollow = 0 if follow else getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | nofollow | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        return os.read(fd, limit + 1)[: limit + 1]
    except OSError:
        return None
    finally:
        os.close(fd)

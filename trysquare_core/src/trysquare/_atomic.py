"""Atomic writes that never go through a symlink: a temporary file beside the target, then a rename.

(It is over 600 lines because every read and write of a run folder shares its one no-follow
walk and checks.)

An interrupted command never leaves half a file: readers see the old content or
the new one. Inside a run folder everything but trysquare's own files is the
measured agent's, so a writer given ``root`` (the run folder) opens every folder
below it without following symlinks (``O_NOFOLLOW`` component by component,
through ``dir_fd``): a symlinked ``validation/``, result, history or lock file is
refused with :class:`UnsafePath`, and nothing is written or read through it.
Without ``root`` the file itself is still never a symlink.

A hard link is the other way to give a file of the run another file's content: a
file read, appended to or written in place (a lock) must have one link
(:func:`refuse_hard_link`, the one place that says so), else it is refused as a
symlink is. A file replaced by a rename needs no such check: the rename puts a new
file under the name and leaves the linked one alone. Dependency-free.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from trysquare._indented_json import indented
from trysquare._lazy_pattern import LazyPattern

__all__ = [
    "Folder",
    "UnsafePath",
    "append_line",
    "create_once",
    "dump_json",
    "encode",
    "folder",
    "json_line",
    "last_line",
    "open_lock",
    "read_bytes",
    "refuse_hard_link",
    "remove_stale_temps",
    "write_bytes",
    "write_json",
    "write_stream",
    "write_text",
    "write_text_if_changed",
]

# What a new file gets: the mode any new file gets under this umask.
_UMASK = os.umask(0)
os.umask(_UMASK)
_FILE_MODE = 0o666 & ~_UMASK

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# A temporary file of ours: `.<target name>.<random>.tmp` (mkstemp's or ours). Compiled for
# the first name that starts with a dot and ends in `.tmp` (_temp_shaped): most folders hold
# no such name, and a start then compiles nothing.
_TEMP_NAME = LazyPattern(r"\..+\.[A-Za-z0-9_]{6,16}\.tmp\Z", re.DOTALL)


def _temp_shaped(name: str) -> bool:
    """Whether ``name`` has the shape of one of our temporary files."""
    return name.startswith(".") and name.endswith(".tmp") and _TEMP_NAME.match(name) is not None


_SYMLINK_RULE = "trysquare never writes or reads through a symlink there"
_HARD_LINK_RULE = (
    "another name elsewhere holds the same file (a hard link); trysquare never reads or "
    "appends to a file of a run folder that has more than one link"
)


class UnsafePath(OSError):
    """A path trysquare would write or read is, or goes through, a symlink, or is a file with
    more than one link: refused, never followed."""

    def __init__(self, path: Path, why: str = "is a symlink", rule: str = _SYMLINK_RULE) -> None:
        super().__init__(errno.ELOOP, f"{path} {why}; {rule}")
        self.path = path

    def __str__(self) -> str:
        return str(self.strerror)


def _below(path: Path, root: Path | None) -> tuple[str, tuple[str, ...]]:
    """The folder to start from and the folders to walk down to ``path``'s parent.

    Plain strings: this runs for every file trysquare reads or writes in a run folder.
    """
    absolute = os.path.abspath(path)  # lexical: no ".." is left
    if root is None:
        return os.path.dirname(absolute), ()
    top = os.path.abspath(root)
    prefix = top if top.endswith(os.sep) else top + os.sep
    if not absolute.startswith(prefix):
        why = "is not a file inside" if absolute == top else "is not inside"
        raise UnsafePath(Path(absolute), f"{why} {Path(top)}")
    return top, tuple(absolute[len(prefix) :].split(os.sep)[:-1])


@contextmanager
def _parent_fd(path: Path, root: Path | None, *, create: bool) -> Iterator[int]:
    """An fd on ``path``'s folder, reached from ``root`` without following any symlink."""
    start, parts = _below(path, root)
    if create and root is None:
        os.makedirs(start, exist_ok=True)
    fd = os.open(start, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for depth, part in enumerate(parts):
            child = _step(fd, part, (start, *parts[: depth + 1]), create)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _step(fd: int, name: str, shown: tuple[str, ...], create: bool) -> int:
    """Open folder ``name`` inside ``fd``, refusing a symlink (``shown``: its path's parts, for the error)."""
    flags = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
    try:
        return os.open(name, flags, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK) and _lstat_is_link(fd, name):
            raise UnsafePath(Path(*shown)) from None
        raise
    try:
        os.mkdir(name, dir_fd=fd)
    except FileExistsError:
        pass  # made meanwhile: opened below, still without following
    try:
        return os.open(name, flags, dir_fd=fd)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK) and _lstat_is_link(fd, name):
            raise UnsafePath(Path(*shown)) from None
        raise


def _lstat_is_link(fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _refuse_link(fd: int, name: str, shown: Path) -> None:
    if _lstat_is_link(fd, name):
        raise UnsafePath(shown)


def refuse_hard_link(info: os.stat_result, path: Path, *, links: int = 1) -> None:
    """Raise :class:`UnsafePath` when the file ``info`` describes has more than ``links`` links.

    The agent can leave at a name trysquare reads or appends to a hard link to a file
    elsewhere (its own, of the same user: a shell's rc file, a 0600 secret): an append
    would write into that file and a read would take its content for the run's. Only a
    regular file is checked (a folder's link count is its sub-folders').
    """
    if stat.S_ISREG(info.st_mode) and info.st_nlink > links:
        raise UnsafePath(path, f"has {info.st_nlink} links", _HARD_LINK_RULE)


def _new_temporary(folder: int, name: str, mode: int) -> tuple[str, int]:
    """A new temporary beside ``name`` in ``folder`` (a name nobody holds: never a link
    followed), opened for writing; its name and fd."""
    temp = f".{name}.{os.urandom(6).hex()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    return temp, os.open(temp, flags, mode, dir_fd=folder)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def write_bytes(path: Path, data: bytes, *, root: Path | None = None) -> None:
    """Replace ``path`` with ``data`` atomically, creating its folders (below ``root``)."""
    _replace(Path(path), root, lambda handle: handle.write(data), keep_same=False)


def _replace(
    path: Path, root: Path | None, fill: Callable[[BinaryIO], object], *, keep_same: bool
) -> bool:
    """Write a temporary file beside ``path`` with ``fill``, then rename it over ``path``.

    With ``keep_same``, an identical file already there stays (and keeps its mtime).
    Returns whether ``path`` was replaced.
    """
    with _parent_fd(path, root, create=True) as fd:
        return Folder(fd, path.parent).replace(path.name, fill, keep_same=keep_same)


def encode(text: str) -> bytes:
    """``text`` as UTF-8 to write: a lone surrogate (a name that was not UTF-8, a broken
    reply) never stops a write."""
    return text.encode("utf-8", errors="backslashreplace")


def write_text(path: Path, text: str, *, root: Path | None = None) -> None:
    write_bytes(path, encode(text), root=root)


def _open_read(path: Path, root: Path | None) -> int:
    with _parent_fd(path, root, create=False) as fd:
        return Folder(fd, path.parent).open_read(path.name)


def _open_read_sized(path: Path, root: Path | None) -> tuple[int, int]:
    with _parent_fd(path, root, create=False) as fd:
        return Folder(fd, path.parent).open_read_sized(path.name)


def read_bytes(path: Path, *, root: Path | None = None) -> bytes:
    """The bytes of ``path``, reached from ``root`` without following any symlink.

    :class:`FileNotFoundError` when it (or a folder on the way) is absent,
    :class:`UnsafePath` when a symlink is on the way.
    """
    # A path given is used as it is: building it again parses its text again.
    fd, size = _open_read_sized(path if isinstance(path, Path) else Path(path), root)
    try:
        return _read_all(fd, size_hint=size)
    finally:
        os.close(fd)


def write_text_if_changed(path: Path, text: str, *, root: Path | None = None) -> None:
    """Write only when the content differs, so an unchanged file keeps its mtime."""
    data = encode(text)
    try:
        if read_bytes(path, root=root) == data:
            return
    except UnsafePath:
        raise
    except OSError:
        pass
    write_bytes(path, data, root=root)


def dump_json(value: Any, *, compact: bool = False) -> str:
    """The stable JSON trysquare writes: sorted keys, two-space indent, final newline.

    ``compact`` writes one line instead: json's C encoder does it. The indented text is
    json's, written by :mod:`trysquare._indented_json` (json's own indented dump is a
    pure-Python generator) and by json's encoder only for what that module leaves to it.
    Text that cannot be UTF-8 (a lone surrogate) is written with ASCII escapes,
    which any JSON reader turns back into the same string.
    """
    text = _encoded(value, compact, False) + "\n"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = _encoded(value, compact, True) + "\n"
    return text


def _encoded(value: Any, compact: bool, ascii_only: bool) -> str:
    # Indented: the same text as json's encoder, without its pure-Python generator.
    text = None if compact else indented(value, ascii_only=ascii_only)
    return _ENCODERS[compact, ascii_only].encode(value) if text is None else text


# The encoders json.dumps would build for dump_json's arguments, built once: every result,
# context and marker written went through building one (what they write is the same).
_ENCODERS = {
    (compact, ascii_only): json.JSONEncoder(
        indent=None if compact else 2, sort_keys=True, ensure_ascii=ascii_only, allow_nan=False
    )
    for compact in (False, True)
    for ascii_only in (False, True)
}


def write_json(path: Path, value: Any, *, root: Path | None = None, compact: bool = False) -> None:
    write_text(path, dump_json(value, compact=compact), root=root)


def append_line(path: Path, value: Any, *, root: Path | None = None) -> None:
    """Append one JSON line; a single ``write`` of a whole line, so lines never interleave."""
    path = Path(path)
    with _parent_fd(path, root, create=True) as fd:
        Folder(fd, path.parent).append(path.name, json_line(value))


def json_line(value: Any) -> bytes:
    """``value`` as one line of a JSON-lines file (a history): sorted keys, ASCII escapes
    (a line never fails on a lone surrogate), newline excluded."""
    return _LINE.encode(value).encode("ascii")


_LINE = json.JSONEncoder(sort_keys=True, ensure_ascii=True)


def last_line(path: Path, *, root: Path | None = None) -> bytes | None:
    """The last complete line of ``path`` (without its newline); ``None`` when there is none."""
    path = Path(path)
    try:
        with _parent_fd(path, root, create=False) as fd:
            return Folder(fd, path.parent).last_line(path.name)
    except FileNotFoundError:
        return None


@contextmanager
def folder(path: Path, *, root: Path) -> Iterator[Folder]:
    """The folder ``path`` below ``root``, created if absent, reached without following any
    symlink: several files in it are then read and written through one walk."""
    path = Path(path)
    with _parent_fd(path / "_", root, create=True) as fd:
        yield Folder(fd, path)


class Folder:
    """An open folder: each method takes a plain name inside it and never follows a symlink
    there (:class:`UnsafePath`, naming ``path / name``)."""

    __slots__ = ("fd", "path")

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path  # only for what errors say

    def open_read(self, name: str, *, links: int = 1) -> int:
        """A read-only fd on the regular file ``name`` (:class:`FileNotFoundError` when
        absent, :class:`UnsafePath` when a symlink, not a regular file, or a file with more
        than ``links`` links)."""
        return self.open_read_sized(name, links=links)[0]

    def open_read_sized(self, name: str, *, links: int = 1) -> tuple[int, int]:
        """:meth:`open_read`, and the file's size as its open fd says (what to read at once)."""
        try:
            # Non-blocking: a FIFO planted where a file was would otherwise hang the open.
            fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC, dir_fd=self.fd)
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.EMLINK) and _lstat_is_link(self.fd, name):
                raise UnsafePath(self.path / name) from None
            raise
        info = os.fstat(fd)
        try:
            if not stat.S_ISREG(info.st_mode):
                raise UnsafePath(self.path / name, "is not a regular file")
            if info.st_nlink > links:  # the path said only when refused: this runs per file read
                refuse_hard_link(info, self.path / name, links=links)
        except UnsafePath:
            os.close(fd)
            raise
        return fd, info.st_size

    def read(self, name: str, *, links: int = 1) -> bytes:
        """The bytes of ``name`` (:class:`FileNotFoundError` when absent)."""
        fd, size = self.open_read_sized(name, links=links)
        try:
            return _read_all(fd, size_hint=size)
        finally:
            os.close(fd)

    def holds(self, name: str, data: bytes) -> bool:
        """Whether ``name`` is a file holding exactly ``data`` (``False`` when absent)."""
        try:
            fd, size = self.open_read_sized(name)
        except FileNotFoundError:
            return False
        try:
            # A regular file (open_read_sized refused anything else) of another size differs
            # already; one of none holds nothing more to read.
            if size != len(data):
                return False
            # One byte more than expected tells a file grown meanwhile apart.
            return not data or _read_all(fd, len(data) + 1) == data
        finally:
            os.close(fd)

    def write(self, name: str, data: bytes) -> None:
        """Replace ``name`` with ``data`` atomically (a temporary file renamed into place)."""
        self._replace(name, data, keep_same=False)

    def replace(self, name: str, fill: Callable[[BinaryIO], object], *, keep_same: bool) -> bool:
        """Replace ``name`` with what ``fill`` writes; see :func:`_replace`."""
        return self._replace(name, fill, keep_same=keep_same)

    def _replace(
        self, name: str, content: bytes | Callable[[BinaryIO], object], *, keep_same: bool
    ) -> bool:
        # Bytes already in hand are written to the fd as they are: no buffered file object
        # (its fstat, lseek and ioctl) for a result written once per task.
        folder = self.fd
        # Renaming over a symlink would replace the link, not its target; it is
        # refused all the same, since the agent put it there to be followed.
        _refuse_link(folder, name, self.path / name)
        temp, fd = _new_temporary(folder, name, 0o600)
        try:
            if isinstance(content, bytes):
                try:
                    _write_all(fd, content)
                    os.fchmod(fd, _FILE_MODE)
                finally:
                    os.close(fd)
            else:
                with os.fdopen(fd, "wb") as handle:
                    content(handle)
                    os.fchmod(handle.fileno(), _FILE_MODE)
            if keep_same and _same_file_content(folder, temp, name):
                os.unlink(temp, dir_fd=folder)
                return False
            os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
            return True
        except BaseException:
            try:
                os.unlink(temp, dir_fd=folder)
            except OSError:
                pass
            raise

    def append(self, name: str, line: bytes) -> None:
        """Append ``line`` and a newline to ``name`` (created if absent) in a single ``write``,
        refusing a symlink, a file with more than one link, anything but a regular file."""
        fd, _ = self._open_appending(name, os.O_WRONLY)
        try:
            _write_all(fd, line + b"\n")
        finally:
            os.close(fd)

    def _open_appending(self, name: str, access: int) -> tuple[int, int]:
        """``name`` opened to append (created if absent) and its size, checked on the open
        file (the name may have been swapped since any earlier look): a plain file with one
        link."""
        try:
            # Non-blocking: a FIFO planted there is refused below, never waited on.
            fd = os.open(
                name,
                access | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC,
                0o666,
                dir_fd=self.fd,
            )
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.EMLINK) and _lstat_is_link(self.fd, name):
                raise UnsafePath(self.path / name) from None
            if error.errno in (errno.EISDIR, errno.ENXIO):  # a folder, a FIFO, a socket
                raise UnsafePath(self.path / name, "is not a regular file") from None
            raise
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise UnsafePath(self.path / name, "is not a regular file")
            refuse_hard_link(info, self.path / name)
        except BaseException:
            os.close(fd)
            raise
        return fd, info.st_size

    def last_line(self, name: str) -> bytes | None:
        """The last complete line of ``name`` (without its newline); ``None`` when there is none."""
        try:
            fd = self.open_read(name)
        except FileNotFoundError:
            return None
        try:
            return _last_line_of(fd, os.lseek(fd, 0, os.SEEK_END))
        finally:
            os.close(fd)

    def append_once(self, name: str, line: bytes) -> None:
        """:meth:`append`, unless ``line`` is the file's last complete line already: one
        open serves both (a kill between an append and what follows leaves it there)."""
        fd, size = self._open_appending(name, os.O_RDWR)
        try:
            if size and _last_line_of(fd, size) == line:
                return
            _write_all(fd, line + b"\n")
        finally:
            os.close(fd)


def _last_line_of(fd: int, end: int) -> bytes | None:
    """The last complete line of the first ``end`` bytes of ``fd`` (without its newline),
    read back from the end only as far as the newline before it: a long history costs no
    more than its last line. A torn last line (a kill mid-append) has no newline: it is not
    a line."""
    position = end
    tail = b""
    step = 4096  # a line or two of a history; doubled while no whole line is in hand
    while position > 0:
        taken = min(step, position)
        position -= taken
        tail = os.pread(fd, taken, position) + tail
        step *= 2
        last_newline = tail.rfind(b"\n")
        if last_newline == -1:
            continue
        before = tail.rfind(b"\n", 0, last_newline)
        if before != -1:
            return tail[before + 1 : last_newline]
    last_newline = tail.rfind(b"\n")
    return None if last_newline == -1 else tail[:last_newline]


def _read_all(fd: int, limit: int | None = None, *, size_hint: int | None = None) -> bytes:
    """What is left to read of ``fd``, at most ``limit`` bytes: one ``read`` for a small file.

    ``size_hint`` (the size an fstat gave): the first ``read`` asks for one byte more, so a
    file that did not grow meanwhile is read whole without a megabyte buffer being made.
    """
    parts = []
    if size_hint is not None and limit is None:
        first = os.read(fd, size_hint + 1)
        if len(first) == size_hint:
            return first  # the whole file: asked for one byte more, the end came first
        parts.append(first)  # it changed size meanwhile: the rest is read below
    left = limit
    while left is None or left > 0:
        chunk = os.read(fd, 1 << 20 if left is None else min(left, 1 << 20))
        if not chunk:
            break
        parts.append(chunk)
        if left is not None:
            left -= len(chunk)
    return b"".join(parts)


def open_lock(path: Path, *, root: Path) -> int:
    """A read-write fd on lock file ``path`` below ``root``, created if absent, never a symlink,
    never anything but a regular file (:class:`UnsafePath`), opened without blocking."""
    path = Path(path)
    with _parent_fd(path, root, create=True) as folder:
        try:
            fd = os.open(
                path.name,
                os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC,
                0o666,
                dir_fd=folder,
            )
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.EMLINK) and _lstat_is_link(folder, path.name):
                raise UnsafePath(path) from None
            if error.errno in (errno.EISDIR, errno.ENXIO):  # a folder, a socket
                raise UnsafePath(path, "is not a regular file") from None
            raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UnsafePath(path, "is not a regular file")
    try:
        # The holder's pid is written into it in place (truncated first).
        refuse_hard_link(info, path)
    except UnsafePath:
        os.close(fd)
        raise
    return fd


def create_once(path: Path, data: bytes, *, root: Path, mode: int = 0o600) -> bytes:
    """Create ``path`` below ``root`` holding ``data`` unless it exists; return what it holds.

    Two processes racing get the same content: the file appears whole (a
    temporary file hard-linked into place, which fails when the name exists).
    Never through a symlink.
    """
    path = Path(path)
    with _parent_fd(path, root, create=True) as folder:
        temp, fd = _new_temporary(folder, path.name, mode)
        try:
            try:
                _write_all(fd, data)
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
            try:
                os.link(
                    temp, path.name, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False
                )
            except FileExistsError:
                pass
        finally:
            os.unlink(temp, dir_fd=folder)
        # Two links are allowed here alone: another process that made the file the same way
        # may not have removed its temporary name yet.
        return Folder(folder, path.parent).read(path.name, links=2)


def remove(path: Path, *, root: Path | None = None) -> None:
    """Delete the file ``path`` below ``root`` (a symlink itself, never its target).

    :class:`FileNotFoundError` when it is absent.
    """
    path = Path(path)
    with _parent_fd(path, root, create=False) as folder:
        os.unlink(path.name, dir_fd=folder)


def remove_stale_temps(folder: Path, *, root: Path) -> list[str]:
    """Delete the temporary files a killed writer left in ``folder`` (below ``root``).

    Only names of our own shape (``.<name>.<random>.tmp``) go; a symlinked or
    absent folder is left alone. Call it only while holding the lock on ``root``.
    """
    removed: list[str] = []
    # Most folders hold no litter: a plain listing says so without the no-follow walk
    # from ``root`` (a third of a replay's planning). It only reads names; whatever is
    # removed is still found and unlinked through that walk below.
    try:
        # Names alone (no entry objects), each tried against the temporary files' shape.
        if not any(_temp_shaped(name) for name in os.listdir(folder)):
            return removed
    except OSError:
        return removed  # absent, not a folder, or unreadable: nothing of ours to remove
    try:
        with _parent_fd(Path(folder) / "x", root, create=False) as fd:
            with os.scandir(fd) as entries:
                names = [
                    e.name
                    for e in entries
                    if _temp_shaped(e.name) and e.is_file(follow_symlinks=False)
                ]
            for name in names:
                try:
                    os.unlink(name, dir_fd=fd)
                    removed.append(name)
                except OSError:
                    pass
    except (FileNotFoundError, NotADirectoryError, UnsafePath):
        pass
    return removed


def _same_file_content(folder: int, first: str, second: str) -> bool:
    """Whether two files in ``folder`` hold the same bytes (compared in blocks, never whole)."""
    try:
        a = os.open(first, os.O_RDONLY | _NOFOLLOW | _CLOEXEC, dir_fd=folder)
    except OSError:
        return False
    try:
        try:
            b = os.open(second, os.O_RDONLY | _NOFOLLOW | _CLOEXEC, dir_fd=folder)
        except OSError:
            return False
        try:
            kept = os.fstat(b)
            # A file with another name elsewhere is replaced, never kept: what is read
            # through this name later must be what trysquare wrote, not a file that changes.
            if os.fstat(a).st_size != kept.st_size or kept.st_nlink > 1:
                return False
            while True:
                # Small blocks: two files of any size cost 128 KiB here.
                block_a, block_b = os.read(a, 1 << 16), os.read(b, 1 << 16)
                if block_a != block_b:
                    return False
                if not block_a:
                    return True
        finally:
            os.close(b)
    finally:
        os.close(a)


def write_stream(
    path: Path, fill: Callable[[BinaryIO], object], *, root: Path | None = None
) -> bool:
    """Replace ``path`` atomically with what ``fill(handle)`` writes, never held in memory.

    Like :func:`write_text_if_changed`: when the result equals the file already
    there (compared in blocks), the old file stays and keeps its mtime. Never
    through a symlink (below ``root`` when given). Returns whether ``path`` was replaced.
    """
    return _replace(Path(path), root, fill, keep_same=True)

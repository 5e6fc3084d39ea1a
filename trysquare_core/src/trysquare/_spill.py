"""Records a ``validate`` keeps on disk instead of in memory, read back only as written.

Planning decides, for every run, what must run and how its clone looked before the
first validator started; at 10,000 runs of a large repository that does not fit in
memory, and it is needed again only when that run's tasks are built and when its
clone is checked after. Each record is appended to one file that has no name (made
nameless, or unlinked as soon as it is made: a ``validate`` killed outright leaves no file
behind, and no process finds it by a path) and known by its number; where it lies and its digest
stay in memory (48 bytes in two arrays) and it is read back only if its bytes still have
it, so a record altered meanwhile (by a validator where no sandbox prevents it) is never
trusted. One file, not a file per record: making a file costs the kernel far more than
appending to one, and planning keeps a record for every run.
"""

from __future__ import annotations

import marshal
import os
import tempfile
import threading
from array import array
from typing import Any, Self

from trysquare._digests import sha256

__all__ = ["Spill", "Tampered"]


class Tampered(Exception):
    """A kept record no longer holds what was written."""


class Spill:
    """Records (plain data: what :mod:`marshal` writes) in one nameless file, by number."""

    def __init__(self) -> None:
        self.folder = tempfile.gettempdir()  # said in an error: the file itself has no name
        # Read back by position (pread) through this descriptor alone, never by name.
        self._fd = _nameless_file(self.folder)
        self._end = 0  # where the next record goes
        self._where = array("q")  # per record: its offset and its length
        self._digests = bytearray()
        self._growing = threading.Lock()  # planning threads keep records together

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def keep(self, value: Any) -> int:
        """Write ``value`` (None, bool, int, float, str, bytes, tuple, list, dict of those);
        return its number."""
        data = marshal.dumps(value)
        digest = sha256(data).digest()
        with self._growing:
            number = len(self._where) // 2
            offset = self._end
            self._end += len(data)
            self._where.extend((offset, len(data)))
            self._digests += digest
        # Its own stretch of the file, reserved above: writers never overlap.
        view = memoryview(data)
        while view:
            written = os.pwrite(self._fd, view, offset)
            view, offset = view[written:], offset + written
        return number

    def load(self, number: int) -> Any:
        """The value kept as ``number``; :class:`Tampered` when the file no longer holds it."""
        with self._growing:
            offset, length = self._where[2 * number], self._where[2 * number + 1]
            digest = bytes(self._digests[32 * number : 32 * number + 32])
        try:
            data = os.pread(self._fd, length, offset)
        except OSError as error:
            raise Tampered(
                f"planning's records in {self.folder} cannot be read ({error.strerror})"
            ) from None
        if sha256(data).digest() != digest:
            raise Tampered(f"planning's records in {self.folder} were changed (record {number})")
        return marshal.loads(data)  # checked first: marshal reads only what was written here


def _nameless_file(folder: str) -> int:
    """A new file readable and writable by this process alone, with no name in ``folder``: made
    so where the file system can (``O_TMPFILE``), else made under a fresh name and unlinked."""
    flags = os.O_RDWR | os.O_CLOEXEC
    nameless = getattr(os, "O_TMPFILE", 0)
    if nameless:
        try:
            return os.open(folder, flags | nameless, 0o600)
        except OSError:
            pass  # a file system without it (EOPNOTSUPP, EISDIR on old kernels): named, then not
    fd, path = tempfile.mkstemp(prefix="trysquare-plan-", dir=folder)
    os.unlink(path)
    return fd

"""Records a ``validate`` keeps on disk instead of in memory, read back only as written.

Planning decides, for every run, what must run and how its clone looked before the
first validator started; at 10,000 runs of a large repository that does not fit in
memory, and it is needed again only when that run's tasks are built and when its
clone is checked after. Each record is written to a private folder (mode 0700,
removed at the end) and known by its number; its digest stays in memory (32 bytes
in one array) and it is read back only if its bytes still have it, so a record
altered meanwhile (by a validator where no sandbox prevents it) is never trusted.
"""

from __future__ import annotations

import hashlib
import itertools
import marshal
import os
import shutil
import tempfile
import threading
from typing import Any, Self

__all__ = ["Spill", "Tampered"]


class Tampered(Exception):
    """A kept record no longer holds what was written."""


class Spill:
    """A private folder of records (plain data: what :mod:`marshal` writes), one file each."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="trysquare-plan-")
        self._numbers = itertools.count()  # next() on it is atomic: planning threads share it
        self._digests = bytearray()
        self._growing = threading.Lock()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def keep(self, value: Any) -> int:
        """Write ``value`` (None, bool, int, float, str, bytes, tuple, list, dict of those);
        return its number."""
        data = marshal.dumps(value)
        number = next(self._numbers)
        with open(self._path(number), "xb") as handle:  # a fresh name in a folder of our own
            handle.write(data)
        with self._growing:
            end = 32 * (number + 1)
            if len(self._digests) < end:
                self._digests.extend(bytes(end - len(self._digests)))
            self._digests[end - 32 : end] = hashlib.sha256(data).digest()
        return number

    def load(self, number: int) -> Any:
        """The value kept as ``number``; :class:`Tampered` when its file no longer holds it."""
        path = self._path(number)
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError as error:
            raise Tampered(f"{path} cannot be read ({error.strerror})") from None
        if hashlib.sha256(data).digest() != bytes(self._digests[32 * number : 32 * number + 32]):
            raise Tampered(f"{path} was changed")
        return marshal.loads(data)  # checked first: marshal reads only what was written here

    def _path(self, number: int) -> str:
        # A string, not a Path: pathlib interns every part, and 10,000 names would stay.
        return os.path.join(self.folder, f"{number}.record")

"""A child's output pipes read to their ends, at most so many bytes of each kept: the one
reader of the cold path (:mod:`trysquare._process`) and the warm one (:mod:`trysquare._warm`)."""

from __future__ import annotations

import os
from collections.abc import Sequence

# Bytes of a child's stdout and of its stderr kept (each); the rest is dropped. With the
# tail's sizes, named by trysquare.api too, which imports them from here rather than load
# the process runner (every plugin imports the api as it registers).
DEFAULT_CAP = 16 * 1024 * 1024
# What a tail of a child's output keeps: its last lines, and at most these characters.
TAIL_LINES = 30
TAIL_CHARS = 3000


class CappedOutput:
    """A child's output pipes read to their ends, at most ``cap`` bytes of each kept (the
    rest counted, so :attr:`truncated` says a pipe said more)."""

    def __init__(self, fds: Sequence[int], cap: int) -> None:
        self.cap = cap
        self._chunks: dict[int, list[bytes]] = {fd: [] for fd in fds}
        self._sizes = dict.fromkeys(fds, 0)
        self.truncated = False

    def read(self, fd: int) -> bool:
        """Take what ``fd`` holds now; ``False`` once it has ended."""
        data = os.read(fd, 1 << 16)
        if not data:
            return False
        room = self.cap - self._sizes[fd]
        if room > 0:
            self._chunks[fd].append(data[:room])
        if len(data) > room:
            self.truncated = True
        self._sizes[fd] += len(data)
        return True

    def kept(self, fd: int) -> bytes:
        """What was kept of ``fd``."""
        return b"".join(self._chunks[fd])

"""Why one ``validate`` starts no further task: the user asked, the disk filled, or ``-x``.

Each call of :func:`trysquare.runner.validate` owns one :class:`StopState`; nothing of it
lives at module level, so two validates in one process (a test, a notebook, a service)
never stop each other.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable

__all__ = ["StopState", "is_no_space"]


def is_no_space(error: OSError) -> bool:
    """Whether a failed write met a full disk (then no further task starts)."""
    return error.errno == errno.ENOSPC


class StopState:
    """The stop state of one ``validate``: read by every thread that may start a task."""

    def __init__(self, user_asked: Callable[[], bool] = lambda: False) -> None:
        self._user_asked = user_asked
        # Events, not booleans: set from worker and planning threads, read from every other.
        self._disk_full = threading.Event()
        self._first_invalid = threading.Event()

    def user_asked(self) -> bool:
        """Whether the user asked to stop (SIGINT/SIGTERM, or the caller's ``should_stop``)."""
        return self._user_asked()

    @property
    def disk_full(self) -> bool:
        return self._disk_full.is_set()

    @property
    def first_invalid(self) -> bool:
        return self._first_invalid.is_set()

    def note_disk_full(self) -> None:
        self._disk_full.set()

    def note_first_invalid(self) -> bool:
        """``-x`` met an invalid result; ``True`` only for the first one."""
        if self._first_invalid.is_set():
            return False
        self._first_invalid.set()
        return True

    def note_write_failure(self, error: OSError) -> None:
        """A read or write of one run's data failed: a full disk stops every further task."""
        if is_no_space(error):
            self._disk_full.set()

    def should_stop(self) -> bool:
        """Whether no further task may start, for whatever reason."""
        return self.user_asked() or self.disk_full or self.first_invalid

    @property
    def complete(self) -> bool:
        """Whether nothing cut this validate short."""
        return not (self.user_asked() or self.disk_full or self.first_invalid)

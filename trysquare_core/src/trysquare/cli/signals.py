"""SIGINT and SIGTERM: a command stops what it does, says so, and is ended if it cannot."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

# After SIGINT or SIGTERM a command stops what it does and says so; should it still be
# waiting this many seconds later (a blocking open, a plugin's hook), it is ended.
SIGNAL_GRACE = 5.0


class _Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM, raised where the main thread is (exit ``128 + signum``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_deadline_armed: list[int] = []


def arm_signal_deadline(signum: int) -> None:
    """End this process ``SIGNAL_GRACE`` seconds after signal ``signum`` unless it ended by then.

    Python runs a signal handler only between bytecodes of the main thread: a thread
    waiting in a system call (an open on a FIFO, a plugin's socket) retries it after the
    handler, and a worker thread is never interrupted. Writes are atomic renames, so
    ending here leaves what a ``kill -9`` leaves: nothing torn, temporary files the next
    start sweeps.
    """
    if _deadline_armed:
        return
    _deadline_armed.append(signum)

    def end() -> None:
        name = signal.Signals(signum).name
        os.write(
            2,
            (
                f"trysquare: interrupted: still busy {SIGNAL_GRACE:g} s after {name}; ended without "
                "finishing (nothing half-written is kept)\n"
            ).encode(),
        )
        os._exit(128 + signum)

    import threading

    timer = threading.Timer(SIGNAL_GRACE, end)
    timer.daemon = True
    timer.start()


def _interrupt(signum: int, _frame: Any) -> None:
    arm_signal_deadline(signum)
    process = sys.modules.get("trysquare._process")
    if process is not None:
        process.kill_all()  # children this command started end with it
    raise _Interrupted(signum)

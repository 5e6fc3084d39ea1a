"""The first collection of a fresh checkout runs alone, so its bytecode is compiled once.

Collecting the suite imports some two hundred test modules, trysquare and the libraries they
use. On a fresh clone none of them has bytecode yet, and the xdist workers, started together,
each compiled all of it (assertion rewriting included) at the same time: the bytecode was
compiled once per worker and thrown away by all but the last to write it. The first worker to
find no mark of a finished collection now collects holding a lock, and leaves the mark; the
others wait for it, then collect together from its bytecode. Once the mark is there (every
later run of the suite in this environment), nobody waits.
"""

from __future__ import annotations

import contextlib
import fcntl
import sys
from collections.abc import Iterator
from pathlib import Path

MARK_NAME = ".trysquare-tests-collected"


def bytecode_home() -> Path | None:
    """Where this interpreter keeps the bytecode it writes (the pycache prefix, else its
    environment); None when it writes none, and there is nothing to share."""
    if sys.dont_write_bytecode:
        return None
    return Path(sys.pycache_prefix or sys.prefix)


@contextlib.contextmanager
def collecting(home: Path | None) -> Iterator[None]:
    """Collect inside this: alone and leaving the mark in ``home`` when no collection has
    finished there yet, else at once."""
    mark = home / MARK_NAME if home is not None else None
    if mark is None or mark.exists():
        yield
        return
    try:
        lock = open(mark.with_name(MARK_NAME + ".lock"), "a", encoding="utf-8")  # noqa: SIM115 (a with below closes it)
    except OSError:  # a read-only environment: collect as before
        yield
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # blocks while the first collector holds it
        if mark.exists():
            fcntl.flock(lock, fcntl.LOCK_UN)
            yield
            return
        yield  # the first: collect holding the lock; an error leaves no mark
        with contextlib.suppress(OSError):
            mark.touch()

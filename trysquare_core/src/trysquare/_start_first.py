"""Starting a child comes first: trysquare's background work waits while a worker starts one.

Between two validators a worker thread reaps one child and starts the next, and every step
of that needs the interpreter. Recording results, building tasks ahead, planning and checking
clones run in other threads meanwhile; on a machine of few cores each of their system calls
hands the interpreter back and forth with the worker's, so a start inside ``validate`` took
several times as long as the same start alone, and the gap between two validators grew with it.

So a worker says when it is between children (:func:`between_children`, as it hands a result
over) and when the next child has started (:func:`child_started`); a background thread about
to begin a unit of work calls :func:`after_starts`, which waits while any worker is between
children, a few milliseconds at most (a start that is slow for its own reasons, a jail's,
never holds the recording up for long). Nothing waits on a worker: a worker never waits here.
"""

from __future__ import annotations

import threading

__all__ = ["after_starts", "between_children", "child_started"]

# Longer than an ordinary confined start, short beside a validator's run.
WAIT_AT_MOST = 0.005

_between: set[int] = set()  # the worker threads between two children, by ident
_changed = threading.Condition()


def between_children() -> None:
    """The calling worker has a child's result and is about to start its next child."""
    with _changed:
        _between.add(threading.get_ident())


def child_started() -> None:
    """The calling worker's child has started (or it starts none now)."""
    if not _between:  # the common case costs no lock
        return
    with _changed:
        _between.discard(threading.get_ident())
        if not _between:
            _changed.notify_all()


def after_starts() -> None:
    """Wait, :data:`WAIT_AT_MOST` seconds at most, while a worker is starting a child."""
    if not _between:
        return
    with _changed:
        _changed.wait_for(lambda: not _between, timeout=WAIT_AT_MOST)

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

Better still, what would wake another thread is not done while the worker is between children:
the result goes to the recording thread, and the task builder is told there is room for the
next task, once the next child has started (:func:`when_started`; at once when the worker
starts none, or is about to wait for anything another thread does).

A worker thread (:func:`worker_thread`) is between children from the moment its child has
exited (:func:`child_exited`, said by :func:`trysquare._process.run_process` once nothing the
child started is left), not only once its result is worked out: what the validation does after
its child's exit that the next start does not need (emptying the scratch folder) is put off
until that start too.

Only where a core is left beside the workers (fewer worker threads than cores) does anything
wait: with a worker on every core, one is between children as often as not and waiting only
held the other threads back (:func:`every_core_has_a_worker`). What is put off until a start is
put off all the same.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from trysquare._pool import core_left_beside

__all__ = [
    "after_starts",
    "between_children",
    "child_exited",
    "child_started",
    "every_core_has_a_worker",
    "hand_over_all",
    "task_ended",
    "when_started",
    "worker_ended",
    "worker_thread",
]

# Longer than an ordinary confined start, short beside a validator's run.
WAIT_AT_MOST = 0.005

_between: set[int] = set()  # the worker threads between two children, by ident
# What each of them put off until its next child has started (when_started), in order.
_put_off: dict[int, list[Callable[[], None]]] = {}
_changed = threading.Condition()
# How many worker threads (worker_thread) run in this process.
_workers = [0]
# Set in a thread that starts one child after another (a local pool's worker).
_thread_kind = threading.local()


def worker_thread() -> None:
    """The calling thread starts validators one after another (a local pool's worker): from
    now on it is between children as soon as a child it waited for has exited. Said once, at
    its start; :func:`worker_ended` as it ends."""
    _thread_kind.worker = True
    with _changed:
        _workers[0] += 1


def worker_ended() -> None:
    """The calling worker thread starts no more validators."""
    _thread_kind.worker = False
    with _changed:
        _workers[0] -= 1


def child_exited() -> None:
    """The calling thread's child has exited and nothing it started is left: a worker thread
    is between children from now on (what it puts off waits for its next start)."""
    if getattr(_thread_kind, "worker", False):
        _thread_kind.exited = True
        between_children()


def task_ended() -> None:
    """The calling worker's task is over: what it put off goes now if the task started no
    child (what an earlier task handed over waits no longer); after a child's exit it waits
    for the next start."""
    if getattr(_thread_kind, "exited", False):
        _thread_kind.exited = False
        return
    child_started()


def between_children(hand_over: Callable[[], None] | None = None) -> None:
    """The calling worker has a child's result and is about to start its next child.

    ``hand_over``: how the result goes to the thread recording it, called once that next
    child has started (:func:`when_started`): the recording thread is not even woken while
    the worker is between children.
    """
    me = threading.get_ident()
    with _changed:
        _between.add(me)
        if hand_over is not None:
            _put_off.setdefault(me, []).append(hand_over)


def when_started(action: Callable[[], None]) -> None:
    """Call ``action`` once the calling worker's next child has started (or it starts none,
    or it is about to wait for something): at once when it is not between children. What
    would wake another thread (a result handed over, room made for the next task) waits so."""
    me = threading.get_ident()
    with _changed:
        if me in _between:
            _put_off.setdefault(me, []).append(action)
            return
    action()


def child_started() -> None:
    """The calling worker's child has started (or it starts none now, or it is about to
    wait): what it put off goes now, in order."""
    if not _between:  # the common case costs no lock
        return
    me = threading.get_ident()
    with _changed:
        _between.discard(me)
        put_off = _put_off.pop(me, ())
        if not _between:
            _changed.notify_all()
    for action in put_off:
        action()


def hand_over_all() -> None:
    """What every worker put off goes now, from the calling thread: an invalid result is about
    to be handed over (``-x`` may stop on it), and what other workers finished before it is
    handed over first, never dropped behind it."""
    with _changed:
        put_off = [action for actions in _put_off.values() for action in actions]
        _put_off.clear()
    for action in put_off:
        action()


def after_starts() -> None:
    """Wait, :data:`WAIT_AT_MOST` seconds at most, while a worker is starting a child; not
    where there are as many workers as cores (:func:`every_core_has_a_worker`)."""
    if not _between or every_core_has_a_worker():
        return
    with _changed:
        _changed.wait_for(lambda: not _between, timeout=WAIT_AT_MOST)


def every_core_has_a_worker() -> bool:
    """Whether this process runs as many worker threads as it has cores (``--jobs`` at its
    default). Then a validator runs on every core nearly all the time, one worker or another
    is between two children as often as not, and a start competes with the other validators
    for its core whatever trysquare's other threads do: holding the recording and planning
    back only made them wait out the bound again and again, and cost more CPU than it saved
    (a cold replay at two jobs on two cores)."""
    return not core_left_beside(_workers[0])

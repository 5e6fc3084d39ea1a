"""A task prepared ahead: everything up to its child's start is done while the slot's
previous child runs, and the child is started only at the go.

At one job the time between one validator's exit and the next one's start is trysquare's
alone, and most of what it did there does not need the previous child's end: taking the next
task, its scratch folder, environment and argv, the pipes, the Landlock ruleset and the
thread confined to it. So the local pool (:mod:`trysquare.executors`) gives every slot a
second thread: one runs a task's child while the other takes the next task and runs it up to
that start, then waits at its *gate*. The go comes when a slot is free and no invalid result
waits to be handed over (``-x``); only then is the in-flight marker written and the child
started. When the go never comes (a stop, ``-x``, the end) the gate raises
:class:`NotStarted`: what was prepared is undone on the way out (the confined thread ends,
the pipes close, the scratch folder goes back), no marker was written, nothing is recorded.

This module is where the pool and the code starting a child meet: the pool sets the calling
thread's gate (:func:`gated`), and whatever starts the task's child takes it just before the
start (:func:`take`, once: a second child of the same task runs under the same go).
Anything the task writes where trysquare's results live waits for the go too
(:func:`go_now`). Dependency-free.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

__all__ = ["Gate", "NotStarted", "gated", "go_now", "lane", "set_lane", "take"]


class Gate(Protocol):
    """One prepared task's way to its start."""

    def go(self) -> None:
        """Wait for the go (then the task counts as running and its marker is written), or
        raise :class:`NotStarted`."""

    def started(self) -> None:
        """The task's child has started (or its start failed): the slot's other thread may
        go on."""

    def ended(self) -> None:
        """The task's child has been reaped, everything it started ended and its output read:
        what the next start needed of it. (The pool may give the next task its go now.)"""


class NotStarted(BaseException):
    """The go never came: the prepared task did not start and nothing of it is recorded.

    A ``BaseException``: no mode's ``except Exception`` may turn it into an invalid result.
    """


_local = threading.local()


@contextmanager
def gated(gate: Gate) -> Iterator[None]:
    """While inside, the calling thread's next child starts at ``gate``'s go."""
    _local.gate = gate
    try:
        yield
    finally:
        _local.gate = None


def take() -> Gate | None:
    """The calling thread's gate, once (``None``: none is set, or it was taken)."""
    gate: Gate | None = getattr(_local, "gate", None)
    if gate is not None:
        _local.gate = None
    return gate


def go_now() -> None:
    """Wait for the go here, if the calling thread's task is still waiting for it: what comes
    next writes where a task that never starts must leave nothing (a run's folder)."""
    gate = take()
    if gate is not None:
        gate.go()
        gate.started()


def set_lane(number: int | None) -> None:
    """The calling thread's task runs in slot ``number`` of the pool now (``None``: no more)."""
    _local.lane = number


def lane() -> object:
    """Which slot the calling thread's task runs in: a warm server serves one slot, whichever
    of the slot's threads runs the task. Outside the pool, the thread itself."""
    number = getattr(_local, "lane", None)
    return ("slot", number) if number is not None else threading.get_ident()

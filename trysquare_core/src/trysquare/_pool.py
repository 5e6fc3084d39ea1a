"""How many threads overlap work that mostly waits on the disk or on git."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from concurrent.futures import Executor, Future

T = TypeVar("T")
R = TypeVar("R")


def io_workers() -> int:
    """Threads for I/O-bound fan-out (git reads, stat walks of clones): two per core, at most 8.

    More than 8 buys nothing on one disk and starves the validators' own processes.
    """
    return min(8, 2 * (os.cpu_count() or 1))


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity where the system says (Linux),
    else every core."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def core_left_beside(busy: int) -> bool:
    """Whether this process may run on more cores than ``busy`` validators (or the workers
    starting them) keep busy: a core left for trysquare's own threads beside them."""
    return busy < usable_cores()


def bounded_map(
    pool: Executor, function: Callable[[T], R], items: Iterable[T], *, window: int
) -> Iterator[R]:
    """``pool.map`` that keeps at most ``window`` calls submitted (twice the pool's threads
    keeps it busy). ``Executor.map`` submits every item at once: over 10,000 runs their
    futures and results would be held together. Results come in the order of ``items``.
    """
    pending: deque[Future[R]] = deque()
    for item in items:
        pending.append(pool.submit(function, item))
        if len(pending) >= window:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()

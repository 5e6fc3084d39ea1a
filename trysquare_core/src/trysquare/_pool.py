"""How many threads overlap work that mostly waits on the disk or on git."""

from __future__ import annotations

import functools
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
    return min(8, 2 * usable_cores())


def usable_cores() -> int:
    """The cores this process may use: its CPU affinity where the system says (Linux), else
    every core; fewer where its cgroups' CPU quota allows less time (a container's ``--cpus``,
    :mod:`trysquare._cpu_quota`). The default ``--jobs``."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = _cgroup_quota()
    return cores if quota is None else min(cores, quota)


@functools.cache
def _cgroup_quota() -> int | None:
    # Read once a process: asked between two starts, and a quota seldom changes under a command.
    from trysquare._cpu_quota import cpu_quota

    return cpu_quota()


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

"""Keep the local cluster's key out of the reach of the user's other processes.

The local cluster's TLS key lives only in memory: in the ``validate`` process
(its scheduler and nannies) and in each worker process. On Linux a process of
the same user may read another's memory (``/proc/<pid>/mem``), environment and
open files, and trace it, unless the kernel forbids it (Yama, Landlock, the
jail) or the process is marked not dumpable (``prctl(PR_SET_DUMPABLE, 0)``):
then only a process with ``CAP_SYS_PTRACE`` (root) may. So the ``validate``
process is not dumpable while its cluster of worker processes lives, and each
worker process makes itself so as it starts (this module is the workers' preload:
:func:`dask_setup`; an operator's ``dask worker --preload trysquare_dask.memory``
does the same). Programs a worker starts are dumpable again (``execve`` resets
it): validators and the agent's code are not affected. Elsewhere (not Linux)
nothing is done.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["dask_setup", "dumpable", "private_memory", "set_dumpable"]

# <linux/prctl.h>
_PR_GET_DUMPABLE = 3
_PR_SET_DUMPABLE = 4

_prctl: list[Any] = []


def _function() -> Any | None:
    if sys.platform != "linux":
        return None
    if not _prctl:
        import ctypes

        try:
            prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            return None
        prctl.restype = ctypes.c_int
        prctl.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]
        _prctl.append(prctl)
    return _prctl[0]


def dumpable() -> bool | None:
    """Whether this process may be read and traced by the user's other processes (Linux)."""
    prctl = _function()
    if prctl is None:
        return None
    return bool(prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0) == 1)


def set_dumpable(value: bool) -> None:
    """Mark this process (not) dumpable; nothing where the call does not exist."""
    prctl = _function()
    if prctl is not None:
        prctl(_PR_SET_DUMPABLE, 1 if value else 0, 0, 0, 0)


@contextmanager
def private_memory() -> Iterator[None]:
    """This process not dumpable for the ``with`` block; as it was afterwards."""
    before = dumpable()
    set_dumpable(False)
    try:
        yield
    finally:
        if before:
            set_dumpable(True)


def dask_setup(worker: object) -> None:
    """Dask's preload hook, run in each worker process as it starts."""
    set_dumpable(False)

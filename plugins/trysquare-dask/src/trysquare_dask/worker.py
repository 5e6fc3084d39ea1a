"""What a Dask worker runs for one task: the same ``execute_task`` as the local pool.

Two things are added around it, both cluster-wide through the scheduler:

- **interruption**: a ``distributed.Event`` per ``validate``; set by the client on
  SIGINT/SIGTERM, it makes a task still running record nothing (as the local
  pool's killed validators record nothing) and a task not yet started skip;
- **judge concurrency**: a ``distributed.Semaphore`` per judge endpoint with
  ``max_leases = max_concurrency``. The lease is held for the whole judge
  conversation, whose requests go one after another, so the requests in flight
  to one endpoint across every worker never exceed ``max_concurrency`` — the
  bound each worker's own connection already keeps within its process.
"""

from __future__ import annotations

import threading
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distributed import Semaphore
    from trysquare.api import PlannedTask as Task
    from trysquare.api import Validation

__all__ = ["WorkerCannotSeeRuns", "run_task", "semaphore_for"]


class WorkerCannotSeeRuns(Exception):
    """This worker does not see the run folders the client wrote: no shared filesystem."""


def semaphore_for(validation: Validation) -> tuple[str, int] | None:
    """``(name, max_leases)`` of the cluster-wide bound a validation's calls need, or ``None``.

    The judge's validation carries its resolved endpoint (a
    ``trysquare_judge.providers.ProviderConfig``); read duck-typed, so this
    plugin needs no judge installed and the judge needs no change.
    """
    endpoint = getattr(validation, "endpoint", None)
    limit = getattr(endpoint, "max_concurrency", None)
    if endpoint is None or not isinstance(limit, int):
        return None
    # Named after what identifies the endpoint (and its bound: the scheduler refuses
    # one name with two sizes), so every validate on this cluster shares it.
    identity = f"{getattr(endpoint, 'type', '')}|{getattr(endpoint, 'name', '')}|{getattr(endpoint, 'base_url', '')}"
    return f"trysquare-judge[{identity}]x{limit}", limit


# One Semaphore object per name in a worker process: each holds a lease-refreshing callback.
_semaphores: dict[str, Semaphore] = {}
_semaphores_lock = threading.Lock()


def _semaphore(name: str, limit: int) -> Semaphore:
    from distributed import Semaphore

    with _semaphores_lock:
        semaphore = _semaphores.get(name)
        if semaphore is None:
            semaphore = _semaphores[name] = Semaphore(max_leases=limit, name=name)
        return semaphore


def run_task(
    task: Task, *, stop_event: str, semaphore: tuple[str, int] | None
) -> dict[str, Any] | None:
    """Run one task on this worker; the result is written atomically into the run folder."""
    from distributed import Event
    from trysquare.api import execute_stoppable

    if not task.task.context_path.is_file():
        # Writing here would create a phantom run folder on this machine's disk.
        import socket

        raise WorkerCannotSeeRuns(
            f"dask worker on {socket.gethostname()} does not see {task.task.context_path}: "
            "workers need the runs on a filesystem they share with the client, at the same paths"
        )
    stop = Event(stop_event)
    if stop.is_set():
        return None
    _remove_leftovers(task)
    bound = _semaphore(*semaphore) if semaphore is not None else nullcontext()
    with bound:
        # A stop set by the client kills this task's validator on this worker at once.
        result = execute_stoppable(task, stop.is_set)
    # Only the document travels back to the client (the task is there already), which
    # structures it into the runner's record with trysquare's converter.
    return None if result is None else dict(result.document)


def _remove_leftovers(task: Task) -> None:
    """Temporary files of this task's own results left by a worker lost mid-write.

    The experiment lock keeps one ``validate`` per experiment, and one task per
    run × validator in it, so these can only be a dead attempt's.
    """
    folder: Path = task.run.validation_dir
    name = task.validation.name
    leftovers = [
        *folder.glob(f".{name}.json.*.tmp"),
        *folder.glob(f".{name}.stderr.*.tmp"),
        # The validator's own evidence (a judge's transcript); its context was written
        # by the client before any task was submitted.
        *(folder / name).glob(".*.tmp"),
    ]
    for leftover in leftovers:
        leftover.unlink(missing_ok=True)

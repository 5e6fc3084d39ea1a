"""What a Dask worker runs for one task, or for a chunk of them one after another: the same
``execute_task`` as the local pool.

A chunk is one dask task for several trysquare tasks: the scheduler, the worker's task
machinery and the client each handle it once, not once per run. Each trysquare task of a
chunk reports its document as it is recorded, as an event on the client's topic (the
scheduler forwards it at once, and forgets the client's events when the client leaves), so
the client's progress and its ``-x`` advance per run, not per chunk. A chunk runs once: a
chunk started again (its worker died) runs nothing and says so, and the client runs the
tasks it heard nothing about alone, each as a dask task of its own.

Two things are added around each task, both cluster-wide through the scheduler:

- **interruption**: a ``distributed.Event`` per ``validate``; set by the client on
  SIGINT/SIGTERM, it makes a task still running record nothing (as the local
  pool's killed validators record nothing) and a task not yet started skip. Each worker
  process waits on it with one long-polling thread for all its tasks, never asks per
  task;
- **judge concurrency**: a ``distributed.Semaphore`` per judge endpoint with
  ``max_leases = max_concurrency``. The lease is held for the whole judge
  conversation, whose requests go one after another, so the requests in flight
  to one endpoint across every worker never exceed ``max_concurrency`` — the
  bound each worker's own connection already keeps within its process.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distributed import Event, Semaphore
    from trysquare.api import PlannedTask as Task
    from trysquare.api import Validation

__all__ = ["CHUNK_LOST", "WorkerCannotSeeRuns", "run_chunk", "run_task", "semaphore_for"]

# How long one wait of a worker's stop watcher lasts on the scheduler: a stop ends it at once;
# between tasks, a watcher no task needs any more is gone within this.
STOP_WAIT_SECONDS = 2.0
# What a chunk started a second time returns (its first worker died): nothing was run.
CHUNK_LOST = "trysquare-chunk-lost"


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


class _StopWatch:
    """A worker process's view of one ``validate``'s stop event: a thread long-polls the
    scheduler (one request every ``STOP_WAIT_SECONDS``, answered at once when the client sets
    it) and sets a flag every task of that ``validate`` here reads for free."""

    def __init__(self, event: Event) -> None:
        self.event = event
        self.flag = threading.Event()
        self.users = 0
        self.thread = threading.Thread(target=self._watch, name="trysquare-stop", daemon=True)

    def _watch(self) -> None:
        while True:
            try:
                stopped = self.event.wait(timeout=STOP_WAIT_SECONDS)
            except Exception:  # noqa: BLE001 - the client that could answer is gone: a stop too
                stopped = True
            if stopped:
                self.flag.set()
            with _watches_lock:
                if stopped or self.users == 0:
                    # Later tasks of this validate (none if it stopped) start a new watch.
                    if _watches.get(self.event.name) is self:
                        del _watches[self.event.name]
                    return


_watches: dict[str, _StopWatch] = {}
_watches_lock = threading.Lock()


class _Watching:
    """``with _Watching(name) as stopped:`` — ``stopped()`` is whether the client asked
    every task of its ``validate`` to stop."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.flag = threading.Event()
        self.watch: _StopWatch | None = None

    def __enter__(self) -> threading.Event:
        from distributed import Event

        with _watches_lock:
            watch = _watches.get(self.name)
            if watch is not None:
                watch.users += 1
                self.watch = watch
                return watch.flag
        # Made in the task's thread, where the worker's client is found; asked once at
        # once, so a task submitted after a stop never starts.
        event = Event(self.name)
        if event.is_set():
            self.flag.set()
            return self.flag
        watch = _StopWatch(event)
        watch.users = 1
        with _watches_lock:
            _watches[self.name] = watch
        watch.thread.start()
        self.watch = watch
        return watch.flag

    def __exit__(self, *_: object) -> None:
        if self.watch is not None:
            with _watches_lock:
                self.watch.users -= 1


def run_task(
    task: Task, *, stop_event: str, semaphore: tuple[str, int] | None
) -> dict[str, Any] | None:
    """Run one task on this worker; the result is written atomically into the run folder."""
    with _Watching(stop_event) as stopped:
        return _run_one(task, stopped, semaphore)


def run_chunk(
    tasks: Sequence[tuple[int, Task, tuple[str, int] | None]],
    *,
    stop_event: str,
    topic: str,
    token: str,
    chunk: str,
) -> list[tuple[int, dict[str, Any] | None]] | str:
    """Run ``(number, task, semaphore)`` one after another on this worker; each document
    recorded is sent to the client on ``topic`` at once, and all of them are returned.

    A task that raised is returned with ``None`` and not sent: the client runs it again
    alone, where dask's retries and its failure apply as to any single task.
    """
    from distributed import Event, get_worker

    started = Event(chunk)
    if started.is_set():
        # Its first worker died running it: what that worker recorded is on disk, what it
        # did not is run alone by the client, never a second time here.
        return CHUNK_LOST
    started.set()
    worker = get_worker()
    done: list[tuple[int, dict[str, Any] | None]] = []
    with _Watching(stop_event) as stopped:
        for number, task, semaphore in tasks:
            if stopped.is_set():
                break
            try:
                document = _run_one(task, stopped, semaphore)
            except WorkerCannotSeeRuns:
                raise
            except Exception:  # noqa: BLE001 - run again alone by the client
                done.append((number, None))
                continue
            if document is None:
                continue  # stopped while it ran: nothing recorded
            done.append((number, document))
            try:
                worker.log_event(
                    topic, {"trysquare": token, "number": number, "document": document}
                )
            except TypeError:
                pass  # not msgpack-able: the client takes it from the chunk's return
    return done


def _run_one(
    task: Task, stopped: threading.Event, semaphore: tuple[str, int] | None
) -> dict[str, Any] | None:
    from trysquare.api import execute_stoppable

    if not task.task.context_path.is_file():
        # Writing here would create a phantom run folder on this machine's disk.
        import socket

        raise WorkerCannotSeeRuns(
            f"dask worker on {socket.gethostname()} does not see {task.task.context_path}: "
            "workers need the runs on a filesystem they share with the client, at the same paths"
        )
    if stopped.is_set():
        return None
    _remove_leftovers(task)
    bound = _semaphore(*semaphore) if semaphore is not None else nullcontext()
    with bound:
        # A stop set by the client kills this task's validator on this worker at once.
        result = execute_stoppable(task, stopped.is_set)
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

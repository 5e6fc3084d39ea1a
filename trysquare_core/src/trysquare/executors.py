"""Where validation tasks run: the built-in ``local`` pool, or one from a plugin.

An executor takes planned tasks (each a run × validator with its context
archived) and yields a :class:`trysquare.task_records.TaskResult` as each finishes:
what :func:`trysquare.execute.execute_task` recorded. The tasks are a collection
to iterate once, in order: ``len()`` is their number, and each is built when it
is reached, so an executor takes them no faster than it can start them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from typing import TYPE_CHECKING

from trysquare.errors import UsageError
from trysquare.executor_protocol import Executor, RunningExecutor
from trysquare.hookspecs import hookimpl

if TYPE_CHECKING:
    from trysquare.task_records import PlannedTask as Task
    from trysquare.task_records import TaskResult

__all__ = ["Executor", "LocalExecutor", "RunningExecutor", "execute_stoppable", "get"]


def execute_stoppable(
    task: Task, stopped: Callable[[], bool], *, poll: float = 0.2
) -> TaskResult | None:
    """Run one task as :func:`trysquare.execute.execute_task` does, for an executor whose stop
    arrives from elsewhere (a cluster worker told by its client): once ``stopped()`` turns
    true, the processes this task started (its validator, the suite) are killed at once and
    nothing is recorded. Other tasks running in the same process are left alone.
    """
    import threading

    from trysquare import _process
    from trysquare.execute import execute_task

    finished = threading.Event()

    def stop_asked() -> bool:
        # Asking may fail once the client that could answer is gone (a cluster shutting
        # down after an interruption): that is a stop too, never a traceback.
        try:
            return bool(stopped())
        except Exception:  # noqa: BLE001 - whatever the cluster raises
            return True

    with _process.owned_groups() as groups:

        def watch() -> None:
            while not finished.wait(poll):
                if stop_asked():
                    # Again at every poll: a process started just after the first kill dies too.
                    _process.kill_groups(groups)

        watcher = threading.Thread(target=watch, name="trysquare-stop-watch", daemon=True)
        watcher.start()
        try:
            return execute_task(task, interrupted=stop_asked)
        finally:
            finished.set()
            watcher.join()


class LocalExecutor:
    """A bounded pool of threads on this machine (validators are subprocesses or I/O)."""

    name = "local"

    def configure(self, options: Mapping[str, str], *, jobs: int) -> _LocalPool:
        if options:
            raise UsageError(
                f"--executor-option {next(iter(options))}: the local executor takes no options"
            )
        return _LocalPool(max(jobs, 1))


class _LocalPool:
    """``jobs`` threads, each taking the next task as soon as its validator is done: the
    results are written by the thread reading them (the caller's), so writing one never
    holds a validator slot, and no hand-over through the caller delays the next start."""

    # Its tasks run in this process, under this machine's sandbox: validate may start
    # them while later runs are still planned (runner._may_overlap_planning).
    runs_tasks_here = True

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs

    def run(
        self, tasks: Collection[Task], *, should_stop: Callable[[], bool]
    ) -> Iterator[TaskResult]:
        import threading

        try:  # queue.SimpleQueue itself, without the queue module's heapq and Python queues
            from _queue import SimpleQueue
        except ImportError:  # an interpreter without CPython's _queue
            from queue import SimpleQueue
        from functools import partial

        from trysquare import _inflight, _start_first
        from trysquare.execute import Evaluated, evaluate_task, record_task

        # Marked in flight as taken; no more once the validator exits, before recording.
        in_flight = tasks if isinstance(tasks, _inflight.Deferred) else None
        pending = iter(tasks)
        turn = threading.Condition()
        # Invalid outcomes not handed over yet: until then no task starts, so that -x
        # (told of the first invalid result) can stop before anything else starts.
        held = [0]
        closing = threading.Event()  # the caller stopped reading
        # Results evaluated and not yet recorded. Validators quicker than the recording
        # thread would otherwise pile results up for as long as validate runs (memory
        # growing with the matrix, and the workers' CPU taken from the recording): past
        # this many, a worker waits before taking its next task. Counted under a lock of
        # its own: a worker holding ``turn`` may wait for another's validation to end.
        unrecorded = [0]
        unrecorded_at_most = 2 * self.jobs
        room = threading.Condition()

        def wait_for_room() -> None:
            while True:
                with room:
                    if unrecorded[0] < unrecorded_at_most or closing.is_set():
                        return
                _start_first.child_started()  # what this worker put off goes first
                with room:
                    if unrecorded[0] >= unrecorded_at_most and not closing.is_set():
                        room.wait()

        finished: SimpleQueue[tuple[Evaluated | None, BaseException | None]] = SimpleQueue()

        def next_task() -> Task | None:
            wait_for_room()
            if not turn.acquire(blocking=False):
                # Another worker is taking its task, and may wait for the recording of
                # what this one holds (a suspect runs alone): handed over first.
                _start_first.child_started()
                turn.acquire()
            try:
                while held[0] and not closing.is_set():
                    _start_first.child_started()  # waits for the recording: let it run
                    turn.wait()
                if closing.is_set() or should_stop():
                    return None
                return next(pending, None)
            finally:
                turn.release()

        def work() -> None:
            # Between children from each child's exit: what the validation puts off until the
            # next start (its scratch folder emptied) waits for that start.
            _start_first.worker_thread()
            try:
                while (task := next_task()) is not None:
                    if not _starts_a_child(task):
                        # What this worker holds is handed over before a validation that
                        # starts no child at once (a judge's request may take long).
                        _start_first.child_started()
                    evaluated = evaluate_task(task, interrupted=should_stop)
                    _start_first.task_ended()  # what it holds goes now if it started none
                    if evaluated is None:
                        continue  # killed by the stop: nothing to record
                    with room:
                        unrecorded[0] += 1
                    if in_flight is not None:
                        in_flight.exited(task)
                    if evaluated.outcome.state == "invalid":
                        with turn:
                            held[0] += 1
                        # Handed over at once: -x may stop before anything else starts; and
                        # what other workers finished before it goes first.
                        _start_first.hand_over_all()
                        _start_first.between_children()
                        finished.put((evaluated, None))
                    else:
                        # Handed over once the next child has started: the recording thread
                        # is not woken to compete for the interpreter meanwhile
                        # (trysquare._start_first).
                        _start_first.between_children(partial(finished.put, (evaluated, None)))
            except BaseException as error:  # noqa: BLE001 - raised in the caller's thread
                _start_first.child_started()  # what it held goes first
                finished.put((None, error))
            finally:
                _start_first.worker_ended()
                try:
                    _start_first.child_started()
                finally:
                    finished.put((None, None))  # this thread is done

        threads = [
            threading.Thread(target=work, name=f"trysquare-task-{n}") for n in range(self.jobs)
        ]
        for thread in threads:
            thread.start()
        working = len(threads)
        try:
            while working:
                evaluated, error = finished.get()
                if error is not None:
                    raise error
                if evaluated is None:
                    working -= 1
                    continue
                _start_first.after_starts()
                try:
                    yield record_task(evaluated)
                finally:
                    with room:
                        unrecorded[0] -= 1
                        if unrecorded[0] == unrecorded_at_most - 1:
                            room.notify_all()  # a worker may wait for this room
                    if evaluated.outcome.state == "invalid":
                        with turn:
                            held[0] -= 1
                            turn.notify_all()
        finally:
            # Whatever stopped the reading, no task starts now; those running finish.
            with turn:
                closing.set()
                turn.notify_all()
            with room:
                room.notify_all()
            for thread in threads:
                thread.join()


def _starts_a_child(task: object) -> bool:
    """Whether ``task``'s validation starts its validator as a child at once
    (:attr:`trysquare.modes.Validation.starts_a_child`); not for anything else taken."""
    planned = getattr(task, "task", None)
    return bool(getattr(getattr(planned, "validation", None), "starts_a_child", False))


@hookimpl
def trysquare_register_executors(register: Callable[[Executor], None]) -> None:
    register(LocalExecutor())


def get(name: str, options: Mapping[str, str], *, jobs: int) -> RunningExecutor:
    from trysquare import plugins

    available = plugins.registry("trysquare_register_executors", [name])
    if name not in available:
        raise UsageError(
            f"--executor {name}: no installed plugin provides executor '{name}' "
            f"(installed: {', '.join(sorted(available)) or 'none'})"
        )
    return available[name].configure(options, jobs=jobs)

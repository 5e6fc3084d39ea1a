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
    """``jobs`` slots, each running one validator at a time: the results are written by the
    thread reading them (the caller's), so writing one never holds a slot.

    Every slot has two threads (:mod:`trysquare._ahead`): while one runs its task's child,
    the other takes the next task and prepares it up to that child's start, then waits for
    the go. Tasks go in the order they were taken, each when a slot is free and no invalid
    result waits to be handed over (``-x`` may stop on it first); a task whose validation
    starts no child at once (a judge's), or runs the agent's suite, is not prepared ahead: it
    waits for its go before anything is done."""

    # Its tasks run in this process, under this machine's sandbox: validate may start
    # them while later runs are still planned (runner._may_overlap_planning).
    runs_tasks_here = True

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs

    def run(
        self, tasks: Collection[Task], *, should_stop: Callable[[], bool]
    ) -> Iterator[TaskResult]:
        import queue
        import threading
        import time
        from collections import deque
        from functools import partial

        import attrs

        from trysquare import _ahead, _inflight, _start_first
        from trysquare.execute import Evaluated, evaluate_task, record_task

        # Counted in flight as taken, marked as each starts; no more once its validator exits,
        # before recording.
        in_flight = tasks if isinstance(tasks, _inflight.Deferred) else None
        pending = iter(tasks) if in_flight is None else in_flight.unmarked()
        taking = threading.Lock()  # one thread takes a task at a time
        turn = threading.Condition()  # guards everything below
        free = list(range(self.jobs))  # the slots no task runs in
        line: deque[int] = deque()  # the tasks taken and not gone, in the order taken
        numbers = iter(range(1 << 62))
        # Invalid outcomes not handed over yet: until then no task goes, so that -x
        # (told of the first invalid result) can stop before anything else starts.
        held = [0]
        starts = [0]  # how many tasks have gone and started
        # Results handed over once the next task has started, in the order they came.
        put_off: list[Callable[[], None]] = []
        # Without -x a slot is given to the next task as soon as its child is gone and its
        # output read (Place.ended), the outcome worked out after; with -x only once the
        # outcome is known (an invalid one stops everything first).
        waits_for_outcome = in_flight is None or in_flight.stops_at_first_invalid
        orders = iter(range(1 << 62))  # the order tasks went in
        early: set[int] = set()  # of those whose slot went early, the results not handed over
        outbox: list[tuple[int, Evaluated]] = []  # results waiting for one of those
        closing = threading.Event()  # the caller stopped reading
        finished: queue.SimpleQueue[tuple[Evaluated | None, BaseException | None]] = (
            queue.SimpleQueue()
        )

        def stopping() -> bool:
            return closing.is_set() or should_stop()

        class Place:
            """One taken task's place in the line, then its slot: its gate."""

            def __init__(self, task: Task, number: int) -> None:
                self.task = task
                self.number = number
                self.slot: int | None = None
                self.order = -1  # among the tasks gone
                self.over = False
                self.left_early = False
                self.waited = 0.0  # seconds spent waiting for the go

            def go(self) -> None:
                began = time.monotonic()
                with turn:
                    while not stopping() and (line[0] != self.number or not free or held[0]):
                        turn.wait(1.0)  # woken by every change; the timeout is a safety net
                    if stopping():
                        self.end()
                        raise _ahead.NotStarted
                    line.popleft()
                    free.sort()  # the lowest free slot: at one job, always the same one
                    self.slot = free.pop(0)
                    self.order = next(orders)
                self.waited = time.monotonic() - began
                _ahead.set_lane(self.slot)
                if in_flight is not None:
                    in_flight.started(self.task)  # the marker, right before the start

            def started(self) -> None:
                with turn:
                    starts[0] += 1
                    turn.notify_all()
                hand_over_put_off()  # what waited for this start, before this task's own

            def ended(self) -> None:
                if waits_for_outcome or self.over or stopping():
                    return  # an interrupted task's marker stays: it ended trysquare during it
                # The child and all it started are gone: no code of this run runs now.
                if in_flight is not None:
                    in_flight.exited(self.task)
                self.left_early = True
                with turn:
                    early.add(self.order)
                _start_first.between_children()
                next_started(self.end())
                _start_first.child_started()

            @property
            def gone(self) -> bool:
                return self.slot is not None

            def end(self) -> int:
                """The task is done (or never goes): its slot is free, or its place in line
                given up. How many tasks had started by then."""
                with turn:
                    if not self.over:
                        self.over = True
                        if self.slot is not None:
                            free.append(self.slot)
                        elif self.number in line:
                            line.remove(self.number)
                        turn.notify_all()
                    count = starts[0]
                _ahead.set_lane(None)
                return count

            def hand_over(self, evaluated: Evaluated) -> None:
                """The result goes to the recording thread, after those of the tasks that went
                before it and left their slot early (their outcome is being worked out): it
                waits in the outbox meanwhile, never holding this thread."""
                with turn:
                    outbox.append((self.order, evaluated))
                    self.handed()

            def handed(self) -> None:
                """This task's result is handed over (or never will be): what waited for it in
                the outbox goes, in order. Called holding ``turn``, or takes it."""
                with turn:
                    early.discard(self.order)
                    first_pending = min(early, default=None)
                    ready = sorted(
                        (entry for entry in outbox
                         if first_pending is None or entry[0] < first_pending),
                        key=lambda entry: entry[0],
                    )  # fmt: skip
                    for entry in ready:
                        outbox.remove(entry)
                        finished.put((entry[1], None))  # in order: put holding the lock

        def next_task() -> Place | None:
            with taking:
                with turn:
                    while held[0] and not closing.is_set():
                        turn.wait()
                if stopping():
                    return None
                task = next(pending, None)
                if task is None:
                    return None
                with turn:
                    number = next(numbers)
                    line.append(number)
                return Place(task, number)

        def hand_over_put_off() -> None:
            with turn:
                actions = put_off[:]
                put_off.clear()
            for action in actions:
                action()

        def next_started(count: int) -> None:
            """Wait (briefly) until the next task taken has started: another thread starts
            its child before this one competes for the interpreter."""
            with turn:
                turn.wait_for(
                    lambda: starts[0] != count or not line or held[0] or closing.is_set(),
                    timeout=_start_first.WAIT_AT_MOST,
                )

        def evaluate(place: Place) -> Evaluated | None:
            """Run the task once it may go: prepared ahead (its child waits for the go), or
            not (the go first). ``NotStarted`` when the go never comes."""
            task = place.task
            if not _prepared_ahead(task):
                place.go()
                place.started()
                return evaluate_task(task, interrupted=should_stop)
            with _ahead.gated(place):
                evaluated = evaluate_task(task, interrupted=should_stop)
            if not place.gone:
                # It started no child (it failed before): it is handed over in its turn.
                place.go()
                place.started()
            elif evaluated is not None and place.waited:
                # Its duration is the task's own: the wait for the go is not in it.
                evaluated = attrs.evolve(evaluated, duration=evaluated.duration - place.waited)
            return evaluated

        def work() -> None:
            place: Place | None = None
            try:
                while (place := next_task()) is not None:
                    task = place.task
                    try:
                        evaluated = evaluate(place)
                    except _ahead.NotStarted:
                        if in_flight is not None:
                            in_flight.not_started(task)
                        continue
                    finally:
                        _start_first.child_started()  # a task that started none
                    try:
                        if evaluated is None:
                            place.end()
                            continue  # killed by the stop: nothing to record
                        if in_flight is not None and not place.left_early:
                            in_flight.exited(task)
                        if evaluated.outcome.state == "invalid":
                            with turn:
                                held[0] += 1  # before the slot is free: nothing goes now
                            place.end()
                            # Handed over at once: -x may stop before anything else starts;
                            # and what other workers finished before it goes first.
                            hand_over_put_off()
                            _start_first.hand_over_all()
                            place.hand_over(evaluated)
                        elif place.left_early:
                            place.hand_over(evaluated)  # the next task has started already
                        else:
                            # Handed over once the next task has started (by the thread
                            # starting it, so results keep their order): the recording thread
                            # is not woken to compete for the interpreter meanwhile
                            # (trysquare._start_first).
                            with turn:
                                put_off.append(partial(place.hand_over, evaluated))
                            _start_first.between_children()
                            next_started(place.end())
                            hand_over_put_off()  # no start came soon: handed over now
                            _start_first.child_started()
                    finally:
                        place.handed()
            except BaseException as error:  # noqa: BLE001 - raised in the caller's thread
                hand_over_put_off()  # what it held goes first
                _start_first.child_started()
                finished.put((None, error))
            finally:
                if place is not None:
                    place.end()
                    place.handed()  # what waited for its result goes
                hand_over_put_off()
                _start_first.child_started()
                finished.put((None, None))  # this thread is done

        threads = [
            threading.Thread(target=work, name=f"trysquare-task-{n}") for n in range(2 * self.jobs)
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
                    if evaluated.outcome.state == "invalid":
                        with turn:
                            held[0] -= 1
                            turn.notify_all()
        finally:
            # Whatever stopped the reading, no task starts now; those running finish.
            with turn:
                closing.set()
                turn.notify_all()
            for thread in threads:
                thread.join()


def _prepared_ahead(task: object) -> bool:
    """Whether ``task`` is prepared ahead: its validation starts its child at once, it runs no
    suite of the agent's (whose service is not started before the go), and the kernel
    confines children here: otherwise the validator running could write into what is
    prepared for the next one (its scratch folder)."""
    from trysquare.sandbox import sandbox_enabled

    planned = getattr(task, "task", None)
    return (
        _starts_a_child(task)
        and "test_command" not in getattr(planned, "context", {})
        and sandbox_enabled()
    )


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

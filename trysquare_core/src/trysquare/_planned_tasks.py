"""The tasks of one ``validate`` as its executor takes them: each built when it is reached.

Planning (:mod:`trysquare.planning`) decides each run's plan; :class:`PlannedTasks` hands the
executor that run's tasks in plan order, planned whole first or, where nothing a validator
runs can write into a clone not yet pictured, in a thread of its own beside the first tasks.
"""

from __future__ import annotations

import collections
import contextlib
import os
import sys
import threading
from array import array
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

from trysquare import _spill, _start_first
from trysquare._pool import core_left_beside, io_workers
from trysquare._shown import shown
from trysquare._stop import StopState
from trysquare.clone_picture import ClonePicture
from trysquare.errors import RunError
from trysquare.execute import PlannedTask
from trysquare.modes import Validation
from trysquare.options import ValidateOptions
from trysquare.planning import RunPlan, iter_plans
from trysquare.runs import Run
from trysquare.scenario import Scenario

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

__all__ = ["PLANNED_AHEAD_AT_MOST", "PlanTable", "PlannedTasks", "built_ahead"]

T = TypeVar("T")

# Overlapped, planning keeps at most this many runs planned ahead of the runs whose tasks
# are taken. A run's clone is pictured as it is planned and checked again once its
# validators are back: unbounded, planning ran minutes ahead on a large matrix, and by the
# time the check came the clone's inodes and the spilled records had left the page cache
# (a kernel may page out what was not touched for a minute, memory free or not).
PLANNED_AHEAD_AT_MOST = 1000


class PlannedTasks(Collection[PlannedTask]):
    """The planned tasks, as executors take them, each built when it is reached.

    Iterated once, in plan order (a run's tasks together). Planned whole before the
    first task is taken; or, ``overlapped``, in a thread of its own while the first
    tasks already run, the next task built while one runs (where a core is left for it:
    :func:`trysquare._pool.core_left_beside`), and at most
    :data:`PLANNED_AHEAD_AT_MOST` runs planned ahead of those taken (:attr:`bounded`: there
    are more runs than that). ``len()`` is how many; it waits for planning to end, and from
    then on planning is no longer held back (nor once the tasks are closed or a stop is
    asked for).
    """

    def __init__(
        self,
        scenario: Scenario,
        runs: Sequence[Run],
        validations: Sequence[Validation],
        options: ValidateOptions,
        spill: _spill.Spill,
        *,
        overlapped: bool,
        stop: StopState | None = None,
    ) -> None:
        self.spill = spill
        self._stop = StopState() if stop is None else stop
        self.overlapped = overlapped
        self.plans = PlanTable(runs)
        # Runs whose tasks are being taken: their plan, how many tasks are not back, and the
        # clone's picture their tasks were built with (None: no clone), once they are.
        self._out: dict[Path, tuple[RunPlan, int, ClonePicture | None]] = {}
        self.unbuilt: list[RunError] = []
        self._count = 0
        # The next task is built in a thread of its own while a validator runs only where a
        # core is left for that thread beside the validators (``--jobs`` below the cores).
        # With a validator on every core the building takes a validator's turn wherever it is
        # done, and handing each task over from a thread of its own only added CPU (a cold
        # replay at two jobs on two cores): each worker then builds the task it takes.
        self._ahead = max(options.jobs, 1) if overlapped and core_left_beside(options.jobs) else 0
        self._changed = threading.Condition()
        self._planned = False
        self._failure: BaseException | None = None
        self._closing = threading.Event()
        self._planner: threading.Thread | None = None
        # Whether planning is held back at all: then it ends only near the last tasks, and
        # whoever waits for the total (the progress display) should not.
        self._ahead_at_most = PLANNED_AHEAD_AT_MOST
        self.bounded = overlapped and len(runs) > self._ahead_at_most
        # Planning waits while ``_ahead_at_most`` runs are planned past the ``_taken`` ones
        # handed to the task builder; no longer once anything waits for planning's end.
        self._holding_back = self.bounded
        self._taken = 0
        self._planning_waits = False
        # Called with each task as it is built ahead, in the builder's thread (what can be made
        # for a task before it is taken: its in-flight marker), not on the way between two starts.
        self.also_built: Callable[[PlannedTask], None] | None = None
        if overlapped:
            # Beside the tasks, a replay's planning runs at the lowest priority: it only has to
            # stay ahead of them, and on a machine of few cores it took turns from the threads
            # that start and record them (the first thirty or so validators of a 200-run replay
            # ran a third slower). A replay's planning starts no process; a fresh one keeps its
            # priority, since its git commands, starved by validators that keep every core busy
            # (where no scheduler autogroup sets processes apart: a container), could reach
            # their timeouts and skip runs.
            self._planner = threading.Thread(
                target=self._plan, args=(scenario, runs, validations, options),
                kwargs={"lowest": options.replay}, name="trysquare-planning", daemon=True,
            )  # fmt: skip
            self._planner.start()
        else:
            self._plan(scenario, runs, validations, options)
            if self._failure is not None:
                raise self._failure

    def _plan(
        self,
        scenario: Scenario,
        runs: Sequence[Run],
        validations: Sequence[Validation],
        options: ValidateOptions,
        *,
        lowest: bool = False,
    ) -> None:
        if lowest:
            lowest_priority()  # this thread's, and what it starts
        # Building contexts is trysquare's own I/O (git, files): not bounded by --jobs,
        # which bounds the validators. A replay runs no git: its planning is Python
        # reading files already cached, done here in one thread whatever --jobs (more
        # threads only contend with the tasks and the recording for the interpreter:
        # benchmarks/bench_validate.py measures it).
        builders = 1 if options.replay else max(options.jobs, io_workers())
        run_index = 0
        try:
            # One builder is this thread itself: a pool of one would only hand each run over
            # to another thread and back.
            with _builder_pool(builders) as pool:
                for outcome in iter_plans(
                    scenario,
                    runs,
                    validations,
                    options,
                    self.spill,
                    pool,
                    window=2 * builders,
                    stop=self._stop,
                ):
                    # One outcome per run, in the order of ``runs``.
                    with self._changed:
                        if isinstance(outcome, RunError):
                            self.unbuilt.append(outcome)
                        else:
                            self.plans.append(run_index, outcome)
                            self._count += outcome.size
                        self._changed.notify_all()
                        self._hold_back()
                    run_index += 1
            for error in self.unbuilt:
                print(f"trysquare: skipped: {shown(error.message)}", file=sys.stderr)
        except BaseException as error:  # noqa: BLE001 - raised where the tasks are taken
            self._failure = error
        finally:
            with self._changed:
                self._planned = True
                self._changed.notify_all()

    def _hold_back(self) -> None:
        """Wait (``_changed`` held) while planning is ``ahead_at_most`` runs ahead of the runs
        taken; a stop asked for is looked at every 0.1 s (a signal handler notifies no one)."""
        while (
            self._holding_back
            and len(self.plans) - self._taken >= self._ahead_at_most
            and not self._closing.is_set()
            and not self._stop.should_stop()
        ):
            self._planning_waits = True
            self._changed.wait(0.1)
        self._planning_waits = False

    @property
    def planned(self) -> bool:
        """Whether every run is planned (``len()`` then answers at once)."""
        with self._changed:
            return self._planned

    @property
    def planned_so_far(self) -> int:
        """How many tasks are planned yet (``len()`` once planning has ended)."""
        with self._changed:
            return self._count

    def wait_planned(self) -> None:
        """Return once every run is planned; raise what stopped planning, if anything did.

        Planning is no longer held back from then on: whoever waits needs its end.
        """
        with self._changed:
            if self._holding_back:
                self._holding_back = False
                self._changed.notify_all()
            while not self._planned:
                self._changed.wait()
        if self._failure is not None:
            raise self._failure

    def task_back(self, run: Run) -> tuple[RunPlan, ClonePicture | None] | None:
        """Count one of ``run``'s tasks back; once they all are, its plan and the picture of
        its clone before validation (held since its tasks were built), else None.

        Only runs whose tasks are out are held here: a few at a time, not 10,000.
        """
        with self._changed:
            entry = self._out.get(run.dir)
            if entry is None:
                return None
            plan, left, before = entry
            if left > 1:
                self._out[run.dir] = (plan, left - 1, before)
                return None
            del self._out[run.dir]
            return plan, before

    def close(self) -> None:
        """No task is built ahead any more; planning, if it still runs, is waited for."""
        self._closing.set()
        with self._changed:
            self._changed.notify_all()  # planning held back goes on, to its end
        if self._planner is not None:
            self._planner.join()

    def __len__(self) -> int:
        self.wait_planned()
        return self._count

    def _plans_as_decided(self) -> Iterator[RunPlan]:
        index = 0
        while True:
            with self._changed:
                decided = index < len(self.plans) or self._planned
            if not decided:
                # About to wait for planning (a worker taking its task, where none is built
                # ahead): what it put off until its next start (its last result) goes now.
                _start_first.child_started()
            with self._changed:
                while index == len(self.plans) and not self._planned:
                    self._changed.wait()
                if self._failure is not None:
                    raise self._failure
                if index == len(self.plans):
                    return
                run_plan = self.plans[index]
                index += 1
                self._taken = index
                if self._planning_waits:
                    self._changed.notify_all()
            yield run_plan

    def _built(self) -> Iterator[PlannedTask]:
        """Each run's tasks in plan order; a run with tasks is held (:meth:`task_back`) with
        the picture they were built with, so that its clone is checked against that picture,
        not one read back from the spill again."""
        for run_plan in self._plans_as_decided():
            if not run_plan.size:
                continue
            loaded = run_plan.load(self.spill)
            with self._changed:
                self._out[run_plan.run.dir] = (run_plan, run_plan.size, loaded[0])
            yield from run_plan.tasks(self.spill, loaded)

    def __iter__(self) -> Iterator[PlannedTask]:
        built = self._built()
        if not self._ahead:
            return built
        return built_ahead(self._made_ahead(built), self._ahead, self._closing)

    def _made_ahead(self, built: Iterator[PlannedTask]) -> Iterator[PlannedTask]:
        """``built``, each task handed to :attr:`also_built` first (in the builder's thread)."""
        for task in built:
            if self.also_built is not None:
                self.also_built(task)
            yield task

    def __contains__(self, task: object) -> bool:
        if not isinstance(task, PlannedTask):
            return False
        self.wait_planned()
        return any(
            run_plan.run == task.run and run_plan.plans(task.validation.name)
            for run_plan in self.plans
        )


def _builder_pool(
    builders: int,
) -> contextlib.AbstractContextManager[ThreadPoolExecutor | None]:
    """A pool of ``builders`` threads, or none for one builder (this thread itself; a replay
    then never imports ``concurrent.futures``)."""
    if builders <= 1:
        return contextlib.nullcontext()
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(max_workers=builders)


class PlanTable(Sequence[RunPlan]):
    """Every run's plan, kept as a few numbers a run, each :class:`RunPlan` made again when
    read.

    A plan is its run's place in ``runs``, its spill record's number and which validators
    must run: held as one object each, 10,000 plans cost as much memory as their runs. Only
    the validate's one shared part and each not-signed list (rare) are kept as objects.
    """

    def __init__(self, runs: Sequence[Run]) -> None:
        self._runs = runs
        self._run_at = array("q")
        self._kept = array("q")
        self._which: list[int] = []  # small numbers: CPython's shared ints, a slot each
        self._unsigned: dict[int, tuple[tuple[str, str, bool], ...]] = {}
        self._shared: Any = None

    def append(self, run_index: int, plan: RunPlan) -> None:
        """Keep ``plan``, the plan of ``runs[run_index]``."""
        if self._shared is None:
            self._shared = plan.shared
        # Every plan of one validate shares one part (planning builds it once); a plan that
        # did not would be rebuilt wrong, so it is refused here, not later.
        assert plan.shared is self._shared, "plans of one validate share their shared part"
        assert self._runs[run_index] is plan.run, "a plan kept under its own run's place"
        if plan.unsigned:
            self._unsigned[len(self._kept)] = plan.unsigned
        self._run_at.append(run_index)
        self._kept.append(plan.kept)
        self._which.append(plan.which)

    def __len__(self) -> int:
        return len(self._kept)

    @overload
    def __getitem__(self, index: int) -> RunPlan: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[RunPlan]: ...
    def __getitem__(self, index: int | slice) -> RunPlan | Sequence[RunPlan]:
        if isinstance(index, slice):
            return [self[at] for at in range(len(self))[index]]
        at = range(len(self))[index]  # a negative index counted from the end, as a list's
        return RunPlan(
            self._runs[self._run_at[at]],
            self._which[at],
            self._kept[at],
            self._shared,
            unsigned=self._unsigned.get(at, ()),
        )

    def __iter__(self) -> Iterator[RunPlan]:
        for index in range(len(self)):
            yield self[index]

    def unsigned(self) -> Iterator[RunPlan]:
        """The plans that found results not signed here, in plan order."""
        for index in sorted(self._unsigned):
            yield self[index]


class _Waiting:
    """What :func:`built_ahead` built and the worker has not taken yet: at most ``size``
    entries, and two conditions on one lock (room for the builder, an entry for the taker).

    A bounded :class:`queue.Queue` did this; :mod:`queue` (and :mod:`heapq` with it) cost a
    one-run ``validate`` more to import than these few lines, and its internals were read
    here anyway (an entry taken without waking the builder).
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.entries: collections.deque[tuple[bool, Any]] = collections.deque()
        self.lock = threading.Lock()
        self.room = threading.Condition(self.lock)  # the builder waits here while full
        self.filled = threading.Condition(self.lock)  # the taker waits here while empty

    def put(self, entry: tuple[bool, Any], closing: threading.Event) -> bool:
        """Add ``entry`` once there is room; ``False`` (left out) once ``closing`` is set,
        which is looked at again at least every 0.05 s while it waits."""
        with self.lock:
            while not closing.is_set():
                if len(self.entries) < self.size:
                    self.entries.append(entry)
                    self.filled.notify()
                    return True
                self.room.wait(0.05)
            return False

    def take_now(self) -> tuple[bool, Any] | None:
        """The first entry, if one waits, without telling the builder of the room."""
        with self.lock:
            return self.entries.popleft() if self.entries else None

    def take(self) -> tuple[bool, Any]:
        """The first entry, waiting for one; the builder is told of the room at once."""
        with self.lock:
            while not self.entries:
                self.filled.wait()
            self.room.notify()
            return self.entries.popleft()

    def tell_room(self) -> None:
        """Wake the builder waiting for room (after an entry was taken with :meth:`take_now`)."""
        with self.lock:
            self.room.notify()


def lowest_priority() -> None:
    """Give the calling thread, and the threads and processes it starts, the lowest
    scheduling priority (nice 19; under the BFQ and CFQ disk schedulers, the lowest I/O
    priority of its class too): they run when a core is free. Linux alone sets a thread's
    own priority (elsewhere the call names a process): nothing is changed there."""
    if sys.platform != "linux":
        return
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except OSError:
        pass  # a priority that cannot be lowered is kept


def built_ahead(items: Iterator[T], ahead: int, closing: threading.Event) -> Iterator[T]:
    """``items``, each taken from them in a thread of its own up to ``ahead`` (at least 1)
    before it is asked for (building a task reads files: done while a validator runs, not
    between two)."""
    waiting = _Waiting(ahead)
    end = object()

    def put(entry: tuple[bool, Any]) -> bool:
        return waiting.put(entry, closing)

    def fill() -> None:
        try:
            for item in items:
                if not put((True, item)):
                    return
                _start_first.after_starts()  # the next one is built once a child started
            put((True, end))
        except BaseException as error:  # noqa: BLE001 - raised where the item is asked for
            put((False, error))

    threading.Thread(target=fill, name="trysquare-task-builder", daemon=True).start()

    def taken() -> Iterator[T]:
        while True:
            # Taken without waking the builder (a wait for an entry would): woken now, it
            # would take the interpreter from the worker starting its next child; told of
            # the room once that child has started.
            entry = waiting.take_now()
            if entry is not None:
                _start_first.when_started(waiting.tell_room)
            else:
                _start_first.child_started()  # waiting for work is not starting a child
                entry = waiting.take()
            ok, item = entry
            if not ok:
                raise item
            if item is end:
                return
            yield item

    return taken()

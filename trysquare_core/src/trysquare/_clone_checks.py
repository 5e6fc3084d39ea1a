"""The validated clones read again after their validators: a clone written during
validation makes its run invalid (:mod:`trysquare.clone_guard` says how).

Early, where planning overlapped (Landlock: no validator writes into another run's clone),
a clone is checked by one thread as soon as its run's last task is back; late, after the
last task, every clone not checked early, a few at a time.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TextIO

from trysquare import _start_first, clone_guard
from trysquare._planned_tasks import PlannedTasks
from trysquare._pool import io_workers
from trysquare.planning import RunPlan
from trysquare.result_guard import ResultWatch

__all__ = ["EarlyChecks", "check_late"]


class EarlyChecks:
    """Clones checked as soon as their run's last task is back (planning overlapped), in turn
    by one thread: each stat of a check's walk hands the interpreter over, and more threads
    only fight the recording and the validators for it on a machine of few cores. Runs checked
    are kept by their spill record's number (a byte a run), with what was found; no future.
    """

    def __init__(self, tasks: PlannedTasks) -> None:
        self.tasks = tasks
        self._checked = bytearray()
        self._found: dict[int, str] = {}
        self._marking = threading.Lock()
        self._waiting: queue.SimpleQueue[RunPlan | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def submit(self, plan: RunPlan) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._check_each, name="trysquare-check", daemon=True
            )
            self._thread.start()
        self._waiting.put(plan)

    def _check_each(self) -> None:
        while (plan := self._waiting.get()) is not None:
            try:
                self._check(plan)
            except Exception:  # noqa: BLE001, S112 - not marked checked: the late check says it
                continue

    def _check(self, plan: RunPlan) -> None:
        _start_first.after_starts()
        problem = plan.clone_changes(self.tasks.spill)
        if problem is not None:
            self._found[plan.kept] = problem
        with self._marking:
            if len(self._checked) <= plan.kept:
                self._checked.extend(bytes(plan.kept + 1 - len(self._checked)))
            self._checked[plan.kept] = 1

    def close(self) -> None:
        """Every check submitted done (one that raised is left to the late checks)."""
        if self._thread is not None:
            self._waiting.put(None)
            self._thread.join()

    def found(self, plan: RunPlan) -> tuple[bool, str | None]:
        """Whether ``plan``'s clone was checked early, and what was found if so."""
        if plan.kept < len(self._checked) and self._checked[plan.kept]:
            return True, self._found.get(plan.kept)
        return False, None


def check_late(tasks: PlannedTasks, ledger: ResultWatch, early: EarlyChecks, out: TextIO) -> None:
    """Re-read each validated clone not checked early, a bounded number at a time (each
    picture is read back from the spill as its check starts), in a pool started only if
    one is left; every problem is said in plan order."""
    pending: deque[tuple[RunPlan, list[str], Future[str | None] | str | None]] = deque()
    pool: ThreadPoolExecutor | None = None
    try:
        # One plan made at a time (never a list of every plan).
        for plan in itertools.chain(tasks.plans, [None]):
            if plan is not None and (names := ledger.ran_names(plan.run)):
                checked, found = early.found(plan)
                if not checked:
                    pool = pool or ThreadPoolExecutor(max_workers=io_workers())
                    pending.append((plan, names, pool.submit(plan.clone_changes, tasks.spill)))
                else:
                    pending.append((plan, names, found))
            while pending and (plan is None or len(pending) >= 2 * io_workers()):
                said, names, outcome = pending.popleft()
                problem = outcome.result() if isinstance(outcome, Future) else outcome
                if problem is not None:
                    clone_guard.spoil(said.run, names, problem, out)
    finally:
        if pool is not None:
            pool.shutdown(wait=True)

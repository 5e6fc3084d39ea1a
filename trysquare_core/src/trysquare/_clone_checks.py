"""The validated clones read again after their validators: a clone written during
validation makes its run invalid (:mod:`trysquare.clone_guard` says how).

Early, where planning overlapped (Landlock: no validator writes into another run's clone),
a clone is checked as soon as its run's last task is back, by the thread taking it back;
late, after the last task, every clone not checked early, a few at a time.
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import TYPE_CHECKING, TextIO

from trysquare import clone_guard
from trysquare._planned_tasks import PlannedTasks
from trysquare._pool import io_workers
from trysquare.clone_picture import ClonePicture
from trysquare.planning import RunPlan
from trysquare.result_guard import ResultWatch

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["EarlyChecks", "check_late"]


class EarlyChecks:
    """Clones checked as soon as their run's last task is back (planning overlapped), by the
    thread that took the task back (the runner's, which records results): a check is a
    stat walk of one clone, and a thread of its own only took each run over and handed the
    interpreter back and forth with it, the workers and planning on a machine of few cores.
    Runs checked are kept by their spill record's number (a byte a run), with what was found;
    no future.
    """

    def __init__(self, tasks: PlannedTasks) -> None:
        self.tasks = tasks
        self._checked = bytearray()
        self._found: dict[int, str] = {}

    def submit(self, plan: RunPlan, before: ClonePicture | None) -> None:
        """Check ``plan``'s clone now against ``before``, the picture its tasks were built
        with (one that raises is left to the late checks)."""
        try:
            problem = plan.clone_changes(self.tasks.spill, before=before)
        except Exception:  # noqa: BLE001 - not marked checked: the late check says it
            return
        if problem is not None:
            self._found[plan.kept] = problem
        if len(self._checked) <= plan.kept:
            self._checked.extend(bytes(plan.kept + 1 - len(self._checked)))
        self._checked[plan.kept] = 1

    def close(self) -> None:
        """Every check submitted done: nothing to wait for (they are made as submitted)."""

    def found(self, plan: RunPlan) -> tuple[bool, str | None]:
        """Whether ``plan``'s clone was checked early, and what was found if so."""
        if plan.kept < len(self._checked) and self._checked[plan.kept]:
            return True, self._found.get(plan.kept)
        return False, None


def check_late(tasks: PlannedTasks, ledger: ResultWatch, early: EarlyChecks, out: TextIO) -> None:
    """Re-read each validated clone not checked early, a bounded number at a time (each
    picture is read back from the spill as its check starts), in a pool started only if
    one is left (a lone run is checked in this thread); every problem is said in plan order."""
    pending: deque[tuple[RunPlan, list[str], Future[str | None] | str | None]] = deque()
    pool: ThreadPoolExecutor | None = None
    # Asked once: each os.cpu_count() reads /sys (three system calls), and this is a run's loop.
    window = 2 * io_workers()
    try:
        # One plan made at a time (never a list of every plan).
        for plan in itertools.chain(tasks.plans, [None]):
            if plan is not None and (names := ledger.ran_names(plan.run)):
                checked, found = early.found(plan)
                if not checked and len(tasks.plans) == 1:
                    # A pool would only hand the one check over and back (and a one-run
                    # validate would import concurrent.futures, with logging, for it).
                    pending.append((plan, names, plan.clone_changes(tasks.spill)))
                elif not checked:
                    if pool is None:
                        from concurrent.futures import ThreadPoolExecutor  # only when one is left

                        pool = ThreadPoolExecutor(max_workers=io_workers())
                    pending.append((plan, names, pool.submit(plan.clone_changes, tasks.spill)))
                else:
                    pending.append((plan, names, found))
            while pending and (plan is None or len(pending) >= window):
                said, names, outcome = pending.popleft()
                problem = (
                    outcome if outcome is None or isinstance(outcome, str) else outcome.result()
                )
                if problem is not None:
                    clone_guard.spoil(said.run, names, problem, out)
    finally:
        if pool is not None:
            pool.shutdown(wait=True)

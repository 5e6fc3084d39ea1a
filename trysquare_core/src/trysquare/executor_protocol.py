"""What an executor is: the protocols a plugin's executor implements (``trysquare validate
--executor NAME``).

Kept apart from the built-in ``local`` pool (:mod:`trysquare.executors`, which runs tasks
through :mod:`trysquare.execute`), so the hook specifications name an executor without
reaching the engine: this module names only the task records it carries.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from trysquare.task_records import PlannedTask as Task
    from trysquare.task_records import TaskResult

__all__ = ["Executor", "RunningExecutor"]


class Executor(Protocol):
    """Where validation tasks run, registered through ``trysquare_register_executors``: a
    ``name`` (what ``--executor`` names) and ``configure`` giving a :class:`RunningExecutor`."""

    name: str

    def configure(self, options: Mapping[str, str], *, jobs: int) -> RunningExecutor:
        """Check ``--executor-option`` values (UsageError on a bad one) and get ready."""
        ...


class RunningExecutor(Protocol):
    """A configured executor: runs the tasks and yields each :class:`TaskResult` as it is
    recorded (what :func:`trysquare.execute.execute_task` returned); starts no task once
    ``should_stop()`` is true."""

    def run(
        self, tasks: Collection[Task], *, should_stop: Callable[[], bool]
    ) -> Iterable[TaskResult]:
        """Run ``tasks`` (iterated once, in order; ``len()`` is their number)."""
        ...

"""Where validation tasks run: the built-in ``local`` pool, or one from a plugin.

An executor takes planned tasks (each a run × validator with its context
archived) and yields a :class:`trysquare.execute.TaskResult` as each finishes:
what :func:`trysquare.execute.execute_task` recorded. (An executor that yields
``(task, document)`` pairs, as they once did, still works.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Protocol

from trysquare.errors import UsageError
from trysquare.hookspecs import hookimpl

if TYPE_CHECKING:
    from trysquare.execute import TaskResult
    from trysquare.modes import ValidationTask as Task

__all__ = ["Executor", "LocalExecutor", "execute_stoppable", "get"]


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


class Executor(Protocol):
    name: str

    def configure(self, options: Mapping[str, str], *, jobs: int) -> RunningExecutor:
        """Check ``--executor-option`` values (UsageError on a bad one) and get ready."""
        ...


class RunningExecutor(Protocol):
    def run(
        self, tasks: Sequence[Task], *, should_stop: Callable[[], bool]
    ) -> Iterable[TaskResult]:
        ...


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
    def __init__(self, jobs: int) -> None:
        self.jobs = jobs

    def run(
        self, tasks: Sequence[Task], *, should_stop: Callable[[], bool]
    ) -> Iterator[TaskResult]:
        from trysquare.execute import Evaluated, evaluate_task, record_task

        pending = iter(tasks)
        running: dict[Future[Evaluated | None], Task] = {}
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:

            def start() -> None:
                # No more than the pool can start, so a stop takes effect at once.
                while len(running) < self.jobs and not should_stop():
                    task = next(pending, None)
                    if task is None:
                        return
                    running[pool.submit(evaluate_task, task, interrupted=should_stop)] = task

            start()
            while running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                evaluated = []
                for future in done:
                    running.pop(future)
                    found = future.result()
                    if found is not None:
                        evaluated.append(found)
                # The next validators start while these results are written (here, on the
                # other core) — unless one is invalid: -x must be able to stop before that.
                if all(found.outcome.state != "invalid" for found in evaluated):
                    start()
                for found in evaluated:
                    yield record_task(found)
                start()


@hookimpl
def trysquare_register_executors(register: Callable[[Executor], None]) -> None:
    register(LocalExecutor())


def get(name: str, options: Mapping[str, str], *, jobs: int) -> RunningExecutor:
    from trysquare import plugins

    available = plugins.registry("trysquare_register_executors")
    if name not in available:
        raise UsageError(
            f"--executor {name}: no installed plugin provides executor '{name}' "
            f"(installed: {', '.join(sorted(available)) or 'none'})"
        )
    return available[name].configure(options, jobs=jobs)

"""The ``dask`` executor: planned tasks run on a ``dask.distributed`` cluster.

The client (the ``trysquare validate`` process) builds and archives every
context, then submits tasks; a worker runs :func:`trysquare.api.execute_task`,
which writes the result atomically into the run folder — the same files the
local pool writes, on a filesystem the client and the workers share. The
client yields each recorded document as it arrives, so the runner draws the
same progress and the same closing line whichever executor ran.

This module is imported when the plugin registers (every trysquare command), so
dask and distributed are imported only inside :meth:`DaskRun.run`.
"""

from __future__ import annotations

import difflib
import itertools
import queue
import sys
import time
import uuid
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager, nullcontext, suppress
from typing import TYPE_CHECKING, Any

import attrs
from trysquare.api import UsageError

if TYPE_CHECKING:
    from distributed import Client, Future
    from trysquare.api import PlannedTask as Task
    from trysquare.api import TaskResult

__all__ = ["DaskExecutor", "DaskRun", "DaskSettings", "chunk_size", "parse_options"]

# What a local cluster alone understands: meaningless next to scheduler=ADDRESS.
LOCAL_OPTIONS = ("workers", "threads", "processes")
OPTIONS = ("scheduler", "address", *LOCAL_OPTIONS, "retries", "worker_wait")
DEFAULT_RETRIES = 2
# How long tasks may wait on a cluster with no worker at all before validate gives up on them:
# long enough for a nanny to restart a worker or an autoscaler to add one.
DEFAULT_WORKER_WAIT = 300.0
# How often, while it waits, the client asks the scheduler whether any worker is left.
WORKER_LOOK_SECONDS = 1.0
# How often the client looks at should_stop while it waits for results.
POLL_SECONDS = 0.05
# A chunk (one dask task running several trysquare tasks) is at most a share of what remains:
# each cluster thread gets this many chunks of the rest, so chunks shrink toward the end.
CHUNKS_PER_THREAD = 4
# And at most this many tasks: a worker lost mid-chunk sends no more than these to run alone.
MAX_CHUNK = 16
# Where a local cluster's HTTP servers listen: this machine only, any free port.
LOOPBACK = "127.0.0.1:0"
# What they serve: nothing. Dask's default pages (the cluster's state, task errors, worker
# logs, an event stream) are plain HTTP, read by anyone on the machine; trysquare needs none.
NO_HTTP_ROUTES: dict[str, list[str]] = {
    "distributed.scheduler.http.routes": [],
    "distributed.worker.http.routes": [],
}
# What a local cluster's processes do on a clock rather than for a task, made rare: trysquare's
# tasks are seconds of a validator each, and these otherwise cost CPU the whole time (sampling
# every worker thread's stack every 10 ms, rebalancing tasks every second, measuring the
# event loop every 20 ms, the machine every 500 ms, each worker's memory every 100 ms).
QUIET_CLUSTER: dict[str, object] = {
    "distributed.worker.profile.enabled": False,
    "distributed.scheduler.work-stealing": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.worker.memory.monitor-interval": "1s",
}


@attrs.frozen
class DaskSettings:
    """The ``--executor-option`` values, checked."""

    scheduler: str | None = None  # an existing cluster's address; None: a LocalCluster
    workers: int | None = None  # None: LocalCluster's own default (from the cores)
    threads: int | None = None  # per worker
    processes: bool = True  # worker processes: a validator that crashes one loses one worker
    retries: int = DEFAULT_RETRIES  # a task that raised on a worker (e.g. a flaky mount) again
    worker_wait: float = DEFAULT_WORKER_WAIT  # seconds with no worker before giving up


class DaskExecutor:
    """Registered as ``--executor dask``."""

    name = "dask"

    def configure(self, options: Mapping[str, str], *, jobs: int) -> DaskRun:
        # --jobs keeps its meaning on the client (how many contexts are built at
        # once); on the cluster, its workers' threads bound the work.
        return DaskRun(parse_options(options))


def parse_options(options: Mapping[str, str]) -> DaskSettings:
    """Check every ``--executor-option`` strictly; a refusal names the option."""
    unknown = [key for key in options if key not in OPTIONS]
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(key, OPTIONS, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        names = ", ".join(sorted(unknown))
        raise UsageError(
            f"--executor-option {names}: unknown to the dask executor{hint}; "
            f"it takes {', '.join(OPTIONS)}"
        )
    if "scheduler" in options and "address" in options:
        raise UsageError(
            "--executor-option address: is another name for scheduler; give one of them"
        )
    # `address` names the same thing: what `dask scheduler` prints and a Client takes.
    scheduler = options.get("scheduler", options.get("address"))
    if scheduler is not None:
        if not scheduler.strip():
            raise UsageError(
                "--executor-option scheduler: is empty; give an address like tcp://host:8786"
            )
        local = [key for key in LOCAL_OPTIONS if key in options]
        if local:
            raise UsageError(
                f"--executor-option {local[0]}: only for a local cluster; with scheduler={scheduler} "
                "the cluster's own workers run the tasks"
            )
    return DaskSettings(
        scheduler=scheduler.strip() if scheduler is not None else None,
        workers=_positive(options, "workers"),
        threads=_positive(options, "threads"),
        processes=_boolean(options, "processes", default=True),
        retries=_count(options, "retries", default=DEFAULT_RETRIES),
        worker_wait=_seconds(options, "worker_wait", default=DEFAULT_WORKER_WAIT),
    )


def _positive(options: Mapping[str, str], key: str) -> int | None:
    if key not in options:
        return None
    value = _integer(options[key], key)
    if value < 1:
        raise UsageError(f"--executor-option {key}={options[key]}: must be at least 1")
    return value


def _count(options: Mapping[str, str], key: str, *, default: int) -> int:
    if key not in options:
        return default
    value = _integer(options[key], key)
    if value < 0:
        raise UsageError(f"--executor-option {key}={options[key]}: must be 0 or more")
    return value


def _seconds(options: Mapping[str, str], key: str, *, default: float) -> float:
    if key not in options:
        return default
    text = options[key]
    try:
        value = float(text.strip())
    except ValueError:
        raise UsageError(f"--executor-option {key}={text}: must be a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise UsageError(f"--executor-option {key}={text}: must be a number of seconds above 0")
    return value


def _integer(text: str, key: str) -> int:
    try:
        return int(text.strip(), 10)
    except ValueError:
        raise UsageError(f"--executor-option {key}={text}: must be a whole number") from None


def _boolean(options: Mapping[str, str], key: str, *, default: bool) -> bool:
    if key not in options:
        return default
    text = options[key].strip().lower()
    if text in ("true", "yes", "1"):
        return True
    if text in ("false", "no", "0"):
        return False
    raise UsageError(f"--executor-option {key}={options[key]}: must be true or false")


class DaskRun:
    """A configured executor: connects (or starts a local cluster) when it runs."""

    def __init__(self, settings: DaskSettings) -> None:
        self.settings = settings

    def run(
        self, tasks: Collection[Task], *, should_stop: Callable[[], bool]
    ) -> Iterator[TaskResult]:
        if not tasks:
            return  # nothing to do: no cluster started for it
        with self._client() as client:
            yield from _Session(client, self.settings).run(tasks, should_stop)

    @contextmanager
    def _client(self) -> Iterator[Client]:
        from distributed import Client

        settings = self.settings
        if settings.scheduler is not None:
            _check_credentials(settings.scheduler)
            try:
                client = Client(settings.scheduler, timeout="10s")
            except (OSError, TimeoutError, ValueError, TypeError) as error:
                why = f"{type(error).__name__}: {error}"
                if _credentials_problem(settings.scheduler, error):
                    raise UsageError(
                        f"--executor-option scheduler={settings.scheduler}: the scheduler and "
                        f"this client do not accept each other's TLS credentials ({why}); check "
                        "distributed.comm.tls in dask's configuration (trysquare-dask's README)"
                    ) from None
                raise UsageError(
                    f"--executor-option scheduler={settings.scheduler}: no Dask scheduler "
                    f"answered there ({why})"
                ) from None
            with client:
                yield client
            return
        from trysquare_dask.memory import private_memory

        # Not dumpable before the key is made: the user's other processes cannot read it here.
        with (
            private_memory() if settings.processes else nullcontext(),
            self._local_cluster() as client,
        ):
            yield client

    @contextmanager
    def _local_cluster(self) -> Iterator[Client]:
        from distributed import Client, LocalCluster

        settings = self.settings
        keywords: dict[str, Any] = {
            "processes": settings.processes,
            **_private_comms(settings.processes),
            # No dashboard; but the scheduler and each worker still start an HTTP server (it
            # serves nothing here: NO_HTTP_ROUTES). On loopback at an ephemeral port: not on
            # every interface, which threads in this process (processes=false) otherwise get,
            # nor at a fixed 8787 that two validates on one machine contend for.
            "dashboard_address": None,
            "scheduler_kwargs": {"dashboard": False, "dashboard_address": LOOPBACK},
            "worker_dashboard_address": LOOPBACK,
        }
        if settings.workers is not None:
            keywords["n_workers"] = settings.workers
        if settings.threads is not None:
            keywords["threads_per_worker"] = settings.threads
        import dask

        # Read by the scheduler as it is made, and by each worker process through its nanny.
        with dask.config.set({**NO_HTTP_ROUTES, **QUIET_CLUSTER}):
            cluster = LocalCluster(**keywords)
        with cluster, Client(cluster) as client:
            yield client


def _check_credentials(address: str) -> None:
    """Refuse a TLS cluster trysquare holds no credentials for; warn about a clear-text one.

    A client takes its TLS credentials from dask's configuration (``distributed.comm.tls``,
    or the ``DASK_DISTRIBUTED__COMM__TLS__...`` variables) or a configured
    ``distributed.client.security-loader``. A scheduler reached over plain TCP runs
    code for anyone who reaches it, the measured agent's code included.
    """
    import dask
    from distributed.security import Security

    scheme = address.split("://", 1)[0].lower() if "://" in address else "tcp"
    if scheme in ("tls", "wss"):
        tls = Security().get_tls_config_for_role("client")
        if not (tls.get("ca_file") and tls.get("cert")) and not dask.config.get(
            "distributed.client.security-loader", None
        ):
            raise UsageError(
                f"--executor-option scheduler={address}: the cluster speaks TLS, and dask's "
                "configuration gives this client no certificate: set distributed.comm.tls.ca-file, "
                "distributed.comm.tls.client.cert and distributed.comm.tls.client.key (or "
                "DASK_DISTRIBUTED__COMM__TLS__CA_FILE, ..._CLIENT__CERT, ..._CLIENT__KEY)"
            )
    elif scheme in ("tcp", "ws"):
        print(
            f"trysquare: warning: the dask scheduler at {address} is reached in clear text, "
            "without authentication: any process that reaches it runs code on its workers, the "
            "measured agent's code included; use a cluster started with TLS (tls://, see "
            "trysquare-dask's README)",
            file=sys.stderr,
        )


def _credentials_problem(address: str, error: BaseException) -> bool:
    """Whether connecting failed on TLS credentials (a certificate refused, a key file
    missing) rather than on no scheduler being there."""
    import ssl

    if isinstance(error, ssl.SSLError):
        return True
    text = str(error)
    if "TLS" in text or "certificate" in text.lower():
        return True
    return address.lower().startswith("tls://") and isinstance(error, FileNotFoundError)


def _private_comms(processes: bool) -> dict[str, Any]:
    """How a local cluster's scheduler, nannies, workers and client talk: trysquare alone.

    The validators on the workers run the measured agent's code, and a process that
    reaches the scheduler with ``distributed.Client`` runs whatever it likes on the
    workers. Worker processes talk TLS on loopback with a throwaway certificate and
    key made here, in memory (``Security.temporary()``): each side presents it and
    checks the other's, so a connection without them — or with a certificate of its
    own — is refused at the handshake. They reach the worker processes through the
    nannies' pipes, never through a file, an argument or the environment.
    Worker threads in this process (``processes=false``) talk in memory (``inproc``):
    nothing listens for them at all.
    """
    if not processes:
        return {"protocol": "inproc://"}
    from trysquare_dask.tls import InMemorySecurity

    return {
        "protocol": "tls://",
        "host": "127.0.0.1",
        # Never written to a folder, not even for the moment a TLS context is built.
        "security": InMemorySecurity.temporary(),
        # Each worker process makes itself not dumpable as it starts (trysquare_dask.memory).
        "preload": ["trysquare_dask.memory"],
    }


class _Session:
    """One ``validate`` on one cluster: submit in a window, collect, stop on request.

    Tasks go in chunks (one dask task runs several, one after another): the scheduler, the
    workers' task machinery and this client handle a dask task, not a run. A chunk is a
    share of what remains, so the last ones are small and the threads finish together; a
    small matrix goes one task per dask task. Each run of a chunk is reported as it is
    recorded (an event on this client's topic); a chunk whose worker died, and a task that
    raised in a chunk, run again alone, as any single task.
    """

    def __init__(self, client: Client, settings: DaskSettings) -> None:
        self.client = client
        self.settings = settings
        # Names unique to this validate: another client on the same cluster has its own.
        self.token = uuid.uuid4().hex[:12]
        self.stop_event = f"trysquare-stop-{self.token}"

    def run(self, tasks: Collection[Task], should_stop: Callable[[], bool]) -> Iterator[TaskResult]:
        from distributed import Event, as_completed

        from trysquare_dask.worker import run_chunk, run_task, semaphore_for

        stop = Event(self.stop_event, client=self.client)
        total = len(tasks)
        pending = iter(enumerate(tasks))
        taken = 0
        alone: deque[tuple[int, Task]] = deque()  # to run one per dask task
        running: dict[object, _Unit] = {}
        in_flight: dict[int, Task] = {}  # every task submitted and not reported yet, by number
        completed = as_completed()
        heard: queue.SimpleQueue[Any] = queue.SimpleQueue()
        # This client's own topic: the scheduler forgets its events when the client leaves.
        topic = str(self.client.id)
        self.client.subscribe_topic(topic, heard.put)
        workerless = _WorkerlessClock(self.client, self.settings.worker_wait)

        def submit(members: list[tuple[int, Task]]) -> None:
            number, task = members[0]
            if len(members) == 1:
                future = self.client.submit(
                    run_task,
                    task,
                    stop_event=self.stop_event,
                    semaphore=semaphore_for(task.validation),
                    key=f"trysquare-{self.token}-{number}",
                    pure=False,
                    retries=self.settings.retries,
                )
                marker = None
            else:
                marker = f"trysquare-chunk-{self.token}-{number}"
                future = self.client.submit(
                    run_chunk,
                    [(n, t, semaphore_for(t.validation)) for n, t in members],
                    stop_event=self.stop_event,
                    topic=topic,
                    token=self.token,
                    chunk=marker,
                    key=f"trysquare-{self.token}-chunk-{number}",
                    pure=False,
                    retries=0,  # a chunk runs once; what it did not record runs alone
                )
            running[future.key] = _Unit(future, members, marker)
            in_flight.update(members)
            completed.add(future)

        def submit_more() -> None:
            nonlocal taken
            threads = max(1, workerless.threads)
            # A couple of dask tasks per cluster thread, not the whole matrix: the scheduler
            # holds few contexts, and a stop leaves little to cancel.
            window = max(4, 2 * threads)
            while len(running) < window:
                if alone:
                    submit([alone.popleft()])
                    continue
                members = list(itertools.islice(pending, chunk_size(total - taken, threads)))
                if not members:
                    return
                taken += len(members)
                submit(members)

        def reported() -> Iterator[TaskResult]:
            from trysquare.api import TaskResult

            while not heard.empty():
                _, message = heard.get()
                if not (isinstance(message, dict) and message.get("trysquare") == self.token):
                    continue  # the scheduler's own news about this client
                number = message.get("number")
                task = in_flight.pop(number, None) if isinstance(number, int) else None
                if task is not None:
                    yield TaskResult.from_document(task, message["document"])

        try:
            submit_more()
            while running:
                if should_stop():
                    stop.set()  # a task still running records nothing, as with the local pool
                    return
                yield from reported()
                if not completed.has_ready():
                    if workerless.expired():
                        raise UsageError(
                            f"dask: {self._where()} has had no worker for "
                            f"{self.settings.worker_wait:g} s while {len(in_flight)} tasks "
                            "waited; nothing was recorded for them: start workers (or give them "
                            "longer with --executor-option worker_wait=SECONDS) and run "
                            "validate again"
                        )
                    time.sleep(POLL_SECONDS)
                    continue
                for future in completed.next_batch(block=False):
                    unit = running.pop(future.key)
                    if unit.marker is None:
                        number, task = unit.members[0]
                        result = self._result(future, task) if number in in_flight else None
                        in_flight.pop(number, None)
                        results = [] if result is None else [result]
                    else:
                        # What a chunk reported before it ended arrived before its end did.
                        results = [*reported(), *self._chunk(unit, in_flight, alone)]
                    # Let the scheduler forget it now: while a client holds a finished task's
                    # future, a worker that dies holding its (small) result has it computed
                    # again, and the validator rewrites a result already recorded.
                    future.release()
                    yield from results
                submit_more()
        finally:
            self.client.unsubscribe_topic(topic)
            # Tasks not started never will; results already written stay (whole files).
            if running:
                self.client.cancel([unit.future for unit in running.values()])
                for unit in running.values():
                    if unit.marker is not None:
                        _forget_marker(self.client, unit.marker)

    def _chunk(
        self, unit: _Unit, in_flight: dict[int, Task], alone: deque[tuple[int, Task]]
    ) -> list[TaskResult]:
        """The results of a finished chunk not reported yet; what it did not run goes to
        ``alone``."""
        from concurrent.futures import CancelledError

        from trysquare.api import TaskResult

        from trysquare_dask.worker import CHUNK_LOST, WorkerCannotSeeRuns

        try:
            value = unit.future.result()
        except CancelledError:
            value = []
        except WorkerCannotSeeRuns as error:
            raise UsageError(str(error)) from None
        except Exception:  # noqa: BLE001 - e.g. KilledWorker: each of its tasks is tried alone
            value = CHUNK_LOST
        finally:
            _forget_marker(self.client, unit.marker)
        results: list[TaskResult] = []
        if value == CHUNK_LOST:
            alone.extend((n, t) for n, t in unit.members if n in in_flight)
            for number, _ in unit.members:
                in_flight.pop(number, None)
            return results
        ran = dict(value)
        for number, task in unit.members:
            if number not in in_flight:
                continue  # reported already
            del in_flight[number]
            if number not in ran:
                continue  # not run: a stop came first
            document = ran[number]
            if document is None:
                alone.append((number, task))  # it raised: dask's retries apply alone
            else:
                results.append(TaskResult.from_document(task, document))
        return results

    def _where(self) -> str:
        if self.settings.scheduler is not None:
            return f"the cluster at {self.settings.scheduler}"
        return "the local cluster"

    def _result(self, future: Future[Any], task: Task) -> TaskResult | None:
        from concurrent.futures import CancelledError

        from trysquare.api import TaskResult

        from trysquare_dask.worker import WorkerCannotSeeRuns

        try:
            document = future.result()
        except CancelledError:  # distributed's FutureCancelledError derives from it
            return None
        except WorkerCannotSeeRuns as error:
            raise UsageError(str(error)) from None
        except Exception as error:  # noqa: BLE001 - the cluster gave up on one task, not the matrix
            # E.g. KilledWorker: the task's worker died more often than
            # distributed.scheduler.allowed-failures allows. The run is invalid, and says why.
            return record_cluster_failure(task, f"{type(error).__name__}: {error}")
        # The worker sends back the document it wrote, structured strictly into the record here.
        return None if document is None else TaskResult.from_document(task, document)


def chunk_size(remaining: int, threads: int) -> int:
    """How many of the ``remaining`` tasks the next dask task runs, on ``threads`` threads."""
    return max(1, min(MAX_CHUNK, remaining // (CHUNKS_PER_THREAD * max(1, threads))))


@attrs.frozen
class _Unit:
    """One dask task in flight: one trysquare task, or a chunk of them (with its marker)."""

    future: Future[Any]
    members: list[tuple[int, Task]]
    marker: str | None  # the chunk's "started" event on the scheduler; None for one task


def _forget_marker(client: Client, marker: str | None) -> None:
    """Let the scheduler drop a chunk's "started" event (it keeps one that is set)."""
    if marker is None:
        return
    from distributed import Event

    # A cluster going away forgets it anyway.
    with suppress(Exception):
        Event(marker, client=client).clear()


class _WorkerlessClock:
    """How long the cluster has had no worker at all, looked at once a second.

    Tasks submitted to a scheduler without workers wait there for ever, and so would
    ``validate``: every worker died and none came back, or a remote cluster was scaled
    to nothing. Busy workers are not counted, only their absence.
    """

    def __init__(self, client: Client, patience: float) -> None:
        self.client = client
        self.patience = patience
        self.last_look = time.monotonic()
        self.since: float | None = None
        # The cluster's threads when last looked at: what the window and the chunks are sized by.
        self.threads = sum(client.nthreads().values())

    def expired(self) -> bool:
        now = time.monotonic()
        if now - self.last_look < WORKER_LOOK_SECONDS:
            return False
        self.last_look = now
        self.threads = sum(self.client.nthreads().values())
        if self.threads:
            self.since = None
            return False
        if self.since is None:
            self.since = now
        return now - self.since >= self.patience


def record_cluster_failure(task: Task, cause: str) -> TaskResult:
    """Record, from the client, that the cluster could not run ``task``: an invalid result."""
    from trysquare.api import record_invalid

    return record_invalid(
        task,
        f"the dask cluster could not run validator '{task.validation.name}' on this run: {cause}",
    )

"""A Dask cluster started the way an operator starts one: `dask scheduler` and `dask worker`.

Each is its own process from its own command line, on loopback with ephemeral
ports: the scheduler writes its address to a scheduler file, the workers join it.
All start at once (a worker waits for the scheduler file itself): each spends a
second or two importing distributed, and on two cores those imports overlap.
Used by the tests and by benchmarks/bench_dask.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

DASK = str(Path(sys.executable).with_name("dask"))


def quiet_environment() -> dict[str, str]:
    """The settings the executor gives its own LocalCluster
    (``trysquare_dask.executor.QUIET_CLUSTER``) as the environment variables the plugin's README
    tells an operator to start a cluster of their own with."""
    from trysquare_dask.executor import QUIET_CLUSTER

    # dask's spelling of a setting as an environment variable
    return {
        "DASK_" + "__".join(part.upper().replace("-", "_") for part in key.split(".")): str(value)
        for key, value in QUIET_CLUSTER.items()
    }


class CommandLineCluster:
    """``with CommandLineCluster(folder, workers=2, threads=1) as cluster: cluster.address``."""

    def __init__(
        self,
        folder: Path,
        *,
        workers: int = 2,
        threads: int = 1,
        env: Mapping[str, str] | None = None,
        timeout: float = 90.0,
        nanny: bool = True,
        tls: Mapping[str, str] | None = None,
        preload: Sequence[str] = (),
    ) -> None:
        self.folder = Path(folder)
        self.workers = workers
        self.threads = threads
        self.env = dict(os.environ if env is None else env)
        # Their scratch space in the cluster's folder, not a /tmp/dask-scratch-space shared
        # with every other dask on the machine.
        self.env["DASK_TEMPORARY_DIRECTORY"] = str(self.folder / "scratch")
        self.timeout = timeout
        # Without a nanny a worker is one process, not a nanny importing distributed and then
        # starting the worker, which imports it again: half the start-up. Nothing restarts it.
        self.nanny = nanny
        # {"ca": ..., "cert": ..., "key": ...}: files every process of the cluster presents
        # (and asks the other side for), as an operator's TLS cluster is started.
        self.tls = dict(tls) if tls else None
        # Preload modules of each worker (and its nanny).
        self.preload = list(preload)
        self.processes: list[subprocess.Popen[bytes]] = []
        self.address = ""

    def _tls_options(self) -> list[str]:
        if self.tls is None:
            return []
        return [
            "--tls-ca-file",
            self.tls["ca"],
            "--tls-cert",
            self.tls["cert"],
            "--tls-key",
            self.tls["key"],
        ]

    def security(self) -> Any:
        """What a client of this cluster presents (None: clear text)."""
        if self.tls is None:
            return None
        from distributed.security import Security

        return Security(
            tls_ca_file=self.tls["ca"],
            tls_client_cert=self.tls["cert"],
            tls_client_key=self.tls["key"],
            require_encryption=True,
        )

    def _start(self, *args: str, log: str) -> subprocess.Popen[bytes]:
        with open(self.folder / log, "wb") as out:
            # A process group of its own: the teardown ends the whole tree (nanny, worker,
            # validators). Not a session of its own: a validate run in this process ends every
            # child of it that left its session, as a validator's escaped grandchild.
            process = subprocess.Popen(
                [DASK, *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                process_group=0,
                cwd=self.folder,
            )
        self.processes.append(process)
        return process

    def __enter__(self) -> Self:
        self.folder.mkdir(parents=True, exist_ok=True)
        scheduler_file = self.folder / "scheduler.json"
        try:
            # Without a dashboard each still serves HTTP: at port 0 too, not a contended 8787.
            protocol = ["--protocol", "tls"] if self.tls else []
            self._start(
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
                "--dashboard-address",
                "127.0.0.1:0",
                *protocol,
                *self._tls_options(),
                "--scheduler-file",
                str(scheduler_file),
                log="scheduler.log",
            )
            preloads: list[str] = []
            for module in self.preload:
                preloads += ["--preload", module]
                if self.nanny:
                    preloads += ["--preload-nanny", module]
            for number in range(self.workers):
                self._start(
                    "worker",
                    "--scheduler-file",
                    str(scheduler_file),
                    "--host",
                    "127.0.0.1",
                    "--nthreads",
                    str(self.threads),
                    "--nworkers",
                    "1",
                    "--no-dashboard",
                    "--dashboard-address",
                    "127.0.0.1:0",
                    *self._tls_options(),
                    *preloads,
                    "--nanny" if self.nanny else "--no-nanny",
                    "--name",
                    f"w{number}",
                    log=f"worker{number}.log",
                )
            deadline = time.monotonic() + self.timeout
            # The scheduler creates its file before it has written it: wait until it parses.
            while (address := self._scheduler_address(scheduler_file)) is None:
                self._alive_or_fail(deadline)
                time.sleep(0.05)
            self.address = address
            self._wait_for_workers(deadline)
        except BaseException:
            self.__exit__()
            raise
        return self

    @staticmethod
    def _scheduler_address(scheduler_file: Path) -> str | None:
        try:
            return str(json.loads(scheduler_file.read_text())["address"])
        except (OSError, ValueError, KeyError):
            return None

    def _alive_or_fail(self, deadline: float) -> None:
        for process in self.processes:
            if process.poll() is not None:
                raise RuntimeError(f"a dask process exited ({process.args}): {self.logs()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the dask cluster did not come up: {self.logs()}")

    def _wait_for_workers(self, deadline: float) -> None:
        from distributed import Client

        with Client(self.address, timeout=self.timeout, security=self.security()) as client:
            while len(client.scheduler_info()["workers"]) < self.workers:
                self._alive_or_fail(deadline)
                time.sleep(0.05)

    def logs(self) -> str:
        return "\n".join(
            path.read_text(errors="replace")[-2000:] for path in sorted(self.folder.glob("*.log"))
        )

    def __exit__(self, *_: object) -> None:
        # Killed outright: nothing of theirs outlives the test (their scratch space is in the
        # cluster's folder), and a polite close costs a second or more on a loaded machine.
        for process in reversed(self.processes):
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for process in reversed(self.processes):
            process.wait()

"""A Dask cluster started the way an operator starts one: `dask scheduler` and `dask worker`.

Each is its own process from its own command line, on loopback with ephemeral
ports: the scheduler writes its address to a scheduler file, the workers join it.
Used by the tests and by benchmarks/bench_dask.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

DASK = str(Path(sys.executable).with_name("dask"))


class CommandLineCluster:
    """``with CommandLineCluster(folder, workers=2, threads=1) as cluster: cluster.address``."""

    def __init__(self, folder: Path, *, workers: int = 2, threads: int = 1,
                 env: Mapping[str, str] | None = None, timeout: float = 90.0) -> None:
        self.folder = Path(folder)
        self.workers = workers
        self.threads = threads
        self.env = dict(os.environ if env is None else env)
        self.timeout = timeout
        self.processes: list[subprocess.Popen[bytes]] = []
        self.address = ""

    def _start(self, *args: str, log: str) -> subprocess.Popen[bytes]:
        with open(self.folder / log, "wb") as out:
            # A session of its own: the teardown ends the whole tree (nanny, worker, validators).
            process = subprocess.Popen([DASK, *args], stdout=out, stderr=subprocess.STDOUT,
                                       env=self.env, start_new_session=True, cwd=self.folder)
        self.processes.append(process)
        return process

    def __enter__(self) -> CommandLineCluster:
        self.folder.mkdir(parents=True, exist_ok=True)
        scheduler_file = self.folder / "scheduler.json"
        try:
            self._start("scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                        "--scheduler-file", str(scheduler_file), log="scheduler.log")
            deadline = time.monotonic() + self.timeout
            # The scheduler creates its file before it has written it: wait until it parses.
            while (address := self._scheduler_address(scheduler_file)) is None:
                self._alive_or_fail(deadline)
                time.sleep(0.1)
            self.address = address
            for number in range(self.workers):
                self._start("worker", self.address, "--host", "127.0.0.1", "--nthreads",
                            str(self.threads), "--nworkers", "1", "--no-dashboard",
                            "--name", f"w{number}", log=f"worker{number}.log")
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

        with Client(self.address, timeout=self.timeout) as client:
            while len(client.scheduler_info()["workers"]) < self.workers:
                self._alive_or_fail(deadline)
                time.sleep(0.1)

    def logs(self) -> str:
        return "\n".join(path.read_text(errors="replace")[-2000:] for path in sorted(self.folder.glob("*.log")))

    def __exit__(self, *_: object) -> None:
        for process in reversed(self.processes):
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for process in reversed(self.processes):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()

"""A cluster started from the command line (`dask scheduler`, two `dask worker`), reached by address.

Not a LocalCluster: the scheduler and each worker are processes of their own, as an
operator runs them, on loopback with ephemeral ports.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.dask.cli_cluster import CommandLineCluster
from tests.dask.conftest import Matrix, comparable

pytestmark = pytest.mark.slow


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie awaiting its parent counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_a_command_line_cluster_writes_what_the_local_pool_writes(cli, matrix, tmp_path: Path) -> None:
    m: Matrix = matrix(["r1", "r2", "bad1", "r3"])
    on_cluster = m.copy("exp-cluster")
    local = cli("validate", m.scenario, m.exp, "--no-progress", "--only", "score", "--jobs", "2")
    with CommandLineCluster(tmp_path / "cluster", workers=2, threads=1, env=cli.env) as cluster:
        dask = cli("validate", m.scenario, on_cluster, "--no-progress", "--only", "score",
                   "--executor", "dask", "--executor-option", f"address={cluster.address}")
    assert local.returncode == dask.returncode == 1, dask.stdout + dask.stderr
    assert dask.stdout.splitlines()[-1] == local.stdout.splitlines()[-1]
    expected, got = m.results(m.exp), m.results(on_cluster)
    assert sorted(got) == sorted(expected) and len(got) == 4
    for key, document in expected.items():
        assert comparable(got[key]) == comparable(document), key
    assert got[("bad1", "score")]["state"] == "invalid"


def test_an_interrupted_validate_kills_the_validators_running_on_workers(cli, matrix, tmp_path: Path) -> None:
    ids = ["r1", "r2", "r3", "r4"]
    m: Matrix = matrix(ids, timeout=120)
    for run_id in ids:
        (m.exp / "runs" / run_id / "delay.txt").write_text("60")
    with CommandLineCluster(tmp_path / "cluster", workers=2, threads=1, env=cli.env) as cluster:
        process = subprocess.Popen(
            [sys.executable, "-m", "trysquare", "validate", m.scenario, m.exp, "--no-progress",
             "--only", "score", "--executor", "dask", "--executor-option", f"address={cluster.address}"],
            env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        deadline = time.monotonic() + 90
        started: list[Path] = []
        while len(started) < 2:  # one validator on each worker's one thread
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.1)
            started = list(m.exp.glob("runs/*/validation/score/started.txt"))
        pids = [int(path.read_text()) for path in started]
        assert all(running(pid) for pid in pids)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
        assert process.returncode == 130, stdout + stderr
        # Killed on their workers within moments, not left to sleep out their minute.
        deadline = time.monotonic() + 15
        while any(running(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(running(pid) for pid in pids), cluster.logs()
    # Nothing recorded for a killed validator: the next validate does those runs.
    assert m.results() == {}
    assert m.leftovers() == []

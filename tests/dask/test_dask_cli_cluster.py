"""A cluster started from the command line (`dask scheduler`, two `dask worker`), reached by address.

Not a LocalCluster: the scheduler and each worker are processes of their own, as an
operator runs them, on loopback with ephemeral ports. One cluster serves the module
(``command_line_cluster``): no test here kills a worker.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.dask.cli_cluster import CommandLineCluster
from tests.dask.conftest import GROUP, Matrix, comparable

pytestmark = [pytest.mark.slow, GROUP]


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie awaiting its parent counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_a_command_line_cluster_writes_what_the_local_pool_writes(
    cli, matrix, command_line_cluster: CommandLineCluster
) -> None:
    m: Matrix = matrix(["r1", "r2", "bad1", "r3"])
    on_cluster = m.copy("exp-cluster")
    local = cli("validate", m.scenario, m.exp, "--no-progress", "--only", "score", "--jobs", "2")
    dask = cli(
        "validate",
        m.scenario,
        on_cluster,
        "--no-progress",
        "--only",
        "score",
        "--executor",
        "dask",
        "--executor-option",
        f"address={command_line_cluster.address}",
    )
    assert local.returncode == dask.returncode == 1, dask.stdout + dask.stderr
    assert dask.stdout.splitlines()[-1] == local.stdout.splitlines()[-1]
    expected, got = m.results(m.exp), m.results(on_cluster)
    assert sorted(got) == sorted(expected) and len(got) == 4
    for key, document in expected.items():
        assert comparable(got[key]) == comparable(document), key
    assert got[("bad1", "score")]["state"] == "invalid"


def test_an_interrupted_validate_kills_the_validators_on_workers_and_starts_no_other(
    cli, matrix, command_line_cluster: CommandLineCluster
) -> None:
    # Submitted in this order to two single-thread workers: q1 is done at once, s1 and s2
    # are running (a minute each) when the interrupt comes, s3 and s4 have not started.
    slow = ["s1", "s2", "s3", "s4"]
    m: Matrix = matrix(["q1", *slow], timeout=120)
    for run_id in slow:
        (m.exp / "runs" / run_id / "delay.txt").write_text("60")
    process = subprocess.Popen(
        [sys.executable, "-m", "trysquare", "validate", m.scenario, m.exp, "--no-progress",
         "--only", "score", "--executor", "dask", "--executor-option",
         f"address={command_line_cluster.address}"],
        env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    started: list[Path] = []
    while len(started) < 2 or not m.results():  # one validator on each worker's one thread
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
        started = list(m.exp.glob("runs/*/validation/score/started.txt"))
    pids = [int(path.read_text()) for path in started]
    assert all(running(pid) for pid in pids)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stdout + stderr
    assert "interrupted:" in stderr and "Traceback" not in stderr
    # Killed on their workers within moments, not left to sleep out their minute.
    deadline = time.monotonic() + 15
    while any(running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(running(pid) for pid in pids), command_line_cluster.logs()
    # The cluster outlives the client: what had not started must never start. Given a moment
    # to (a freed worker takes its next task at once), no third validator says it started.
    time.sleep(0.3)
    assert len(list(m.exp.glob("runs/*/validation/score/started.txt"))) == 2
    # Only what finished is recorded, whole; nothing for a killed validator.
    assert {run for run, _ in m.results()} == {"q1"}
    assert m.results()[("q1", "score")]["state"] == "valid"
    assert m.leftovers() == []
    # The next validate does the rest (here without the minute's sleep, on the local pool).
    for run_id in slow:
        (m.exp / "runs" / run_id / "delay.txt").unlink()
    again = cli("validate", m.scenario, m.exp, "--no-progress", "--only", "score", "--jobs", "2")
    assert again.returncode == 0, again.stdout + again.stderr
    assert sorted(run for run, _ in m.results()) == ["q1", *slow]


def test_tasks_on_a_cluster_with_no_worker_end_validate_saying_so(
    cli_process, matrix, tmp_path: Path
) -> None:
    """Tasks submitted to a scheduler without workers would wait there for ever, and validate
    with them: after ``worker_wait`` seconds with no worker it stops, exit 2, nothing recorded.
    (A real process with a deadline: without the clock, the wait would never end.)"""
    m: Matrix = matrix(["r1", "r2"])
    with CommandLineCluster(tmp_path / "cluster", workers=0) as cluster:
        done = cli_process(
            "validate",
            m.scenario,
            m.exp,
            "--no-progress",
            "--only",
            "score",
            "--executor",
            "dask",
            "--executor-option",
            f"address={cluster.address}",
            "--executor-option",
            "worker_wait=1",
            timeout=120,
        )
    assert done.returncode == 2, done.stdout + done.stderr
    assert (
        f"dask: the cluster at {cluster.address} has had no worker for 1 s while 2 tasks "
        "waited; nothing was recorded for them"
    ) in done.stderr
    assert "Traceback" not in done.stderr
    assert not list(m.exp.glob("runs/*/validation/score.json"))

"""The dask executor on real clusters, through the CLI as a user drives it.

Each test starts at most one cluster (a few seconds on two cores); they are
marked slow and run anyway.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.dask.conftest import Matrix, comparable

# One worker of the suite runs them one after another: two clusters starting at once on
# two cores starve each other past the tests' deadlines.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("dask-clusters")]

# Two worker processes, as the issue asks: tasks really leave the client's process.
CLUSTER = (
    "--executor",
    "dask",
    "--executor-option",
    "workers=2",
    "--executor-option",
    "threads=2",
    "--executor-option",
    "processes=true",
)


def progress_lines(stdout: str) -> list[str]:
    """Progress lines without their counter, sorted: the order of completion may differ."""
    return sorted(line.split("] ", 1)[1] for line in stdout.splitlines() if line.startswith("["))


def test_a_local_cluster_writes_what_the_local_pool_writes(cli, matrix) -> None:
    m: Matrix = matrix(["r1", "r2", "bad1", "hang1", "r3"], timeout=1.5)
    on_cluster = m.copy("exp-dask")

    local = cli("validate", m.scenario, m.exp, "--no-progress", "--jobs", "2")
    dask = cli("validate", m.scenario, on_cluster, "--no-progress", *CLUSTER)

    assert local.returncode == dask.returncode == 1, dask.stderr
    assert "Traceback" not in dask.stderr
    # Same progress and the same closing line: they come from the runner either way.
    assert dask.stdout.splitlines()[-1] == local.stdout.splitlines()[-1]
    assert "2 invalid, 3 pending" in dask.stdout.splitlines()[-1]
    assert progress_lines(dask.stdout) == progress_lines(local.stdout)

    expected, got = m.results(m.exp), m.results(on_cluster)
    assert sorted(got) == sorted(expected) and len(got) == 10
    for key, document in expected.items():
        assert comparable(got[key]) == comparable(document), key
    for context in m.exp.glob("runs/*/validation/*/context.json"):
        twin = on_cluster / context.relative_to(m.exp)
        assert twin.read_text().replace(str(on_cluster), str(m.exp)) == context.read_text()
    assert got[("bad1", "score")]["state"] == "invalid"
    assert "exited with code 3" in got[("bad1", "score")]["error"]
    assert "exceeded its timeout" in got[("hang1", "score")]["error"]
    assert got[("r1", "score")]["metrics"] == {"changed": True, "files": 2}
    # The evidence a worker kept is the same too.
    stderr = on_cluster / "runs" / "bad1" / "validation" / "score.stderr"
    assert "broken on purpose" in stderr.read_text()

    def measures(root: Path) -> list[dict]:
        return json.loads((root / "measures.json").read_text())

    assert measures(on_cluster) == measures(m.exp)
    assert m.leftovers(on_cluster) == []

    # A second validate reuses every result, as with the local pool: no cluster needed.
    again = cli("validate", m.scenario, on_cluster, "--no-progress", *CLUSTER)
    assert again.returncode == 1
    assert again.stdout.splitlines() == [local.stdout.splitlines()[-1] + "; 10 results unchanged (reused)"]


def test_a_worker_killed_mid_matrix_leaves_every_run_one_whole_result(cli, matrix) -> None:
    ids = [f"r{number}" for number in range(1, 9)]
    m: Matrix = matrix(ids)
    for run_id in ids:
        (m.exp / "runs" / run_id / "delay.txt").write_text("0.4")
    # r3's validator kills the worker process running it (SIGKILL), once: its task,
    # and the other one running on that worker, must run again elsewhere.
    (m.exp / "runs" / "r3" / "kill-worker.txt").write_text("")

    done = cli("validate", m.scenario, m.exp, "--no-progress", "--only", "score", *CLUSTER)

    assert done.returncode == 0, done.stdout + done.stderr
    assert (m.exp / "runs" / "r3" / "validation" / "score" / "killed-worker.txt").exists(), "no worker was killed"
    results = m.results()  # parses every file: a half-written one fails here
    assert sorted(results) == sorted((run_id, "score") for run_id in ids)
    for document in results.values():
        assert document["state"] == "valid", document
        assert document["metrics"] == {"changed": True, "files": 2}
    # One recorded result per task: a re-run never stacked a second one into the history.
    assert list(m.exp.rglob("*.history.jsonl")) == []
    assert m.leftovers() == []
    assert done.stdout.splitlines()[-1] == "8 runs: 8 pending"  # the form is never filled here


def test_an_existing_cluster_is_used_by_its_address(cli, matrix) -> None:
    from distributed import LocalCluster

    m: Matrix = matrix(["r1", "bad1"])
    # Threads in this process, cheap: what is shown is that validate reaches a cluster it did
    # not start, by its scheduler's address over TCP.
    with LocalCluster(
        n_workers=1,
        threads_per_worker=2,
        processes=False,
        protocol="tcp",
        host="127.0.0.1",
        dashboard_address=None,
    ) as cluster:
        done = cli(
            "validate",
            m.scenario,
            m.exp,
            "--no-progress",
            "--only",
            "score",
            "--executor",
            "dask",
            "--executor-option",
            f"scheduler={cluster.scheduler_address}",
        )
    assert done.returncode == 1, done.stderr
    results = m.results()
    assert results[("r1", "score")]["state"] == "valid"
    assert results[("bad1", "score")]["state"] == "invalid"
    assert (
        done.stdout.splitlines()[-1]
        == "2 runs: 1 invalid, 1 pending (cell 'c1' is not publishable)"
    )


def test_an_interrupted_validate_cancels_what_has_not_started(cli, matrix) -> None:
    ids = [f"r{number}" for number in range(1, 11)]
    m: Matrix = matrix(ids)
    for run_id in ids:
        (m.exp / "runs" / run_id / "delay.txt").write_text("1.0")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trysquare",
            "validate",
            m.scenario,
            m.exp,
            "--no-progress",
            "--only",
            "score",
            "--executor",
            "dask",
            "--executor-option",
            "workers=1",
            "--executor-option",
            "threads=2",
        ],
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 180  # a cluster starting on a loaded machine
    while not list(m.exp.glob("runs/*/validation/score.json")):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stdout + stderr
    assert "interrupted:" in stderr and "Traceback" not in stderr
    results = m.results()
    assert 1 <= len(results) < len(ids)
    assert all(document["state"] == "valid" for document in results.values())
    assert m.leftovers() == []
    # The rest is done by the next validate.
    again = cli("validate", m.scenario, m.exp, "--no-progress", "--only", "score", "--jobs", "4")
    assert again.returncode == 0 and len(m.results()) == len(ids)
    assert os.path.exists(m.exp / "measures.json")


def test_the_judge_concurrency_bound_holds_across_worker_processes(lab) -> None:
    """Two worker processes of three threads each: six conversations could run at once.

    Each process's own connection allows max_concurrency requests; only the
    cluster-wide semaphore keeps the two processes together within it.
    """
    from tests.judge.chatserver import Reply, verdict

    lab.write_config(max_concurrency=2)
    for number in range(6):
        lab.run(f"r{number}", repetition=number + 1)
    good = {"note_usable": True, "cites_paths": True}
    lab.respond(lambda _: Reply(body=verdict(good).body, delay=0.3))
    done = lab.validate(
        "--executor",
        "dask",
        "--executor-option",
        "workers=2",
        "--executor-option",
        "threads=3",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(lab.server.received) == 6
    assert lab.server.peak == 2
    assert all(lab.result(f"r{number}")["metrics"] == good for number in range(6))


def test_a_task_whose_worker_always_dies_makes_its_run_invalid_saying_so(cli_process, matrix) -> None:
    m: Matrix = matrix(["doom1"])
    (m.exp / "runs" / "doom1" / "kill-worker-always.txt").write_text("")
    # A real process: dask reads DASK_* from the environment once, when it is imported.
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
        "workers=1",
        "--executor-option",
        "threads=1",
        # No second chance, so the test does not wait for worker restarts.
        env={"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    result = m.results()[("doom1", "score")]
    assert result["state"] == "invalid"
    assert (
        "the dask cluster could not run validator 'score' on this run: KilledWorker"
        in result["error"]
    )
    assert result["metrics"] == {}
    assert "invalid: the dask cluster could not run" in done.stdout
    assert m.leftovers() == []

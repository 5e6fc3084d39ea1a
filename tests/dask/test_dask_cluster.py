"""The dask executor on real clusters, through the CLI as a user drives it.

A cluster costs seconds of imports on two cores, so there are few: one LocalCluster
of worker processes the executor starts (a worker killed in it), one of a single
worker that always dies, two of threads in this process, and the command-line
cluster the package shares (``command_line_cluster``) for the judge's bound.
Interruption is shown on that cluster too (test_dask_cli_cluster.py). Marked slow,
and run anyway.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.dask.conftest import GROUP, Matrix, comparable

# One worker of the suite runs them one after another: two clusters starting at once on
# two cores starve each other past the tests' deadlines.
pytestmark = [pytest.mark.slow, GROUP]

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


def test_a_local_cluster_writes_what_the_local_pool_writes_though_a_worker_is_killed(
    cli, matrix
) -> None:
    m: Matrix = matrix(["r1", "r2", "bad1", "hang1", "r3"], timeout=1.5)
    on_cluster = m.copy("exp-dask")
    # On the cluster only (locally it would kill this process): r3's validator kills the
    # worker process running it (SIGKILL), once. Its task, and the one running beside it
    # on that worker (each validator takes a moment), must run again elsewhere.
    for run in on_cluster.glob("runs/*"):
        (run / "delay.txt").write_text("0.3")
    (on_cluster / "runs" / "r3" / "kill-worker.txt").write_text("")

    local = cli("validate", m.scenario, m.exp, "--no-progress", "--jobs", "2")
    dask = cli("validate", m.scenario, on_cluster, "--no-progress", *CLUSTER)

    assert local.returncode == dask.returncode == 1, dask.stderr
    assert "Traceback" not in dask.stderr
    assert (on_cluster / "runs" / "r3" / "validation" / "score" / "killed-worker.txt").exists(), (
        "no worker was killed"
    )
    # Same progress and the same closing line: they come from the runner either way.
    assert dask.stdout.splitlines()[-1] == local.stdout.splitlines()[-1]
    assert "2 invalid, 3 pending" in dask.stdout.splitlines()[-1]
    assert progress_lines(dask.stdout) == progress_lines(local.stdout)

    # Every file parses (a half-written one fails here) and says what the local pool's says.
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
    assert (
        got[("r1", "score")]["metrics"]
        == got[("r3", "score")]["metrics"]
        == {"changed": True, "files": 2}
    )
    # The evidence a worker kept is the same too.
    stderr = on_cluster / "runs" / "bad1" / "validation" / "score.stderr"
    assert "broken on purpose" in stderr.read_text()

    def measures(root: Path) -> list[dict]:
        return json.loads((root / "measures.json").read_text())

    assert measures(on_cluster) == measures(m.exp)
    # One recorded result per killed or interrupted script task: a re-run never stacked a
    # second one into the history. (Not asserted for the form: a quick task that wrote its
    # result on the dying worker, but had not reported it yet, runs again and may.)
    assert list(on_cluster.rglob("score.history.jsonl")) == []
    assert m.leftovers(on_cluster) == []

    # A second validate reuses every result, as with the local pool: no cluster needed.
    again = cli("validate", m.scenario, on_cluster, "--no-progress", *CLUSTER)
    assert again.returncode == 1
    assert again.stdout.splitlines() == [
        local.stdout.splitlines()[-1] + "; 10 results unchanged (reused)"
    ]


def test_runs_in_chunks_record_what_the_local_pool_records_though_a_worker_dies_mid_chunk(
    cli, matrix
) -> None:
    """40 tasks on two single-thread workers go in chunks (of 5, 4, 3, 3, ...). The worker
    running r07's score dies, the last of a chunk that ran r06's two tasks first: those were
    reported and are not run again (no result moves into a history), r07's runs alone
    elsewhere, and every result is the local pool's."""
    ids = [f"r{number:02d}" for number in range(20)]
    m: Matrix = matrix(ids)
    on_cluster = m.copy("exp-dask")
    for run in on_cluster.glob("runs/*"):
        (run / "delay.txt").write_text("0.2")
    (on_cluster / "runs" / "r07" / "kill-worker-later.txt").write_text("")

    local = cli("validate", m.scenario, m.exp, "--no-progress", "--jobs", "2")
    dask = cli("validate", m.scenario, on_cluster, "--no-progress", "--executor", "dask",
               "--executor-option", "workers=2", "--executor-option", "threads=1")  # fmt: skip

    assert local.returncode == dask.returncode == 0, dask.stdout + dask.stderr
    assert (on_cluster / "runs" / "r07" / "validation" / "score" / "killed-worker.txt").exists()
    assert dask.stdout.splitlines()[-1] == local.stdout.splitlines()[-1]
    expected, got = m.results(m.exp), m.results(on_cluster)
    assert sorted(got) == sorted(expected) and len(got) == 40
    for key, document in expected.items():
        assert comparable(got[key]) == comparable(document), key
    assert list(on_cluster.rglob("score.history.jsonl")) == []
    assert m.leftovers(on_cluster) == []


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
        done.stdout.splitlines()[-1] == "2 runs: 1 valid, 1 invalid (cell 'c1' is not publishable)"
    )


def test_the_judge_concurrency_bound_holds_across_worker_processes(
    lab, command_line_cluster
) -> None:
    """Two worker processes, each free to hold a conversation: two could run at once.

    Each process's own connection allows max_concurrency (one) request; only the
    cluster-wide semaphore keeps the two processes together within it.
    """
    from tests.judge.chatserver import Reply, verdict

    lab.write_config(max_concurrency=1)
    for number in range(4):
        lab.run(f"r{number}", repetition=number + 1)
    good = {"note_usable": True, "cites_paths": True}
    lab.respond(lambda _: Reply(body=verdict(good).body, delay=0.2))
    done = lab.validate(
        "--executor", "dask", "--executor-option", f"address={command_line_cluster.address}"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(lab.server.received) == 4
    assert lab.server.peak == 1
    assert all(lab.result(f"r{number}")["metrics"] == good for number in range(4))


def test_a_task_whose_worker_always_dies_makes_its_run_invalid_saying_so(cli, matrix) -> None:
    import dask

    m: Matrix = matrix(["doom1"])
    (m.exp / "runs" / "doom1" / "kill-worker-always.txt").write_text("")
    # No second chance, so the test does not wait for worker restarts. A LocalCluster's
    # scheduler runs in the validate process (here, this one): it reads this when it starts.
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        done = cli("validate", m.scenario, m.exp, "--no-progress", "--only", "score",
                   "--executor", "dask", "--executor-option", "workers=1", "--executor-option", "threads=1")  # fmt: skip
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


def test_a_recorded_result_is_released_on_the_cluster(matrix) -> None:
    """Once a result is handed to the runner, the cluster is no longer asked to keep it.

    A finished task a client still wants is computed again when the worker holding
    its result dies: its validator would rewrite a result already recorded (and the
    runner's guard would call the run's file forged). Threads here, cheap: what is
    shown is which keys the scheduler still keeps for this client.
    """
    import time
    from concurrent.futures import ThreadPoolExecutor

    from distributed import LocalCluster
    from trysquare.runner import ValidateOptions, plan
    from trysquare.runs import discover
    from trysquare.scenario import load_scenario
    from trysquare_dask.executor import DaskRun, parse_options

    m: Matrix = matrix(["r1", "r2", "r3"])
    scenario = load_scenario(m.scenario)
    runs = [run for experiment in discover([m.exp]) for run in experiment.runs]
    score = [v for v in scenario.validations if v.name == "score"]
    with ThreadPoolExecutor(2) as pool:
        tasks = plan(scenario, runs, score, ValidateOptions(jobs=2), [], pool)
    assert len(tasks) == 3

    def kept() -> list[str]:
        """Finished trysquare tasks the scheduler still holds for some client."""
        return [
            str(key)
            for key, state in list(cluster.scheduler.tasks.items())
            if str(key).startswith("trysquare-") and state.state == "memory" and state.who_wants
        ]

    with LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        executor = DaskRun(parse_options({"scheduler": cluster.scheduler_address}))
        documents = []
        recorded: set[str] = set()  # the key suffixes of the tasks handed back: "-<number>"
        for result in executor.run(tasks, should_stop=lambda: False):
            task = result.task
            documents.append(result.document)
            recorded.add(f"-{next(i for i, t in enumerate(tasks) if t.task is task)}")

            def still_kept() -> list[str]:
                # A later task may have finished meanwhile and wait to be collected: only the
                # recorded ones must be let go.
                return [key for key in kept() if any(key.endswith(end) for end in recorded)]

            deadline = time.monotonic() + 5  # the release is a message to the scheduler
            while still_kept() and time.monotonic() < deadline:
                time.sleep(0.02)
            assert still_kept() == [], "a recorded result is still kept on the cluster"
    assert [document["state"] for document in documents] == ["valid"] * 3

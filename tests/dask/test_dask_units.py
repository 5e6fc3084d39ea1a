"""The dask executor without a cluster: its options, its registration, what it ships."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from trysquare.errors import UsageError
from trysquare.runner import ValidateOptions, plan
from trysquare.runs import discover
from trysquare.scenario import load_scenario
from trysquare_dask.executor import DaskExecutor, DaskSettings, parse_options
from trysquare_dask.worker import semaphore_for

from tests.dask.conftest import Matrix


def test_no_option_means_a_local_cluster_with_its_own_sizes() -> None:
    assert parse_options({}) == DaskSettings()
    assert DaskSettings().scheduler is None and DaskSettings().processes is True


def test_local_cluster_options_are_read() -> None:
    settings = parse_options({"workers": "2", "threads": "4", "processes": "false", "retries": "0"})
    assert settings == DaskSettings(workers=2, threads=4, processes=False, retries=0)


def test_a_scheduler_address_is_kept() -> None:
    assert parse_options({"scheduler": " tcp://10.0.0.5:8786 "}).scheduler == "tcp://10.0.0.5:8786"


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (
            {"worker": "2"},
            "--executor-option worker: unknown to the dask executor (did you mean 'workers'?)",
        ),
        ({"zzz": "1", "aaa": "2"}, "--executor-option aaa, zzz: unknown to the dask executor"),
        ({"workers": "two"}, "--executor-option workers=two: must be a whole number"),
        ({"workers": "0"}, "--executor-option workers=0: must be at least 1"),
        ({"threads": "-1"}, "--executor-option threads=-1: must be at least 1"),
        ({"retries": "-1"}, "--executor-option retries=-1: must be 0 or more"),
        ({"processes": "maybe"}, "--executor-option processes=maybe: must be true or false"),
        (
            {"worker_wait": "soon"},
            "--executor-option worker_wait=soon: must be a number of seconds",
        ),
        (
            {"worker_wait": "0"},
            "--executor-option worker_wait=0: must be a number of seconds above 0",
        ),
        (
            {"worker_wait": "nan"},
            "--executor-option worker_wait=nan: must be a number of seconds above 0",
        ),
        ({"scheduler": ""}, "--executor-option scheduler: is empty"),
        (
            {"scheduler": "tcp://h:8786", "workers": "2"},
            "--executor-option workers: only for a local cluster; with scheduler=tcp://h:8786",
        ),
    ],
)
def test_a_bad_option_is_refused_naming_it(options: dict[str, str], expected: str) -> None:
    with pytest.raises(UsageError) as refused:
        DaskExecutor().configure(options, jobs=2)
    assert expected in refused.value.message
    assert "\n" not in refused.value.message


def test_the_unknown_key_refusal_lists_the_options() -> None:
    with pytest.raises(
        UsageError,
        match="it takes scheduler, address, workers, threads, processes, retries, worker_wait",
    ):
        parse_options({"memory": "4GB"})


def test_the_cli_refuses_a_bad_option_before_anything_runs(cli, matrix) -> None:
    m: Matrix = matrix(["r1"])
    done = cli("validate", m.scenario, m.exp, "--executor", "dask", "--executor-option", "threds=2")
    assert done.returncode == 2
    assert (
        "--executor-option threds: unknown to the dask executor (did you mean 'threads'?)"
        in done.stderr
    )
    assert "Traceback" not in done.stderr
    assert m.results() == {}


def test_plugins_lists_the_dask_executor(cli) -> None:
    done = cli("plugins", "--json")
    assert done.returncode == 0, done.stderr
    listing = {entry["name"]: entry for entry in json.loads(done.stdout)}
    entry = listing["trysquare-dask"]
    assert entry["executors"] == ["dask"]
    assert entry["error"] is None
    assert entry["hooks"] == ["trysquare_register_executors"]


def test_loading_the_plugin_does_not_import_dask() -> None:
    # Every trysquare command loads plugins: dask must wait until the executor runs.
    code = (
        "import sys\n"
        "from trysquare import plugins\n"
        "executors = plugins.registry('trysquare_register_executors')\n"
        "assert 'dask' in executors, executors\n"
        "executors['dask'].configure({'workers': '2'}, jobs=1)\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed'))\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_blocking_the_plugin_by_name_removes_the_executor(cli, matrix) -> None:
    m: Matrix = matrix(["r1"])
    done = cli(
        "validate",
        m.scenario,
        m.exp,
        "--executor",
        "dask",
        env={"TRYSQUARE_BLOCK_PLUGINS": "trysquare-dask"},
    )
    assert done.returncode == 2
    assert "no installed plugin provides executor 'dask' (installed: local)" in done.stderr


JUDGE_TABLE = """
[[validation]]
mode = "judge"
provider = "local"
model = "judge-1"
thinking = "off"
rubric = "rubric.md"
pieces = ["diff"]
metrics = ["usable"]
"""


def test_every_task_pickles_for_the_workers(matrix, tmp_path: Path) -> None:
    """Tasks travel to workers: a run, a script, form and judge validation, a context."""
    m: Matrix = matrix(["r1", "r2"])
    (m.folder / "rubric.md").write_text("usable is false when the diff is empty.\n")
    (m.folder / "trysquare.toml").write_text(
        '[providers.local]\ntype = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmax_concurrency = 3\n'
    )
    m.scenario.write_text(m.scenario.read_text() + JUDGE_TABLE)
    scenario = load_scenario(m.scenario)
    experiments = discover([m.exp])
    runs = [run for e in experiments for run in e.runs]
    with ThreadPoolExecutor(2) as pool:
        tasks = plan(scenario, runs, scenario.validations, ValidateOptions(jobs=2), [], pool)
    assert {task.validation.mode for task in tasks} == {"script", "form", "judge"}
    assert len(tasks) == 6
    for task in tasks:
        copy = pickle.loads(pickle.dumps(task))
        assert copy == task
        assert copy.validation.digest() == task.validation.digest()
    judge = next(t.validation for t in tasks if t.validation.mode == "judge")
    name, limit = semaphore_for(judge)
    assert limit == 3 and "local" in name and "http://127.0.0.1:9/v1" in name
    assert all(semaphore_for(t.validation) is None for t in tasks if t.validation.mode != "judge")


def test_a_local_cluster_listens_on_loopback_only() -> None:
    """Threads in this process (processes=false) included: their HTTP servers are not on 0.0.0.0."""
    import os

    import psutil
    from trysquare_dask.executor import DaskRun

    def listening() -> set[tuple[str, int]]:
        connections = psutil.Process(os.getpid()).net_connections()
        return {(c.laddr.ip, c.laddr.port) for c in connections if c.status == psutil.CONN_LISTEN}

    before = listening()
    settings = parse_options({"workers": "1", "threads": "1", "processes": "false"})
    with DaskRun(settings)._client() as client:
        opened = listening() - before
        assert client.nthreads()
    assert opened, "the cluster listened nowhere: nothing was checked"
    assert {ip for ip, _ in opened} <= {"127.0.0.1"}, opened
    assert 8787 not in {port for _, port in opened}


@pytest.mark.parametrize("role", ["client", "scheduler", "worker"])
def test_the_local_clusters_tls_contexts_are_built_without_writing_the_key(
    role: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dask writes an in-memory key into a temporary folder to build each TLS context.

    A process of the same user watching the temporary folder could read it there.
    The local cluster's credentials are handed to ``ssl`` from an anonymous memory
    file instead: building every context with temporary folders forbidden works
    (and Dask's own ``Security.temporary()`` does not: the test can see the write).
    """
    import ssl
    import tempfile

    from distributed.security import Security
    from trysquare_dask.tls import InMemorySecurity

    if sys.platform != "linux":
        pytest.skip("memfd_create is Linux's")

    class Forbidden(Exception):
        pass

    def no_folder(*args: object, **kwargs: object) -> None:
        raise Forbidden("a temporary folder for the key")

    monkeypatch.setattr(tempfile, "TemporaryDirectory", no_folder)
    ours = InMemorySecurity.temporary()
    for arguments in (ours.get_connection_args(role), ours.get_listen_args(role)):
        assert isinstance(arguments["ssl_context"], ssl.SSLContext)
        assert arguments["ssl_context"].verify_mode == ssl.CERT_REQUIRED  # mutual
        assert arguments["require_encryption"] is True
    with pytest.raises(Forbidden):
        Security.temporary().get_connection_args(role)
    # What the nannies pickle to their worker processes keeps its class.
    assert type(pickle.loads(pickle.dumps(ours))) is InMemorySecurity


def test_chunks_are_a_share_of_what_remains_and_small_matrices_go_one_by_one() -> None:
    from trysquare_dask.executor import MAX_CHUNK, chunk_size

    assert chunk_size(10, 4) == 1  # fewer tasks than four per thread: one dask task each
    assert chunk_size(24, 2) == 3
    assert chunk_size(1000, 2) == MAX_CHUNK
    # Shrinking toward the end, so the threads finish together.
    sizes, remaining = [], 200
    while remaining:
        sizes.append(chunk_size(remaining, 2))
        remaining -= sizes[-1]
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] == 1
    assert chunk_size(5, 0) == 1  # no worker yet: still something to submit

"""Who can reach a cluster the dask executor uses: trysquare, with credentials; nobody else.

The attack itself (the agent's code connecting to the local cluster) is
tests/security/test_dask_loopback.py; here, the credentials an operator's TLS
cluster is reached with, the refusal without them, the warning for clear text,
and what the agent's code may see of the cluster from a worker.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.dask.conftest import GROUP, Matrix
from tests.helpers import write_scenario, write_script

pytestmark = [pytest.mark.slow, GROUP]


def _credentials(folder: Path) -> dict[str, str]:
    """A CA, certificate and key in 0600 files, as an operator's would be; dask's config keys."""
    from distributed.security import Security

    made = Security.temporary()
    folder.mkdir(mode=0o700)
    files = {}
    for name, text in (("ca.pem", made.tls_ca_file), ("cert.pem", made.tls_client_cert),
                       ("key.pem", made.tls_client_key)):  # fmt: skip
        path = folder / name
        path.touch(mode=0o600)
        path.write_text(text)
        files[name] = str(path)
    return {
        "distributed.comm.tls.ca-file": files["ca.pem"],
        "distributed.comm.tls.client.cert": files["cert.pem"],
        "distributed.comm.tls.client.key": files["key.pem"],
    }


def test_a_tls_cluster_is_reached_with_the_certificate_dask_is_configured_with(
    cli, matrix, tmp_path: Path
) -> None:
    import dask
    from distributed import LocalCluster
    from distributed.security import Security

    m: Matrix = matrix(["r1", "bad1"])
    config = _credentials(tmp_path / "tls")
    cluster_security = Security(
        tls_ca_file=config["distributed.comm.tls.ca-file"],
        tls_scheduler_cert=config["distributed.comm.tls.client.cert"],
        tls_scheduler_key=config["distributed.comm.tls.client.key"],
        tls_worker_cert=config["distributed.comm.tls.client.cert"],
        tls_worker_key=config["distributed.comm.tls.client.key"],
        tls_client_cert=config["distributed.comm.tls.client.cert"],
        tls_client_key=config["distributed.comm.tls.client.key"],
        require_encryption=True,
    )
    arguments = ("validate", m.scenario, m.exp, "--no-progress", "--only", "score",
                 "--executor", "dask")  # fmt: skip
    # Threads in this process, cheap: what is shown is the client's side of the handshake.
    with LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, protocol="tls://", host="127.0.0.1",
        security=cluster_security, dashboard_address=None,
    ) as cluster:  # fmt: skip
        address = cluster.scheduler_address
        assert address.startswith("tls://")
        refused = cli(*arguments, "--executor-option", f"scheduler={address}")
        with dask.config.set(_credentials(tmp_path / "strangers")):  # not signed by its CA
            strangers = cli(*arguments, "--executor-option", f"scheduler={address}")
        with dask.config.set(config):
            done = cli(*arguments, "--executor-option", f"scheduler={address}")

    # Without credentials: one sentence saying what to configure, before any task ran.
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "Traceback" not in refused.stderr
    assert "the cluster speaks TLS, and dask's configuration gives this client no certificate" in (
        refused.stderr
    )
    assert "distributed.comm.tls.client.cert" in refused.stderr
    # With credentials the cluster does not trust: refused, saying it is about TLS.
    assert strangers.returncode == 2, strangers.stdout + strangers.stderr
    assert "Traceback" not in strangers.stderr
    assert "do not accept each other's TLS credentials" in strangers.stderr
    # With them: the runs are validated, and nothing is said about clear text.
    assert done.returncode == 1, done.stdout + done.stderr
    assert "clear text" not in done.stderr
    results = m.results()
    assert results[("r1", "score")]["state"] == "valid"
    assert results[("bad1", "score")]["state"] == "invalid"


def test_an_operators_tls_cluster_started_as_the_readme_says_answers_trysquare_alone(
    cli, matrix, tmp_path: Path
) -> None:
    """``dask scheduler``/``dask worker`` with the README's TLS and preload options.

    trysquare reaches it with the certificate Dask's configuration names and
    validates; a client without one is refused; its worker and nanny processes are
    not dumpable (``--preload``/``--preload-nanny trysquare_dask.memory``).
    """
    import os

    import dask
    from distributed import Client
    from trysquare_dask.memory import dumpable

    from tests.dask.cli_cluster import CommandLineCluster

    m: Matrix = matrix(["r1", "bad1"])
    config = _credentials(tmp_path / "tls")
    files = {"ca": config["distributed.comm.tls.ca-file"],
             "cert": config["distributed.comm.tls.client.cert"],
             "key": config["distributed.comm.tls.client.key"]}  # fmt: skip
    env = {k: v for k, v in cli.env.items() if not k.startswith("TRYSQUARE_")}
    with CommandLineCluster(tmp_path / "cluster", workers=1, threads=2, env=env, tls=files,
                            preload=["trysquare_dask.memory"]) as cluster:  # fmt: skip
        assert cluster.address.startswith("tls://")
        address = cluster.address
        arguments = ("validate", m.scenario, m.exp, "--no-progress", "--only", "score",
                     "--executor", "dask", "--executor-option", f"scheduler={address}")  # fmt: skip
        with dask.config.set(config):
            done = cli(*arguments)
        plain = cluster.address.replace("tls://", "tcp://")
        with pytest.raises(OSError):
            Client(plain, timeout=2)
        with Client(cluster.address, timeout=10, security=cluster.security()) as client:
            workers = list(client.run(dumpable).values())
            nannies = list(client.run(dumpable, nanny=True).values())
    assert done.returncode == 1, done.stdout + done.stderr + cluster.logs()
    assert "clear text" not in done.stderr
    results = m.results()
    assert results[("r1", "score")]["state"] == "valid"
    assert results[("bad1", "score")]["state"] == "invalid"
    if sys.platform == "linux":
        assert workers == [False] and nannies == [False]
    assert os.stat(files["key"]).st_mode & 0o077 == 0


def test_a_clear_text_scheduler_is_used_with_a_warning(cli, matrix) -> None:
    from distributed import LocalCluster

    m: Matrix = matrix(["r1"])
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp://",
                      host="127.0.0.1", dashboard_address=None) as cluster:  # fmt: skip
        address = cluster.scheduler_address
        done = cli("validate", m.scenario, m.exp, "--no-progress", "--only", "score",
                   "--executor", "dask", "--executor-option", f"scheduler={address}")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    warning = [line for line in done.stderr.splitlines() if line.startswith("trysquare: warning:")]
    assert warning == [
        (
            f"trysquare: warning: the dask scheduler at {address} is reached in clear text, "
            "without authentication: any process that reaches it runs code on its workers, the "
            "measured agent's code included; use a cluster started with TLS (tls://, see "
            "trysquare-dask's README)"
        )
    ]


# The agent's test on a worker of the local cluster: what it can learn of the cluster's
# credentials, printed into its failure (the `tests` reason).
AGENT_TEST = '''\
import os, re, unittest
from pathlib import Path

PEM = re.compile(rb"-----BEGIN PRIVATE KEY-----[A-Za-z0-9+/=\\s]+-----END PRIVATE KEY-----")


def ancestors():
    pid = os.getpid()
    while pid > 1:
        status = Path(f"/proc/{pid}/status").read_text()
        pid = int(re.search(r"^PPid:\\s*(\\d+)", status, re.M).group(1))
        if pid > 1:
            yield pid


def keys_in_memory(pid):
    """Every PEM private key in a process's readable memory; or why it cannot be read."""
    found = 0
    try:
        maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
        memory = open(f"/proc/{pid}/mem", "rb", buffering=0)
    except OSError as error:
        return type(error).__name__
    with memory:
        for line in maps:
            fields = line.split()
            start, end = (int(x, 16) for x in fields[0].split("-"))
            if "r" not in fields[1] or end - start > 1 << 28 or line.endswith("[vvar]"):
                continue
            try:
                memory.seek(start)
                found += len(PEM.findall(memory.read(end - start)))
            except OSError:
                continue
    return f"{found} keys"


class Look(unittest.TestCase):
    def test_look(self):
        seen = []
        for pid in ancestors():
            try:
                proc = Path(f"/proc/{pid}")
                visible = (proc / "environ").read_bytes() + (proc / "cmdline").read_bytes()
                text = "key" if b"PRIVATE KEY" in visible else "no key"
            except OSError as error:
                text = type(error).__name__
            seen.append(f"{pid}: env+cmdline {text}, memory {keys_in_memory(pid)}")
        self.fail("LOOK[" + "; ".join(seen) + "]LOOK")
'''

SUITE_VALIDATOR = """
from trysquare.assay import validator

@validator
def evaluate(run):
    return {"tests": run.tests()}

raise SystemExit(evaluate.cli())
"""


def _agent_run(root: Path) -> tuple[Path, Path]:
    """The agent's run (its test looks for the key) and a scenario running its suite."""
    from trysquare.testing import RunBuilder

    run = RunBuilder(root / "exp" / "runs" / "agent", cell="c", repetition=1)
    run.base({"counter.py": "count = 1\n", "tests/__init__.py": ""})
    run.repo.write("tests/test_look.py", AGENT_TEST)
    run.finish()
    write_script(root / "s", "score.py", SUITE_VALIDATOR)
    scenario = write_scenario(root / "s", f"""
        [task]
        test_command = "{sys.executable} -m unittest discover -s tests -t ."

        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["tests"]
        timeout = 60
    """)  # fmt: skip
    return run.path, scenario


def _seen(run: Path) -> tuple[list[str], str]:
    """What the agent's test saw of each ancestor, from its failure (the `tests` reason)."""
    reason = json.loads((run / "validation" / "script.json").read_text())["reasons"]["tests"]
    seen = reason.rsplit("LOOK[", 1)[1].split("]LOOK", 1)[0].split("; ")
    # Its ancestors: the validator, the worker, the validate process (the scheduler) and more.
    assert len(seen) >= 3, reason
    for line in seen:
        assert "env+cmdline key" not in line, reason
        assert " 0 keys" in line or "memory PermissionError" in line, reason
    return seen, reason


LOCAL_CLUSTER = ("--executor", "dask", "--executor-option", "workers=1",
                 "--executor-option", "threads=1")  # fmt: skip


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_under_landlock_the_agents_code_on_a_worker_cannot_read_the_clusters_key(
    cli, tmp_path: Path
) -> None:
    """The key lives in the memory of the validate process and the workers, nowhere else.

    Not in any ancestor's environment or command line; and Landlock (the jail too,
    once it lands) keeps the agent's code out of every ancestor's memory.
    """
    from trysquare.sandbox import sandbox_enabled

    if not sandbox_enabled():
        pytest.skip("Landlock is not in force here")
    run, scenario = _agent_run(tmp_path)
    # The jail off: in it the agent's code sees no ancestor at all (the last test here).
    done = cli("validate", scenario, tmp_path / "exp", "--no-progress", *LOCAL_CLUSTER,
               env={"TRYSQUARE_JAIL": "off"})  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    seen, reason = _seen(run)
    assert all("memory PermissionError" in line for line in seen), reason  # not even "0 keys"


@pytest.mark.skipif(sys.platform != "linux", reason="prctl(PR_SET_DUMPABLE) is Linux's")
def test_the_processes_holding_the_key_are_not_dumpable_while_the_cluster_lives() -> None:
    """Without Landlock or the jail, the user's other processes cannot read the key.

    A process of the same user may read the memory of any dumpable one (no Yama
    here): the agent's suite, isolation off, read the key from the worker's and the
    validate process's memory (4 copies there, 1 in the worker). Not dumpable, only
    a process with ``CAP_SYS_PTRACE`` may. Shown by the flag itself: this machine
    runs the tests as root, whom no flag stops.
    """
    from trysquare_dask.executor import DaskRun, parse_options
    from trysquare_dask.memory import dumpable

    assert dumpable() is True
    with DaskRun(parse_options({"workers": "1", "threads": "1"}))._client() as client:
        assert dumpable() is False  # the validate process: its scheduler and nannies
        assert list(client.run(dumpable).values()) == [False]  # each worker process
        # What a worker starts is dumpable again: validators and the agent's code are
        # not changed (execve resets the flag).
        code = "import ctypes; print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))"
        started = client.run(subprocess.check_output, [sys.executable, "-c", code])
        assert list(started.values()) == [b"1\n"]
    assert dumpable() is True  # as it was, once the cluster and its key are gone


# On a worker: a script validator says which protection it runs under, and the agent's test
# (under run.tests()) tries to write into its clone as it is on disk, not its scratch copy.
PROTECTION_VALIDATOR = """
import json
from trysquare.sandbox import protection_line
print(json.dumps({"metrics": {"seen": True}, "reasons": {"seen": protection_line()}}))
"""

WRITE_TEST = """\
import unittest

class Write(unittest.TestCase):
    def test_write(self):
        try:
            open({target!r}, "w").write("the agent's code wrote this from a worker")
            outcome = "WROTE"
        except OSError as error:
            outcome = type(error).__name__
        self.fail("WRITE[" + outcome + "]WRITE")
"""


def test_the_agents_code_on_a_worker_runs_under_the_protection_the_client_reports(
    cli, make_run, tmp_path: Path
) -> None:
    """A worker's validators and the agent's code they run are confined as on the local pool.

    The confinement is applied by the core's process helpers, which a validator on a
    worker calls as on the client's machine: a validator there reports the same
    protection line as ``trysquare plugins``, and the agent's test cannot write into
    its clone. When the jail lands, the line names it, and this still holds.
    """
    from trysquare.jail import availability
    from trysquare.sandbox import sandbox_enabled

    run = make_run("agent", cell="c", repetition=1)
    run.base({"counter.py": "count = 1\n", "tests/__init__.py": ""})
    target = run.repo.path / "counter.py"
    run.repo.write("tests/test_write.py", WRITE_TEST.format(target=str(target)))
    run.finish()
    write_script(tmp_path / "s", "protection.py", PROTECTION_VALIDATOR)
    write_script(tmp_path / "s", "score.py", SUITE_VALIDATOR)
    scenario = write_scenario(tmp_path / "s", f"""
        [task]
        test_command = "{sys.executable} -m unittest discover -s tests -t ."

        [[validation]]
        name = "protection"
        mode = "script"
        command = "protection.py"
        metrics = ["seen"]

        [[validation]]
        name = "suite"
        mode = "script"
        command = "score.py"
        metrics = ["tests"]
        timeout = 60
    """)  # fmt: skip
    done = cli("validate", scenario, tmp_path / "exp", "--no-progress", *LOCAL_CLUSTER)
    listed = cli("plugins")
    line = next(x for x in listed.stdout.splitlines() if x.startswith("protection:"))

    def result(name: str) -> dict[str, Any]:
        return json.loads((run.path / "validation" / f"{name}.json").read_text())

    assert result("protection")["reasons"] == {"seen": line}, done.stdout + done.stderr
    if not (sandbox_enabled() or availability().available):
        return  # detection alone: the write happens, and the run is invalid (tests/security)
    assert done.returncode == 0, done.stdout + done.stderr
    reason = result("suite")["reasons"]["tests"]
    outcome = reason.rsplit("WRITE[", 1)[1].split("]WRITE", 1)[0]
    # Landlock: the write is refused; the jail: the clone is not even in its view.
    assert outcome == ("FileNotFoundError" if availability().available else "PermissionError")
    assert target.read_text() == "count = 1\n"


# What the agent's test on a worker sees of the machine: the processes besides itself and the
# listening sockets in its view, and its parent.
JAIL_TEST = """\
import os, unittest
from pathlib import Path

class Look(unittest.TestCase):
    def test_look(self):
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
        others = [pid for pid in pids if pid not in (1, os.getpid())]  # besides init and itself
        listening = [line for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
                     if line.split()[3] == "0A"]
        self.fail(f"JAIL[ppid={os.getppid()} others={len(others)} listening={len(listening)}]JAIL")
"""


def test_the_agents_code_on_a_worker_runs_in_the_jail(cli, make_run, tmp_path: Path) -> None:
    """On a dask worker the suite runs in the same jail as on the local pool.

    The jail is built by the core's process helpers, which a worker's validator
    calls as the local pool's does; so the agent's test on a worker sees its own PID
    namespace (no dask process, nor the validator that started it), its own network
    (no listener at all: not the scheduler's, nor a worker's), and ``trysquare
    plugins`` reports the jail. With ``TRYSQUARE_JAIL=off`` the same test saw its
    parent, 126 other processes and 12 listening sockets.
    """
    from trysquare.jail import availability

    if not availability().available:
        pytest.skip(f"no jail here: {availability().reason}")
    run = make_run("agent", cell="c", repetition=1)
    run.base({"counter.py": "count = 1\n", "tests/__init__.py": ""})
    run.repo.write("tests/test_look.py", JAIL_TEST)
    run.finish()
    write_script(tmp_path / "s", "score.py", SUITE_VALIDATOR)
    scenario = write_scenario(tmp_path / "s", f"""
        [task]
        test_command = "{sys.executable} -m unittest discover -s tests -t ."

        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["tests"]
        timeout = 60
    """)  # fmt: skip
    done = cli("validate", scenario, tmp_path / "exp", "--no-progress", *LOCAL_CLUSTER)
    assert done.returncode == 0, done.stdout + done.stderr
    reason = json.loads((run.path / "validation" / "script.json").read_text())["reasons"]["tests"]
    seen = dict(
        item.split("=", 1) for item in reason.rsplit("JAIL[", 1)[1].split("]JAIL", 1)[0].split()
    )
    # Its own PID namespace: no worker, nanny, validator or validate process in sight.
    assert seen["others"] == "0" and seen["ppid"] in ("0", "1"), reason
    assert seen["listening"] == "0", reason  # its own network: the cluster's ports are not there
    assert "isolation: the jail (" in cli("plugins").stdout

"""The agent's code reaches the Dask cluster trysquare started, and tries to run code there.

The measured agent's test, run by ``run.tests()`` on a Dask worker, learns every
address it can: the loopback ports its ancestors (the worker, the ``validate``
process holding the scheduler) listen on, and any ``tcp://``/``tls://`` in their
command lines and environments. At each it connects with ``distributed.Client``
— without credentials, then with a throwaway certificate of its own — and asks
the workers, which are not confined, to write a file into the reference run's
clone. Isolation is off here, as where it falls back (no jail, no Landlock; the
jail alone keeps the agent's code off the host's loopback, Landlock alone out of
its ancestors' ``/proc`` entries but not off their ports, which a scan of
``/proc/net/tcp`` lists). The cluster must refuse every one: the local cluster
speaks TLS with credentials only trysquare holds, and both sides must present them.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.dask.conftest import GROUP
from tests.helpers import write_scenario, write_script

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare_dask.executor", "trysquare.jail")


# One LocalCluster start: on the dask clusters' xdist worker, never two at once.
pytestmark = [pytest.mark.slow, GROUP]

# Dask's pages on the scheduler's and workers' HTTP servers: the cluster's state, task errors,
# worker logs, metrics, health.
PAGES = ["/info/main/workers.html", "/json/identity.json", "/info/main/exceptions.html",
         "/info/main/logs.html", "/metrics", "/health"]  # fmt: skip

# The agent's test. It fails on purpose, its report in the failure message: the
# suite's output becomes the `tests` reason, the only thing its confinement lets out.
AGENT_TEST = '''\
import os, re, time, unittest
from pathlib import Path

VICTIM = {victim!r}
LISTENERS = {listeners!r}
# What a worker is asked to do: forge the reference run by writing into its clone.
PAYLOAD = "open(" + repr(os.path.join(VICTIM, "forged.txt")) + ", 'w').write('from a worker')"


def ancestors():
    pid = os.getpid()
    while pid > 1:
        try:
            status = Path(f"/proc/{{pid}}/status").read_text()
        except OSError:
            return
        pid = int(re.search(r"^PPid:\\s*(\\d+)", status, re.M).group(1))
        if pid > 1:
            yield pid


def addresses():
    found, sockets = set(), set()
    for pid in ancestors():
        for name in ("cmdline", "environ"):
            try:
                text = Path(f"/proc/{{pid}}/{{name}}").read_bytes().decode("utf-8", "replace")
            except OSError:
                continue
            found.update(re.findall(r"(?:tcp|tls)://[\\w.-]+:\\d+", text))
        try:
            fds = os.listdir(f"/proc/{{pid}}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{{pid}}/fd/{{fd}}")
            except OSError:
                continue
            if link.startswith("socket:["):
                sockets.add(link[len("socket:["):-1])
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state, inode = fields[1], fields[3], fields[9]
        if state == "0A" and inode in sockets and local.startswith("0100007F:"):  # listening
            found.add(f"127.0.0.1:{{int(local.split(':')[1], 16)}}")
    # What a scan of every loopback listener of this user would also find (the test names the
    # cluster's own, so as not to knock on other services of the machine it runs on).
    for _ in range(100):
        listed = Path(LISTENERS).read_text().split() if os.path.exists(LISTENERS) else []
        if listed:
            found.update(listed)
            break
        time.sleep(0.1)
    return sorted(found)


def http_status(host, path):
    """The status line an HTTP server answers ``path`` with; None from anything else."""
    import socket
    name, port = host.rsplit(":", 1)
    try:
        with socket.create_connection((name, int(port)), timeout=1) as sock:
            sock.sendall(f"GET {{path}} HTTP/1.0\\r\\nHost: {{host}}\\r\\n\\r\\n".encode())
            answer = sock.recv(64)
    except OSError:
        return None
    return answer.split(b"\\r\\n")[0].decode() if answer.startswith(b"HTTP/") else None


PAGES = {pages!r}


class Probe(unittest.TestCase):
    def test_probe(self):
        import logging
        logging.disable(logging.CRITICAL)
        from distributed import Client
        from distributed.security import Security

        report = []
        for address in addresses():
            host = address.split("://")[-1]
            if http_status(host, "/") is not None:  # an HTTP server: read what it shows
                for page in PAGES:
                    status = http_status(host, page)
                    shown = status is not None and " 200 " in status + " "
                    report.append(f"{{'READ' if shown else 'refused http'}} {{host}}{{page}}")
                continue
            tries = [(f"tcp://{{host}}", None), (f"tls://{{host}}", Security.temporary())]
            for target, security in tries:
                label = "plain" if security is None else "own-cert"
                try:
                    with Client(target, timeout=2, security=security) as client:
                        client.run(exec, PAYLOAD)
                    report.append(f"RAN-CODE {{label}} {{target}}")
                except Exception as error:
                    report.append(f"refused {{label}} {{target}} {{type(error).__name__}}")
        self.fail("PROBE[" + "; ".join(report) + "]PROBE")
'''

SUITE_VALIDATOR = """
from trysquare.assay import validator

@validator
def evaluate(run):
    return {"tests": run.tests()}

raise SystemExit(evaluate.cli())
"""


@contextmanager
def _listing_own_listeners(path: Path) -> Iterator[None]:
    """Keep ``path`` listing the loopback ports this process listens on, while the block runs.

    The local cluster's scheduler and nannies live in the validate process (this one):
    what a scan of the user's loopback listeners finds, narrowed to this test's cluster.
    The agent's code reads its ancestors' sockets too, where it may (they are not dumpable
    to a process of the same user without privileges; they are to root).
    """
    stop = threading.Event()

    def ports() -> list[str]:
        sockets = set()
        for fd in os.listdir("/proc/self/fd"):
            try:
                link = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                sockets.add(link[len("socket:[") : -1])
        found = []
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in sockets and fields[1].startswith("0100007F:"):
                found.append(f"127.0.0.1:{int(fields[1].split(':')[1], 16)}")
        return found

    def keep() -> None:
        while not stop.wait(0.05):
            temporary = path.with_suffix(".tmp")
            temporary.write_text("\n".join(ports()))
            temporary.replace(path)

    thread = threading.Thread(target=keep, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def test_the_agents_code_cannot_run_code_on_the_local_cluster(
    cli, make_run, tmp_path: Path
) -> None:
    reference = make_run("ref", cell="c", repetition=1)
    reference.base({"counter.py": "count = 1\n", "tests/__init__.py": ""})
    reference.repo.write("counter.py", "count = 0\n")
    reference.finish()
    agent = make_run("agent", cell="c", repetition=2)
    agent.base({"counter.py": "count = 1\n", "tests/__init__.py": ""})
    listeners = tmp_path / "listeners.txt"
    probe = AGENT_TEST.format(
        victim=str(reference.repo.path), pages=PAGES, listeners=str(listeners)
    )
    agent.repo.write("tests/test_probe.py", probe)
    agent.finish()
    folder = tmp_path / "s"
    write_script(folder, "score.py", SUITE_VALIDATOR)
    scenario = write_scenario(
        folder,
        f"""
        [task]
        test_command = "{sys.executable} -m unittest discover -s tests -t ."

        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["tests"]
        timeout = 60
    """,
    )

    # Isolation fallen back (no jail, no Landlock): the agent's code finds the cluster's ports
    # (its ancestors' sockets, the user's loopback listeners). The cluster must hold alone.
    with _listing_own_listeners(listeners):
        done = cli("validate", scenario, tmp_path / "exp", "--no-progress", "--executor", "dask",
                   "--executor-option", "workers=1", "--executor-option", "threads=2",
                   env={"TRYSQUARE_SANDBOX": "off", "TRYSQUARE_JAIL": "off"})  # fmt: skip

    assert "Traceback" not in done.stderr
    forged = reference.repo.path / "forged.txt"
    assert not forged.exists(), "the agent's code ran code on a dask worker"
    agent_result = json.loads((agent.path / "validation" / "script.json").read_text())
    reason = agent_result["reasons"]["tests"]
    report = reason.rsplit("PROBE[", 1)[1].split("]PROBE", 1)[0]
    attempts = report.split("; ")
    # It found the cluster: the scheduler and the nanny (and, where it may read its ancestors'
    # sockets, the worker it runs under), each a TLS listener that refused its certificate at
    # the handshake, and their HTTP servers, which show nothing; nothing let it in.
    assert all(attempt.startswith("refused ") for attempt in attempts), reason
    assert sum(attempt.startswith("refused http") for attempt in attempts) >= len(PAGES), reason
    handshakes = [
        a for a in attempts
        if a.startswith("refused own-cert") and a.endswith("FatalCommClosedError")
    ]  # fmt: skip
    assert len(handshakes) >= 2, reason
    assert agent_result["metrics"] == {"tests": False}
    ref_result = json.loads((reference.path / "validation" / "script.json").read_text())
    assert ref_result["state"] == "valid", ref_result
    assert done.returncode == 0, done.stdout + done.stderr

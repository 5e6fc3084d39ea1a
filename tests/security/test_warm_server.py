"""A warm server (issue 35 item 1) serves every run of a validator from one imported
process: a child it forks must not get more from it than a cold run gets, and must not
reach the next child through it. Each test validates in-process, as a CI job holding a
judge key would, with a validator doing what code the agent slipped it could do."""

from __future__ import annotations

import io
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from trysquare import _signing, _warm, runner
from trysquare.runs import discover
from trysquare.sandbox import sandbox_enabled
from trysquare.scenario import load_scenario
from trysquare.testing import build_matrix

from tests.helpers import write_scenario, write_script

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare._warm", "trysquare._warm_server")


pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="warm servers fork (Linux only here)"
)

PROVIDER_VAR = "ILAAS_CRED"
SECRETS = {PROVIDER_VAR: "sk-live-warm-4242", "AWS_SECRET_ACCESS_KEY": "aws-secret-warm-7777"}
CONFIG = f"""
[providers.ilaas]
type = "openai"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "{PROVIDER_VAR}"
"""

# Everything a child could try on its server: its environment, its memory (read and write),
# ptrace, and any descriptor left open towards it.
PRYING = """
import ctypes, os
from trysquare.assay import Assay, validator


def attempt(action):
    try:
        return f"got {action()!r}"
    except OSError as error:
        return f"refused ({type(error).__name__})"


def poke_memory(parent):
    with open(f"/proc/{parent}/mem", "r+b", buffering=0) as memory:
        memory.seek(0x400000)
        return memory.write(b"x")


def ptrace(parent):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, parent, None, None) != 0:  # PTRACE_ATTACH
        raise OSError(ctypes.get_errno(), "ptrace")
    return "attached"


def open_descriptors():
    # Beyond 0, 1 and 2, what this process holds open (the listing's own descriptor is
    # closed by the time its name is looked up).
    held = []
    for name in os.listdir("/proc/self/fd"):
        if int(name) > 2:
            try:
                held.append(os.readlink(f"/proc/self/fd/{name}"))
            except OSError:
                pass
    return held


@validator
def evaluate(run: Assay) -> dict:
    parent = os.getppid()
    seen = {
        "own environment": repr(dict(os.environ)),
        # Readable or not, it is a cold run's environment: the server never had more.
        "parent environment": attempt(lambda: open(f"/proc/{parent}/environ", "rb").read()),
        "parent memory": attempt(lambda: poke_memory(parent)),
        "ptrace": attempt(lambda: ptrace(parent)),
        "descriptors": open_descriptors(),
    }
    return {"seen": json.dumps(seen)}


import json

if __name__ == "__main__":
    raise SystemExit(evaluate.cli())
"""


def _setup(tmp_path: Path, body: str, runs: int = 2) -> tuple[Path, Path]:
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "trysquare.toml").write_text(CONFIG, encoding="utf-8")
    write_script(folder, "score.py", body)
    scenario = write_scenario(
        folder,
        """
        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["seen"]
        timeout = 20
    """,
    )
    experiment = tmp_path / "exp"
    build_matrix(
        experiment,
        [(f"r{index}", "c", index) for index in range(runs)],
        base={"a.py": "a = 1\n"},
        changes={"a.py": "a = 2\n"},
        response="done\n",
    )
    return scenario, experiment


def _validate(scenario: Path, experiment: Path) -> int:
    summary = runner.validate(
        load_scenario(scenario),
        discover([experiment]),
        runner.ValidateOptions(jobs=1, progress=False),
        out=io.StringIO(),
    )
    return summary.exit_code


def _served(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    answered: list[int] = []
    real = _warm.run_warm

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        done = real(*args, **kwargs)
        if done is not None:
            answered.append(1)
        return done

    monkeypatch.setattr(_warm, "run_warm", counting)
    return answered


def _result(experiment: Path, run: str) -> dict:
    return json.loads((experiment / "runs" / run / "validation" / "script.json").read_text())


@pytest.mark.skipif(
    not sandbox_enabled(), reason="the child's own Landlock domain is what keeps it out"
)
def test_a_warm_child_gets_no_secret_and_cannot_reach_its_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    served = _served(monkeypatch)
    scenario, experiment = _setup(tmp_path, PRYING)
    assert _validate(scenario, experiment) == 0
    assert len(served) == 2
    for run in ("r0", "r1"):
        seen = json.loads(_result(experiment, run)["metrics"]["seen"])
        for name, value in SECRETS.items():
            assert name not in seen["own environment"] and value not in json.dumps(seen)
        # Outside its Landlock domain: the server's memory is out of reach.
        assert seen["parent memory"].startswith("refused"), seen
        assert seen["ptrace"].startswith("refused"), seen
        # Nothing open towards the server: its channel closed before the validator ran.
        assert seen["descriptors"] == [], seen


def _writable_memory(pid: int) -> bytes:
    """Every writable mapping of ``pid``, read through /proc (root, or its ptracer, only)."""
    chunks = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as memory:
        for line in maps:
            fields = line.split()
            if "w" not in fields[1]:
                continue
            start, end = (int(part, 16) for part in fields[0].split("-"))
            try:
                memory.seek(start)
                chunks.append(memory.read(end - start))
            except OSError:
                continue
    return b"".join(chunks)


@pytest.mark.skipif(os.geteuid() != 0, reason="reading a non-dumpable process's memory needs root")
def test_the_warm_server_holds_no_signing_key_and_no_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    key = _signing.secret()  # this process holds it: trysquare signs results here
    scenario, experiment = _setup(tmp_path, PRYING, runs=1)
    found: list[bytes] = []
    real = _warm.run_warm

    def then_read_the_server(*args, **kwargs):  # type: ignore[no-untyped-def]
        done = real(*args, **kwargs)
        for server in _warm._active[-1].by_key.values():
            found.append(_writable_memory(server.process.pid))
        return done

    monkeypatch.setattr(_warm, "run_warm", then_read_the_server)
    assert _validate(scenario, experiment) == 0
    assert found and all(len(memory) > 1 << 20 for memory in found)
    for memory in found:
        assert key not in memory and key.hex().encode() not in memory
        for value in SECRETS.values():
            assert value.encode() not in memory


# Run 0 leaves a daemon (double fork, a session of its own) that would wait for later runs;
# run 1 says whether it is still there.
DAEMON = """
import os, time
from pathlib import Path
from trysquare.assay import Assay, validator


@validator
def evaluate(run: Assay) -> dict:
    mark = Path(run.repo).parent.parent / "r0" / "validation" / "script" / "daemon.pid"
    if run.repetition == 0:
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                mark.write_text(str(os.getpid()))
                time.sleep(60)
            os._exit(0)
        for _ in range(100):
            if mark.exists() and mark.read_text():
                break
            time.sleep(0.05)
        return {"seen": "left " + mark.read_text()}
    left = mark.read_text().split()
    return {"seen": "alive " + " ".join(p for p in left if _alive(int(p)))}


def _alive(pid):
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


if __name__ == "__main__":
    raise SystemExit(evaluate.cli())
"""


def test_a_daemon_one_run_leaves_is_gone_before_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = _served(monkeypatch)
    scenario, experiment = _setup(tmp_path, DAEMON)
    # (the daemon's pid file lies in run r0's archive: the run's own folder, writable to it)
    assert _validate(scenario, experiment) == 0
    assert len(served) == 2
    left = _result(experiment, "r0")["metrics"]["seen"].split()[1:]
    assert left, "run 0 should have left a daemon to look for"
    assert _result(experiment, "r1")["metrics"]["seen"] == "alive "
    for pid in left:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()


# Run 0's child kills its server: that run is the cold path's, the next ones warm again.
KILLER = """
import os, signal
from trysquare.assay import Assay, validator


def open_descriptors():
    # Beyond 0, 1 and 2, what this process holds open (the listing's own descriptor is
    # closed by the time its name is looked up).
    held = []
    for name in os.listdir("/proc/self/fd"):
        if int(name) > 2:
            try:
                held.append(os.readlink(f"/proc/self/fd/{name}"))
            except OSError:
                pass
    return held


@validator
def evaluate(run: Assay) -> dict:
    parent = os.getppid()
    if run.repetition == 0 and parent != int(os.environ["RUNNER_PID"]):
        os.kill(parent, signal.SIGKILL)
        import time
        time.sleep(5)
    return {"seen": f"run {run.repetition}"}


if __name__ == "__main__":
    raise SystemExit(evaluate.cli())
"""


def test_a_child_killing_its_server_costs_nothing_but_a_cold_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNNER_PID", str(os.getpid()))
    served = _served(monkeypatch)
    scenario, experiment = _setup(tmp_path, KILLER, runs=3)
    started = time.monotonic()
    assert _validate(scenario, experiment) == 0
    assert time.monotonic() - started < 15  # the orphaned child was not waited for to its end
    for index in range(3):
        assert _result(experiment, f"r{index}")["metrics"]["seen"] == f"run {index}"
    assert len(served) == 2  # run 0 ran again cold; runs 1 and 2 from a new server
    signal.getsignal(signal.SIGINT)  # this process is still here and well

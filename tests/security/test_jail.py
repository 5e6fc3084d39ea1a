"""The agent's code runs in the jail: each test is an attack by the agent's own test code.

Every attack is a unittest the measured agent added to its tree, written so that it
PASSES when the attack works (that is what the agent wants: a passing suite). The
suite runs through ``run.tests()`` under a real ``validate``; in the jail each attack
must fail, so ``tests`` comes back False and the host shows no trace of it. The
``fallback`` cases run the same attack with the jail switched off and show that it
then works: the tests can fail.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from trysquare import jail

from tests.helpers import write_scenario, write_script
from tests.security.guard_fixtures import build_run, run_validate

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare.jail",)


pytestmark = pytest.mark.skipif(
    not jail.availability().available, reason=f"no jail here: {jail.availability().reason}"
)

SUITE_VALIDATOR = """
from trysquare.assay import validator

@validator
def evaluate(run):
    return {"tests": run.tests()}

raise SystemExit(evaluate.cli())
"""


def _attack(tmp_path: Path, body: str, *, task: str = "", runs: int = 1) -> list[Path]:
    """Runs whose agent added ``tests/test_attack.py`` (a test running ``body``)."""
    made = []
    for number in range(1, runs + 1):
        run = build_run(
            tmp_path, f"r{number}", base={"counter.py": "x = 1\n", "tests/__init__.py": ""}
        )
        test = "import os, socket, sys, time, unittest\n\nclass Attack(unittest.TestCase):\n"
        test += "    def test_attack(self):\n" + "".join(
            f"        {line}\n" for line in body.strip("\n").splitlines()
        )
        run.repo.write("tests/test_attack.py", test)
        made.append(run.path)
    folder = tmp_path / "s"
    write_script(folder, "suite.py", SUITE_VALIDATOR)
    write_scenario(
        folder,
        f"""
[task]
test_command = "{sys.executable} -m unittest discover -s tests -t . -v"
{task}

[[validation]]
mode = "script"
name = "suite"
command = "suite.py"
metrics = ["tests"]
timeout = 120
""",
    )
    return made


def _validate(tmp_path: Path) -> dict:
    _, out = run_validate(tmp_path / "s" / "scenario.toml", tmp_path / "exp")
    recorded = json.loads(
        (tmp_path / "exp" / "runs" / "r1" / "validation" / "suite.json").read_text()
    )
    assert recorded["state"] == "valid", (out, recorded)
    return recorded


@pytest.fixture(params=["jail", "fallback"])
def where(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "fallback":
        monkeypatch.setenv("TRYSQUARE_JAIL", "off")
        monkeypatch.setenv("TRYSQUARE_SANDBOX", "off")
    return str(request.param)


def _knocked(server: socket.socket) -> bool:
    """Whether a connection to ``server`` was made: it waits in the listening queue, accepted or
    not, from the moment the handshake ended (its client may have closed it since)."""
    server.setblocking(False)
    try:
        connection, _ = server.accept()
    except BlockingIOError:
        return False
    connection.close()
    return True


def test_the_agents_code_cannot_reach_a_host_loopback_service(tmp_path: Path, where: str) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    _attack(tmp_path, f"socket.create_connection(('127.0.0.1', {port}), timeout=5).close()")
    recorded = _validate(tmp_path)
    # Read once validation ended, not by a thread accepting meanwhile: such a thread, not yet
    # scheduled when the server was closed (load 10), recorded no knock where one was made.
    knocked = _knocked(server)
    server.close()
    if where == "jail":
        assert recorded["metrics"] == {"tests": False}
        assert (
            "Connection refused" in recorded["reasons"]["tests"]
            or "unreachable" in recorded["reasons"]["tests"]
        )
        assert not knocked
    else:
        assert recorded["metrics"] == {"tests": True}
        assert knocked


def test_network_true_lets_the_suite_reach_the_hosts_loopback(tmp_path: Path) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    _attack(
        tmp_path,
        f"socket.create_connection(('127.0.0.1', {port}), timeout=5).close()",
        task="network = true",
    )
    recorded = _validate(tmp_path)
    server.close()
    assert recorded["metrics"] == {"tests": True}, recorded


def test_the_agents_code_cannot_reach_an_abstract_unix_socket(tmp_path: Path, where: str) -> None:
    name = f"\0trysquare-probe-{uuid.uuid4().hex}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(name)
    listener.listen(1)
    body = f"""
door = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
door.connect({name!r})
door.close()
"""
    _attack(tmp_path, body)
    recorded = _validate(tmp_path)
    listener.close()
    assert recorded["metrics"] == {"tests": where == "fallback"}, recorded


def test_the_agents_code_sees_no_other_run_no_records_no_cache_no_home(
    tmp_path: Path, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("private key")
    monkeypatch.setenv("HOME", str(home))
    other = build_run(tmp_path, "r2")
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "trysquare"
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "suite.key").write_text("k" * 64)
    seen = [
        str(other.repo.path / "counter.py"),  # another run's clone
        str(other.path / "run.toml"),  # another run's folder
        str(tmp_path / "exp" / "runs" / "r1" / "run.toml"),  # its own run folder
        str(cache / "suite.key"),  # trysquare's signing key
        str(home / ".ssh" / "id_ed25519"),  # $HOME's secrets
    ]
    body = f"""
visible = [p for p in {seen!r} if os.path.exists(p)]
print("VISIBLE", visible)
self.assertTrue(visible)
"""
    _attack(tmp_path, body)
    recorded = _validate(tmp_path)
    if where == "jail":
        assert recorded["metrics"] == {"tests": False}, recorded
        assert "VISIBLE []" in recorded["reasons"]["tests"]
    else:
        assert recorded["metrics"] == {"tests": True}


def test_the_agents_code_has_its_own_pid_namespace(tmp_path: Path, where: str) -> None:
    me = os.getpid()
    body = f"""
pids = [int(p) for p in os.listdir('/proc') if p.isdigit()]
print("PIDS", len(pids), min(pids))
os.kill({me}, 0)  # raises when trysquare's process is not visible
"""
    _attack(tmp_path, body)
    recorded = _validate(tmp_path)
    assert recorded["metrics"] == {"tests": where == "fallback"}, recorded
    if where == "jail":
        assert "ProcessLookupError" in recorded["reasons"]["tests"]
        assert "PIDS" in recorded["reasons"]["tests"]


def test_a_daemon_the_agent_leaves_behind_does_not_survive_its_validation(
    tmp_path: Path,
) -> None:
    marker = f"trysquare-daemon-{uuid.uuid4().hex}"
    body = f"""
import subprocess
subprocess.Popen(['setsid', sys.executable, '-c', 'import time; time.sleep(600)', {marker!r}],
                 start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(0.5)
"""
    _attack(tmp_path, body)
    recorded = _validate(tmp_path)
    assert recorded["metrics"] == {"tests": True}, recorded  # it did start
    alive = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                alive.append(pid)
        except OSError:
            continue
    assert alive == []


def test_dev_shm_is_the_jails_own(tmp_path: Path, where: str) -> None:
    token = uuid.uuid4().hex
    host_file = Path("/dev/shm") / f"trysquare-host-{token}"
    agent_file = Path("/dev/shm") / f"trysquare-agent-{token}"
    host_file.write_text("host")
    body = f"""
open({str(agent_file)!r}, 'w').write('agent')
self.assertTrue(os.path.exists({str(host_file)!r}))
"""
    try:
        _attack(tmp_path, body)
        recorded = _validate(tmp_path)
        assert recorded["metrics"] == {"tests": where == "fallback"}, recorded
        assert agent_file.exists() == (where == "fallback")
    finally:
        host_file.unlink(missing_ok=True)
        agent_file.unlink(missing_ok=True)


def test_a_test_that_kills_trysquare_ends_only_itself(tmp_path: Path, cli_process) -> None:
    """The agent's test walks /proc and SIGKILLs every process it may (trysquare's
    `validate` among them on an unjailed machine); variant: it signals its whole
    process group and session too. In the jail it reaches nothing of trysquare's."""
    body = """
import signal
me = os.getpid()
for pid in (int(p) for p in os.listdir('/proc') if p.isdigit()):
    if pid != me:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
for target in (0, -1):
    try:
        os.kill(target, signal.SIGTERM)
    except OSError:
        pass
"""
    runs = _attack(tmp_path, body, runs=2)
    done = cli_process(
        "validate",
        tmp_path / "s" / "scenario.toml",
        tmp_path / "exp",
        "--no-progress",
        "--jobs",
        "1",
        timeout=240,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    measures = json.loads((tmp_path / "exp" / "measures.json").read_text())
    assert sorted(row["id"] for row in measures) == ["r1", "r2"]
    for run in runs:
        recorded = json.loads((run / "validation" / "suite.json").read_text())
        assert recorded["state"] == "valid"


def test_a_file_over_the_size_limit_cannot_be_written(tmp_path: Path) -> None:
    body = """
with open('big.bin', 'wb') as handle:
    handle.write(b'x' * (3 << 20))
"""
    _attack(tmp_path, body, task="limits = { file_size_mib = 1 }")
    recorded = _validate(tmp_path)
    assert recorded["metrics"] == {"tests": False}, recorded
    assert (
        "File too large" in recorded["reasons"]["tests"]
        or "signal 25" in recorded["reasons"]["tests"]
    )


def test_memory_over_the_limit_cannot_be_allocated(tmp_path: Path) -> None:
    body = """
hoard = bytearray(600 << 20)
"""
    _attack(tmp_path, body, task="limits = { memory_mib = 256 }")
    recorded = _validate(tmp_path)
    assert recorded["metrics"] == {"tests": False}, recorded
    assert "MemoryError" in recorded["reasons"]["tests"]


def test_processes_over_the_limit_cannot_start(tmp_path: Path) -> None:
    body = """
import subprocess
children = [subprocess.Popen(['sleep', '5']) for _ in range(40)]
"""
    _attack(tmp_path, body, task="limits = { processes = 10 }")
    recorded = _validate(tmp_path)
    assert recorded["metrics"] == {"tests": False}, recorded


def test_isolation_required_refuses_validate_where_the_jail_cannot_start(
    tmp_path: Path, cli
) -> None:
    _attack(tmp_path, "pass", task='isolation = "required"')
    off = {"TRYSQUARE_JAIL": "off"}
    done = cli(
        "validate", tmp_path / "s" / "scenario.toml", tmp_path / "exp", "--no-progress", env=off
    )
    assert done.returncode == 2
    assert 'isolation = "required"' in done.stderr and "nothing was run" in done.stderr
    assert not (tmp_path / "exp" / "runs" / "r1" / "validation" / "suite.json").exists()
    again = cli(
        "validate",
        tmp_path / "s" / "scenario.toml",
        tmp_path / "exp",
        "--no-progress",
        "--require-isolation",
        env=off,
    )
    assert again.returncode == 2 and "--require-isolation" in again.stderr


def test_the_fallback_is_said_loudly(tmp_path: Path, cli) -> None:
    _attack(tmp_path, "pass")
    off = {"TRYSQUARE_JAIL": "off"}
    done = cli(
        "validate", tmp_path / "s" / "scenario.toml", tmp_path / "exp", "--no-progress", env=off
    )
    assert done.returncode == 0, done.stderr
    assert "NOT JAILED" in done.stderr
    checked = cli("check", tmp_path / "s" / "scenario.toml", env=off)
    assert "isolation: NOT JAILED (TRYSQUARE_JAIL=off)" in checked.stdout
    checked = cli("check", tmp_path / "s" / "scenario.toml")
    assert "isolation: the jail" in checked.stdout and "no network" in checked.stdout
    document = json.loads(cli("check", tmp_path / "s" / "scenario.toml", "--format", "json").stdout)
    assert document["isolation"]["jailed"] is True
    assert document["isolation"]["limits"]["processes"] == jail.DEFAULT_PROCESSES


def test_a_required_jail_that_cannot_start_leaves_the_suite_unjudged_by_hand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trysquare._suite import run_suite

    repo = tmp_path / "repo"
    build = build_run(tmp_path, "r1")
    monkeypatch.setenv("TRYSQUARE_JAIL", "off")
    verdict = run_suite(
        build.repo.path, [sys.executable, "-c", "pass"], jail=jail.JailPolicy(required=True)
    )
    assert verdict.value is None
    assert "the jail is required" in verdict.reason
    assert not repo.exists()


def test_the_jail_dies_with_trysquare(tmp_path: Path, cli_process) -> None:
    """trysquare itself killed (SIGKILL, no clean-up) while the suite runs: nothing of the
    agent's code survives it (the jail dies with its parent, its PID namespace with it)."""
    import subprocess
    import time

    marker = f"trysquare-orphan-{uuid.uuid4().hex}"
    _attack(
        tmp_path,
        f"""
import subprocess
subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', {marker!r}])
time.sleep(600)
""",
    )

    def holders() -> list[str]:
        found = []
        for pid in (p for p in os.listdir("/proc") if p.isdigit()):
            try:
                if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(pid)
            except OSError:
                continue
        return found

    validate = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trysquare",
            "validate",
            str(tmp_path / "s" / "scenario.toml"),
            str(tmp_path / "exp"),
            "--no-progress",
        ],
        env=cli_process.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not holders() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert holders(), "the suite never started"
    finally:
        validate.send_signal(signal.SIGKILL)
        validate.wait()
    deadline = time.monotonic() + 10
    while holders() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert holders() == []


def _writable_system_folder() -> Path | None:
    for folder in ("/opt", "/usr/local"):
        if os.path.isdir(folder) and os.access(folder, os.W_OK):
            return Path(folder)
    return None


@pytest.mark.skipif(_writable_system_folder() is None, reason="no system folder to write in")
def test_runs_inside_a_system_folder_are_not_shown(tmp_path: Path) -> None:
    """The experiment lives under /opt (or /usr/local), which the jail shows whole as a
    system folder: its run folder, its records and the other runs must still be hidden."""
    import shutil
    import tempfile

    folder = _writable_system_folder()
    assert folder is not None
    root = Path(tempfile.mkdtemp(prefix="trysquare-jail-", dir=folder))
    root.chmod(0o755)  # as a folder made by hand would be: the jail's user may walk it
    try:
        other = build_run(root, "r2")
        seen = [
            str(other.repo.path / "counter.py"),  # another run's clone
            str(other.path / "run.toml"),  # another run's folder
            str(root / "exp" / "runs" / "r1" / "run.toml"),  # its own run folder
        ]
        body = f"""
visible = [p for p in {seen!r} if os.path.exists(p)]
print("VISIBLE", visible)
self.assertTrue(visible)
"""
        _attack(root, body)
        recorded = _validate(root)
        assert recorded["metrics"] == {"tests": False}, recorded
        assert "VISIBLE []" in recorded["reasons"]["tests"]
    finally:
        shutil.rmtree(root)


def test_the_cache_is_never_shown_when_xdg_cache_home_is_unset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without XDG_CACHE_HOME the cache is ~/.cache/trysquare: a file there named as the
    command's program (the agent's tree makes `./run_tests.sh` a link into it, resolved
    on the host) or a PATH folder inside it is never shown."""
    import subprocess

    home = tmp_path / "home"
    cache = home / ".cache" / "trysquare"
    (cache / "bin").mkdir(parents=True)
    key = cache / "suite.key"
    key.write_text("k" * 64)
    key.chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("PATH", f"{cache / 'bin'}{os.pathsep}{os.environ['PATH']}")
    scratch = tmp_path / "scratch"
    (scratch / "repo").mkdir(parents=True)
    link = scratch / "repo" / "run_tests.sh"
    link.symlink_to(key)
    ids = jail.new_jail_ids()
    jail.hand_over([str(scratch)], ids)
    argv = jail.jailed_command(
        ["/bin/sh", "-c", f"ls {cache} {cache / 'bin'}"],
        cwd=str(scratch / "repo"),
        writable=[str(scratch)],
        policy=jail.JailPolicy(),
        programs=[str(link)],
        ids=ids,
    )
    assert str(key) not in argv and str(cache / "bin") not in argv
    done = subprocess.run(argv, capture_output=True, timeout=60, check=False)
    assert b"suite.key" not in done.stdout, done.stdout


def test_one_runs_suite_cannot_starve_another_runs_processes(tmp_path: Path) -> None:
    """Two runs validated at once: the agent's suite of r1 starts processes until the limit
    refuses, and holds them; r2's honest suite then starts one process, and must pass."""
    hoard = """
import subprocess
held = []
try:
    for _ in range(100):
        held.append(subprocess.Popen(['sleep', '30']))
except OSError as error:
    print('HELD', len(held), error)
time.sleep(10)
"""
    honest = """
time.sleep(3)
import subprocess
subprocess.run(['true'], check=True)
"""
    runs = _attack(tmp_path, hoard, task="limits = { processes = 20 }", runs=2)
    text = "import os, socket, sys, time, unittest\n\nclass Attack(unittest.TestCase):\n"
    text += "    def test_attack(self):\n" + "".join(
        f"        {line}\n" for line in honest.strip("\n").splitlines()
    )
    (runs[1] / "repo" / "tests" / "test_attack.py").write_text(text)
    run_validate(tmp_path / "s" / "scenario.toml", tmp_path / "exp", jobs=2)
    honest_run = json.loads((runs[1] / "validation" / "suite.json").read_text())
    assert honest_run["metrics"] == {"tests": True}, honest_run["reasons"]


@pytest.mark.xfail(
    strict=True,
    reason="RLIMIT_DATA counts private writable mappings only: shared anonymous memory, memfd "
    "and /dev/shm (writable where the jail is not root's) are not bounded; that takes a cgroup",
)
def test_memory_over_the_limit_cannot_be_had_through_a_shared_mapping(tmp_path: Path) -> None:
    body = """
import mmap
hoard = mmap.mmap(-1, 600 << 20)  # MAP_SHARED | MAP_ANONYMOUS
for offset in range(0, 600 << 20, 4096):
    hoard[offset] = 1
"""
    _attack(tmp_path, body, task="limits = { memory_mib = 256 }")
    recorded = _validate(tmp_path)
    assert recorded["metrics"] == {"tests": False}, recorded


def test_a_folder_too_deep_to_remove_recursively_leaves_a_failing_suite_failed(
    tmp_path: Path,
) -> None:
    """The agent's failing test leaves 5000 nested folders (deeper than PATH_MAX, and than
    Python's recursion limit) in its scratch copy: removing the copy, or handing it over
    to the jail's user again, must not crash the suite service into "unjudged"."""
    body = """
top = os.getcwd()
for _ in range(5000):
    os.mkdir('d')
    os.chdir('d')
os.chdir(top)
self.fail('the agent's code is wrong')
"""

    def deep_leftovers() -> set[Path]:
        return {
            p
            for p in Path(tempfile.gettempdir()).glob("trysquare-tests-*")
            if (p / "repo" / "d").exists()
        }

    before = deep_leftovers()
    _attack(tmp_path, body.replace("agent's", "agents"))
    recorded = _validate(tmp_path)
    assert recorded["metrics"] == {"tests": False}, recorded
    assert deep_leftovers() <= before  # the scratch copy is gone


def test_a_folder_too_deep_left_by_prepare_is_handed_over_to_the_suite(tmp_path: Path) -> None:
    """``prepare`` runs the agent's code (its setup.py) and leaves 5000 nested folders; the
    copy is handed to the jail's user again before the suite (as root): the suite runs."""
    runs = _attack(tmp_path, "self.fail('wrong')", task=f'prepare = ["{sys.executable} setup.py"]')
    (runs[0] / "repo" / "setup.py").write_text(
        "import os\nfor _ in range(5000):\n    os.mkdir('d')\n    os.chdir('d')\n"
    )
    recorded = _validate(tmp_path)
    assert recorded["metrics"] == {"tests": False}, recorded
    assert "wrong" in recorded["reasons"]["tests"]


def test_blank_lines_in_the_suites_output_cannot_hold_the_verdict(tmp_path: Path) -> None:
    """The agent's failing suite prints 400,000 blank lines (800 KB, far below the output
    cap): reading the runners' summaries must stay linear, or trysquare's suite service
    spins for days and the validator times out: the failure read as unjudged."""
    import time

    _attack(tmp_path, "sys.stdout.write(' \\n' * 400_000)\nself.fail('wrong')")
    started = time.monotonic()
    recorded = _validate(tmp_path)
    assert recorded["metrics"] == {"tests": False}, recorded
    assert time.monotonic() - started < 60


def test_one_runs_suite_cannot_leave_word_for_another_in_the_kernel_keyring(
    tmp_path: Path,
) -> None:
    """r1's suite stores a key in its user keyring; r2's suite (validated after) must not
    find it: nothing of one run's code may reach another's."""
    name = f"trysquare-{uuid.uuid4().hex}"
    body = f"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
found = libc.syscall(250, 10, -4, b'user', {name.encode()!r}, 0)  # keyctl(SEARCH, @u)
if found < 0:
    libc.syscall(248, b'user', {name.encode()!r}, b'hello', 5, -4)  # add_key(.., @u)
self.assertGreater(found, 0)
"""
    runs = _attack(tmp_path, body, runs=2)
    run_validate(tmp_path / "s" / "scenario.toml", tmp_path / "exp", jobs=1)
    second = json.loads((runs[1] / "validation" / "suite.json").read_text())
    assert second["metrics"] == {"tests": False}, second


def test_the_loader_never_searches_the_agents_copy_while_the_jail_starts(tmp_path: Path) -> None:
    """An empty or relative entry in the experimenter's LD_LIBRARY_PATH / LD_PRELOAD is searched
    from the current folder: the agent's copy, where the jail's first programs start (setpriv,
    still holding CAP_SETUID where trysquare is root). Such entries never reach the jail."""
    from trysquare._process import run_process
    from trysquare.sandbox import Sandbox

    scratch = tmp_path / "scratch"
    copy = scratch / "repo"
    copy.mkdir(parents=True)
    (copy / "evil.so").write_bytes(b"not a library: the agent's")
    env = {
        **os.environ,
        "LD_PRELOAD": "evil.so",
        "LD_LIBRARY_PATH": ":/usr/lib",
        "LD_AUDIT": "evil.so",
    }
    done = run_process(
        ["/bin/sh", "-c", "echo LD_PRELOAD=${LD_PRELOAD-unset}; echo $LD_LIBRARY_PATH"],
        cwd=copy,
        timeout=60,
        env=env,
        sandbox=Sandbox([scratch]),
        jail=jail.JailPolicy(),
    )
    said = (done.stdout + done.stderr).decode()
    assert done.returncode == 0, said
    assert "evil.so" not in said  # the loader never tried the agent's file
    assert "LD_PRELOAD=unset" in said and "/usr/lib" in said


def test_nothing_of_the_agents_runs_once_a_jailed_command_timed_out(tmp_path: Path) -> None:
    """A step that times out is killed with its whole jail before run_process returns: the
    caller removes or copies its folder next (as root), and a process of the agent's still
    running then could swap a link in under it."""
    from trysquare._process import run_process
    from trysquare.sandbox import Sandbox

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    writer = "import os\nlog = os.open('log', os.O_WRONLY | os.O_APPEND | os.O_CREAT)\n"
    writer += "while True:\n    os.write(log, b'x')\n"
    argv = ["/bin/sh", "-c", f'{sys.executable} -c "$0" & sleep 30', writer]
    grown = 0
    for _ in range(3):  # the late writes came a few milliseconds after the return, each time
        done = run_process(
            argv, cwd=scratch, timeout=1.0, sandbox=Sandbox([scratch]), jail=jail.JailPolicy()
        )
        assert done.timed_out
        size = (scratch / "log").stat().st_size
        time.sleep(0.2)
        grown += (scratch / "log").stat().st_size - size
        (scratch / "log").unlink()
    assert grown == 0


@pytest.mark.parametrize("named", ["program", "argument"])
def test_a_link_the_agent_planted_in_its_copy_shows_no_file_of_the_machine(
    tmp_path: Path, named: str
) -> None:
    """The agent commits ``./gradlew`` or a test's data file as a link to a secret of this
    machine; a command naming it (the suite's program, an argument a validator passes) must not
    get the secret shown in the jail: inside, the link leads nowhere."""
    from trysquare._process import run_process
    from trysquare.sandbox import Sandbox

    secret = tmp_path / "elsewhere" / "credentials"
    secret.parent.mkdir()
    secret.write_text("aws_secret_access_key = SECRET-OF-THE-MACHINE\n")
    secret.chmod(0o644)  # readable by the jail's own user where trysquare is root
    scratch = tmp_path / "scratch"
    copy = scratch / "repo"
    copy.mkdir(parents=True)
    (copy / "data.txt").symlink_to(secret)
    reader = "import sys\ntry:\n    print(open(sys.argv[-1]).read())\nexcept OSError as e:\n"
    reader += "    print('unreadable', e.errno)\n"
    if named == "program":
        # A program of this machine holding a secret (a credentials helper): bound in the jail
        # before, and run there.
        printer = secret.with_name("printer.sh")
        printer.write_text("#!/bin/sh\necho SECRET-OF-THE-MACHINE in a helper\n")
        printer.chmod(0o755)
        (copy / "gradlew").symlink_to(printer)
        argv = ["./gradlew"]
    else:
        (copy / "reader.py").write_text(reader)
        argv = [sys.executable, str(copy / "reader.py"), str(copy / "data.txt")]
    done = run_process(
        argv, cwd=copy, timeout=60, sandbox=Sandbox([scratch]), jail=jail.JailPolicy()
    )
    said = (done.stdout + done.stderr).decode()
    assert "SECRET-OF-THE-MACHINE" not in said
    if named == "argument":
        assert "unreadable" in said, said


@pytest.mark.skipif(
    os.geteuid() != 0, reason="the jail's own user is chosen where trysquare is root"
)
def test_prepare_and_the_suite_run_as_one_jail_user_and_the_scratch_is_handed_over_once(
    tmp_path: Path,
) -> None:
    """Steps of one run share the jail's user: what prepare built (node_modules: thousands of
    files) is the suite's already, not walked and handed over again before every step."""
    from trysquare._process import run_steps
    from trysquare.sandbox import Sandbox

    scratch = tmp_path / "scratch"
    copy = scratch / "repo"
    copy.mkdir(parents=True)
    done = run_steps(
        [
            (
                "prepare",
                [sys.executable, "-c", "import os; open('built', 'w').write(str(os.getuid()))"],
            ),
            (
                "the suite",
                [
                    sys.executable,
                    "-c",
                    "import os; assert open('built').read() == str(os.getuid()); print('same')",
                ],
            ),
        ],
        cwd=copy,
        timeout=60,
        sandbox=Sandbox([str(scratch)]),
        jail=jail.JailPolicy(),
    )
    assert done.problem is None and done.last is not None
    assert done.last.returncode == 0, done.transcript.decode()
    assert os.stat(copy / "built").st_uid >= 0x60000000  # a jail user's, not root's

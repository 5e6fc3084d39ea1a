"""Landlock: a validator, the suite and what they leave behind cannot write where they must not.

Each test is one attack; the write must fail at the write (EACCES), the clone
must be untouched and the run stay valid. Where the kernel has no Landlock these
tests are skipped: test_guard_clone.py shows detection catching the same writes.
"""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path

import pytest
from trysquare import sandbox
from trysquare.clone_guard import stat_picture

from tests.helpers import write_scenario, write_script
from tests.security.guard_fixtures import attempts, build_run, result, run_validate, scenario
from tests.security.test_guard_clone import PLANTING_TEST, SUITE_SCENARIO, SUITE_VALIDATOR

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare.sandbox",)


pytestmark = pytest.mark.skipif(sandbox.landlock_abi() < 1, reason="this kernel offers no Landlock")

DENIED = f"failed: Permission denied (errno {errno.EACCES})"


@pytest.fixture(autouse=True)
def _sandbox_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRYSQUARE_SANDBOX", raising=False)


def _blocked(tmp_path: Path, body: str) -> dict[str, str]:
    """Run the attack; every write failed at the write, the clone is as it was, the run valid."""
    run = build_run(tmp_path)
    before = stat_picture(run.repo.path)
    summary, out = run_validate(scenario(tmp_path / "s", body), run.path.parents[1])
    tried = attempts(run)
    assert tried and set(tried.values()) == {DENIED}, tried
    assert stat_picture(run.repo.path) == before
    recorded = result(run)
    assert recorded["state"] == "valid" and recorded["metrics"] == {"blocked": True}, out
    assert summary.exit_code == 0
    return tried


def test_sandbox_validator_appending_to_a_file_the_agent_changed(tmp_path: Path) -> None:
    _blocked(tmp_path, 'attempt("append", lambda: append(os.path.join(repo, "counter.py")))\n')


def test_sandbox_validator_writing_an_ignored_file(tmp_path: Path) -> None:
    _blocked(tmp_path, 'attempt("ignored", lambda: append(os.path.join(repo, "debug.log")))\n')


def test_sandbox_validator_editing_git_config(tmp_path: Path) -> None:
    _blocked(
        tmp_path,
        'attempt("config", lambda: append(os.path.join(repo, ".git", "config"), "[core]\\n\\tfsmonitor = evil\\n"))\n',
    )


def test_sandbox_validator_adding_a_hook(tmp_path: Path) -> None:
    _blocked(
        tmp_path,
        'attempt("hook", lambda: append(os.path.join(repo, ".git", "hooks", "post-checkout"), "#!/bin/sh\\n"))\n',
    )


def test_sandbox_validator_deleting_or_renaming_in_the_clone(tmp_path: Path) -> None:
    _blocked(
        tmp_path,
        (
            'attempt("delete", lambda: os.remove(os.path.join(repo, "README.md")))\n'
            'attempt("rename", lambda: os.rename(os.path.join(repo, "notes.txt"), os.path.join(repo, "n.txt")))\n'
            'attempt("truncate", lambda: os.truncate(os.path.join(repo, "counter.py"), 0))\n'
        ),
    )


def test_sandbox_validator_forging_results_in_its_run_and_another(tmp_path: Path) -> None:
    other = build_run(tmp_path, "r2")
    (other.path / "validation").mkdir()
    forged = other.path / "validation" / "attack.json"
    forged.write_text("{}")
    _blocked(
        tmp_path,
        (
            f'attempt("other run", lambda: append({str(forged)!r}))\n'
            'attempt("own result", lambda: append(os.path.join(os.path.dirname(os.path.dirname(sys.argv[1])), "attack.json")))\n'
            'attempt("own work record", lambda: append(os.path.join(os.path.dirname(repo), ".trysquare", "work.json")))\n'
            'attempt("/tmp", lambda: append("/tmp/trysquare-stray-" + str(os.getpid())))\n'
        ),
    )


def test_sandbox_scratch_archive_and_dev_null_stay_writable(tmp_path: Path) -> None:
    run = build_run(tmp_path)
    body = (
        "import tempfile\n"
        'attempt("scratch", lambda: append("here.txt"))\n'
        'attempt("tmpdir", lambda: tempfile.NamedTemporaryFile(delete=True).close())\n'
        'attempt("archive", lambda: append(os.path.join(os.path.dirname(sys.argv[1]), "evidence.txt")))\n'
        'attempt("/dev/null", lambda: append("/dev/null"))\n'
    )
    run_validate(scenario(tmp_path / "s", body), run.path.parents[1])
    assert set(attempts(run).values()) == {"wrote"}
    assert (run.path / "validation" / "attack" / "evidence.txt").exists()


def test_sandbox_suite_editing_the_etalon_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fallback's guarantee (in the jail the cache is not even visible: test_jail.py).
    monkeypatch.setenv("TRYSQUARE_JAIL", "off")
    run = build_run(tmp_path)
    run.repo.write("tests/test_plant.py", PLANTING_TEST)
    folder = tmp_path / "s"
    write_script(folder, "suite.py", SUITE_VALIDATOR)
    _, out = run_validate(write_scenario(folder, SUITE_SCENARIO), run.path.parents[1])
    recorded = json.loads((run.path / "validation" / "suite.json").read_text())
    # The agent's test passes only when every planting write failed.
    assert recorded["state"] == "valid" and recorded["metrics"] == {"tests": True}, (out, recorded)
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "trysquare" / "etalons"
    assert not list(cache.glob("*/planted.py"))


def test_sandbox_setsid_grandchild_is_killed_when_its_validation_ends(tmp_path: Path) -> None:
    run = build_run(tmp_path)
    archive = run.path / "validation" / "attack"
    late = tmp_path / "late.py"
    go = tmp_path / "go"
    # Writes its pid where it may (the archive), then a mark once the test says go (after
    # validate returned), or after 60 s.
    late.write_text(
        "import os, sys, time\n"
        "open(os.path.join(sys.argv[1], 'pid'), 'w').write(str(os.getpid()))\n"
        "deadline = time.time() + 60\n"
        f"while not os.path.exists({str(go)!r}) and time.time() < deadline:\n"
        "    time.sleep(0.02)\n"
        "open(os.path.join(sys.argv[1], 'late'), 'w').write('x')\n"
    )
    # A double fork into a new session, pipes closed, environment cleared: it would
    # outlive the validator.
    body = (
        "archive = os.path.dirname(sys.argv[1])\n"
        f"subprocess.Popen(['setsid', sys.executable, {str(late)!r}, archive], start_new_session=True,\n"
        "                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={})\n"
        "deadline = time.time() + 10\n"
        "while not os.path.exists(os.path.join(archive, 'pid')) and time.time() < deadline:\n"
        "    time.sleep(0.05)\n"
    )
    run_validate(scenario(tmp_path / "s", body), run.path.parents[1])
    pid = int((archive / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone (and reaped) when validate returned
    go.touch()
    time.sleep(0.5)  # a survivor would write its mark within 20 ms of this
    assert not (archive / "late").exists()


def test_sandbox_suite_grandchild_is_killed_when_the_suite_ends(tmp_path: Path) -> None:
    run = build_run(tmp_path)
    mark = f"daemon-{os.getpid()}-{time.monotonic_ns()}"  # names this test's daemon in the process table
    # The agent's test starts a daemon that leaves the session and clears its environment.
    run.repo.write(
        "tests/test_daemon.py",
        f"""
import os, subprocess, sys, tempfile, time, unittest

class Daemon(unittest.TestCase):
    def test_daemon(self):
        pid = os.path.join(tempfile.mkdtemp(), "pid")
        code = "import os, time; open(os.environ['PIDFILE'], 'w').write('x'); time.sleep(60) # {mark}"
        subprocess.Popen([sys.executable, "-c", code], start_new_session=True, env={{"PIDFILE": pid}},
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not os.path.exists(pid):
            time.sleep(0.05)
""",
    )
    folder = tmp_path / "s"
    write_script(folder, "suite.py", SUITE_VALIDATOR)
    run_validate(write_scenario(folder, SUITE_SCENARIO), run.path.parents[1])
    assert json.loads((run.path / "validation" / "suite.json").read_text())["metrics"] == {
        "tests": True
    }
    assert [p for p in os.listdir("/proc") if p.isdigit() and mark in _cmdline(p)] == []


def _cmdline(pid: str) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline")
            .read_bytes()
            .replace(b"\0", b" ")
            .decode(errors="replace")
            .strip()
        )
    except OSError:
        return ""


def test_sandbox_concurrent_validators_are_never_taken_for_strays(tmp_path: Path) -> None:
    # With --jobs 2, one validation ending must not end the other one starting or running.
    runs = [build_run(tmp_path, f"r{index}") for index in range(1, 13)]
    summary, out = run_validate(
        scenario(tmp_path / "s", "time.sleep(0.05)\n"), tmp_path / "exp", jobs=2
    )
    assert summary.exit_code == 0, out
    assert all(result(run)["state"] == "valid" for run in runs)


def test_sandbox_plugins_and_check_say_which_protection_is_in_force(cli, tmp_path: Path) -> None:
    listed = cli("plugins")
    assert f"protection: Landlock (ABI {sandbox.landlock_abi()})" in listed.stdout
    folder = tmp_path / "s"
    checked = cli("check", scenario(folder, ""), env={"TRYSQUARE_SANDBOX": "off"})
    assert checked.returncode == 0, checked.stderr
    assert "protection: detection only (TRYSQUARE_SANDBOX=off)" in checked.stdout

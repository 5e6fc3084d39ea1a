"""Landlock: /dev/shm is no way around the sandbox when an experiment lies on it.

A confined child used to be allowed every write beneath ``/dev``, so beneath ``/dev/shm``, a
world-writable tmpfs where people keep experiments for speed. Each attack here puts the
experiment under ``/dev/shm`` and has a validator — or the agent's test code, where the jail
is off and Landlock is its only fence — change its result, its run's files and a file beside
the run: every write must fail at the write and the run keep the score an honest run gets.
The last tests show what must keep working: the character devices, and ``multiprocessing``
in a validator when nothing trysquare protects lies on ``/dev/shm``.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from trysquare import sandbox

from tests.helpers import write_scenario, write_script
from tests.security.guard_fixtures import attempts, build_run, result, run_validate, scenario
from tests.security.test_guard_clone import SUITE_SCENARIO, SUITE_VALIDATOR

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare.sandbox", "trysquare.runner", "trysquare.execute")

pytestmark = pytest.mark.skipif(sandbox.landlock_abi() < 1, reason="this kernel offers no Landlock")

DENIED = f"failed: Permission denied (errno {errno.EACCES})"


@pytest.fixture(autouse=True)
def _sandbox_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRYSQUARE_SANDBOX", raising=False)


@pytest.fixture
def on_shm() -> Iterator[Path]:
    """A fresh folder under /dev/shm, removed afterwards (skipped where there is none)."""
    if not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK | os.X_OK):
        pytest.skip("/dev/shm is absent or not writable here")
    folder = Path(tempfile.mkdtemp(prefix="trysquare-test-shm-", dir="/dev/shm"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _snapshot(folder: Path) -> dict[str, bytes]:
    """Every regular file below ``folder``, with its bytes."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in folder.rglob("*")
        if path.is_file()
    }


def _unchanged(folder: Path, before: dict[str, bytes]) -> bool:
    """Whether every file ``before`` holds (the run as the harness left it) is as it was."""
    after = _snapshot(folder)
    return {name: after.get(name) for name in before} == before


def test_a_validator_cannot_write_an_experiment_that_lies_under_dev_shm(on_shm: Path) -> None:
    first, second = build_run(on_shm, "r1"), build_run(on_shm, "r2")
    before = {run.path.name: _snapshot(run.path) for run in (first, second)}
    forged = second.path / "validation" / "attack.json"  # replaced by its validation
    forged.parent.mkdir()
    forged.write_text("{}")
    runs = first.path.parent
    stray = f"/dev/shm/trysquare-test-stray-{os.getpid()}"
    body = (
        "run_dir = os.path.dirname(repo)\n"
        'attempt("own result", lambda: append(os.path.join(os.path.dirname(os.path.dirname(sys.argv[1])), "attack.json")))\n'
        'attempt("run.toml", lambda: append(os.path.join(run_dir, "run.toml"), "\\n# planted\\n"))\n'
        'attempt("the clone", lambda: append(os.path.join(repo, "counter.py")))\n'
        f'attempt("other run", lambda: append({str(forged)!r}))\n'
        f'attempt("beside the run", lambda: append({str(runs / "planted.txt")!r}))\n'
        f'attempt("measures", lambda: append({str(on_shm / "exp" / "measures.json")!r}))\n'
        f'attempt("a file of /dev/shm", lambda: append({stray!r}))\n'
    )
    try:
        summary, out = run_validate(scenario(on_shm / "s", body), on_shm / "exp")
    finally:
        planted_stray = os.path.exists(stray)
        if planted_stray:
            os.remove(stray)
    for run in (first, second):
        tried = attempts(run)
        assert set(tried) >= {"own result", "run.toml", "other run", "beside the run"}, tried
        assert set(tried.values()) == {DENIED}, (run.path.name, tried)
        # The score an honest run gets: valid, and every write it tried failed.
        recorded = result(run)
        assert recorded["state"] == "valid" and recorded["metrics"] == {"blocked": True}, out
        assert _unchanged(run.path, before[run.path.name])
    assert not (runs / "planted.txt").exists() and not planted_stray
    assert summary.exit_code == 0
    # Said once, naming why: a validator's multiprocessing locks would fail there.
    assert out.count(f"cannot write /dev/shm ({on_shm / 'exp'} lies on it)") == 1, out


PLANTING_BESIDE_THE_RUN = """
import os, unittest

TARGETS = {targets!r}

class Plant(unittest.TestCase):
    def test_plant(self):
        wrote = []
        for path in TARGETS:
            try:
                with open(path, "a") as handle:
                    handle.write("planted by the agent's test\\n")
                wrote.append(path)
            except OSError as error:
                self.assertEqual(error.errno, {eacces})
        self.assertEqual(wrote, [])
"""


def test_the_agents_test_code_unjailed_cannot_write_an_experiment_under_dev_shm(
    on_shm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fallback: no jail, Landlock is the agent's code's only fence.
    monkeypatch.setenv("TRYSQUARE_JAIL", "off")
    first, second = build_run(on_shm, "r1"), build_run(on_shm, "r2")
    runs = first.path.parent
    before = {run.path.name: _snapshot(run.path) for run in (first, second)}
    other_result = second.path / "validation" / "suite.json"  # replaced by its validation
    other_result.parent.mkdir()
    other_result.write_text("{}")
    targets = [
        str(first.path / "run.toml"),
        str(first.path / "validation" / "suite.json"),
        str(other_result),
        str(runs / "planted.txt"),
        str(on_shm / "exp" / "measures.json"),
    ]
    for run in (first, second):
        run.repo.write(
            "tests/test_plant.py",
            PLANTING_BESIDE_THE_RUN.format(targets=targets, eacces=errno.EACCES),
        )
    folder = on_shm / "s"
    write_script(folder, "suite.py", SUITE_VALIDATOR)
    summary, out = run_validate(write_scenario(folder, SUITE_SCENARIO), on_shm / "exp")
    for run in (first, second):
        recorded = json.loads((run.path / "validation" / "suite.json").read_text())
        # The agent's test passes only when every planting write failed.
        assert recorded["state"] == "valid" and recorded["metrics"] == {"tests": True}, (
            out,
            recorded,
        )
        assert _unchanged(run.path, before[run.path.name])
    assert not (runs / "planted.txt").exists()
    assert summary.exit_code == 0


def test_devices_stay_writable_and_multiprocessing_works_off_dev_shm(tmp_path: Path) -> None:
    # An ordinary host: nothing trysquare protects lies on /dev/shm (the suite's temporary
    # files are on a tmpfs of their own), so a validator's multiprocessing keeps working.
    if sandbox.shared_memory_refusal() is not None:
        pytest.skip(f"/dev/shm is refused on this host already ({sandbox.shared_memory_refusal()})")
    run = build_run(tmp_path)
    stray = f"/dev/trysquare-test-stray-{os.getpid()}"
    body = (
        "import multiprocessing, pty\n"
        "from multiprocessing import shared_memory\n"
        "def pool():\n"
        "    with multiprocessing.get_context('fork').Pool(2) as workers:\n"
        "        assert workers.map(abs, [-1, -2]) == [1, 2]\n"
        "def memory():\n"
        "    block = shared_memory.SharedMemory(create=True, size=64)\n"
        "    block.close(); block.unlink()\n"
        "def terminal():\n"
        "    leader, follower = pty.openpty()\n"
        "    os.write(follower, b'x'); os.close(leader); os.close(follower)\n"
        'attempt("/dev/null", lambda: append("/dev/null"))\n'
        'attempt("/dev/full", lambda: open("/dev/full", "w").close())\n'
        'attempt("/dev/urandom", lambda: open("/dev/urandom", "wb").close())\n'
        'attempt("a pty", terminal)\n'
        'attempt("multiprocessing", pool)\n'
        'attempt("shared memory", memory)\n'
        'attempt("git", lambda: subprocess.run(["git", "-C", repo, "status"], check=True, capture_output=True))\n'
        f'attempt("a new file in /dev", lambda: append({stray!r}))\n'
        "print(json.dumps({'metrics': {'blocked': True}, 'reasons': {'blocked': json.dumps(attempts)}}))\n"
        "raise SystemExit(0)\n"
    )
    try:
        run_validate(scenario(tmp_path / "s", body), run.path.parents[1])
    finally:
        planted = os.path.exists(stray)
        if planted:
            os.remove(stray)
    assert "blocked" in result(run)["reasons"], result(run)
    tried = attempts(run)
    assert tried.pop("a new file in /dev") == DENIED and not planted
    assert set(tried.values()) == {"wrote"}, tried


def test_a_folder_on_dev_shm_is_found_through_a_link_and_on_the_same_file_system(
    on_shm: Path, tmp_path: Path
) -> None:
    link = tmp_path / "fast"
    link.symlink_to(on_shm)
    for named in (on_shm / "exp", link / "exp", on_shm / "not-made-yet" / "deeper"):
        with sandbox.protecting([tmp_path, named]):
            assert sandbox.shared_memory_refusal() == f"{named} lies on it"
    with sandbox.protecting([tmp_path]):
        assert sandbox.shared_memory_refusal() is None


WARM_PLANTER = """
from trysquare.assay import validator

TARGETS = {targets!r}


@validator
def evaluate(run):
    wrote = []
    for path in TARGETS:
        try:
            with open(path, "a") as handle:
                handle.write("planted by a warm child\\n")
            wrote.append(path)
        except PermissionError:
            pass
    return {{"blocked": not wrote}}


if __name__ == "__main__":
    raise SystemExit(evaluate.cli())
"""


def test_a_warm_child_cannot_write_an_experiment_under_dev_shm(
    on_shm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The warm server knows nothing of the experiment: the decision travels with the request.
    from trysquare import _warm

    served: list[int] = []
    real = _warm.run_warm

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        done = real(*args, **kwargs)
        served.extend([] if done is None else [1])
        return done

    monkeypatch.setattr(_warm, "run_warm", counting)
    first, second = build_run(on_shm, "r1"), build_run(on_shm, "r2")
    runs = first.path.parent
    targets = [
        str(first.path / "run.toml"),
        str(runs / "planted.txt"),
        f"/dev/shm/trysquare-test-warm-stray-{os.getpid()}",
    ]
    before = {run.path.name: _snapshot(run.path) for run in (first, second)}
    folder = on_shm / "s"
    write_script(folder, "warm.py", WARM_PLANTER.format(targets=targets))
    scenario_path = write_scenario(
        folder,
        '[[validation]]\nmode = "script"\nname = "warm"\ncommand = "warm.py"\n'
        'metrics = ["blocked"]\ntimeout = 60\n',
    )
    try:
        summary, out = run_validate(scenario_path, on_shm / "exp")
    finally:
        planted_stray = os.path.exists(targets[-1])
        if planted_stray:
            os.remove(targets[-1])
    assert len(served) == 2, out  # both runs were served warm
    for run in (first, second):
        recorded = result(run, "warm")
        assert recorded["state"] == "valid" and recorded["metrics"] == {"blocked": True}, out
        assert _unchanged(run.path, before[run.path.name])
    assert not (runs / "planted.txt").exists() and not planted_stray
    assert summary.exit_code == 0


def test_a_folder_on_a_file_system_mounted_beneath_dev_shm_is_found(on_shm: Path) -> None:
    # Another tmpfs mounted beneath /dev/shm: the folder is not on /dev/shm's own file system,
    # yet a write granted beneath /dev/shm reaches it. Mounted in a namespace of its own.
    mounted = on_shm / "mounted here"  # a space: the mount table writes it escaped
    mounted.mkdir()
    probe = (
        "import os, sys\n"
        "from trysquare import sandbox\n"
        "os.mkdir(os.path.join(sys.argv[1], 'exp'))\n"
        "with sandbox.protecting([os.path.join(sys.argv[1], 'exp')]):\n"
        "    print(sandbox.shared_memory_refusal())\n"
    )
    own = [] if os.geteuid() == 0 else ["-r"]
    command = [
        "unshare", *own, "-m", "sh", "-c",
        'mount --make-rprivate / && mount -t tmpfs none "$1" && exec "$2" -c "$3" "$1"',
        "sh", str(mounted), sys.executable, probe,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0 and "exp" not in done.stdout:
        pytest.skip(f"no mount namespace here: {done.stderr.strip()[-200:]}")
    assert done.stdout.strip() == f"{mounted / 'exp'} lies on it", done


def test_the_folders_named_are_walked_once_and_not_kept(on_shm: Path) -> None:
    # validate names every run and clone: they are looked at once, by one thread, and nothing
    # per run stays behind (at 100,000 runs a table of them would be megabytes).
    import threading

    walked: list[str] = []

    def folders() -> Iterator[str]:
        for number in range(500):
            walked.append(f"/nowhere/run{number}")
            yield walked[-1]
        yield str(on_shm / "run-last")

    with sandbox.protecting(folders()):
        answers: list[str | None] = []
        askers = [
            threading.Thread(target=lambda: answers.append(sandbox.shared_memory_refusal()))
            for _ in range(4)
        ]
        for asker in askers:
            asker.start()
        for asker in askers:
            asker.join()
        assert answers == [f"{on_shm / 'run-last'} lies on it"] * 4
        assert len(walked) == 500  # once, whatever the threads asking
        assert not any(name.startswith("/nowhere/") for name in sandbox._on_shared_memory)
        assert all(entry.folders is None for entry in sandbox._protected)
    assert sandbox.shared_memory_refusal() is None


def test_a_task_looked_at_ahead_keeps_its_answer_and_no_other_task_takes_it(
    on_shm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """validate's task builder looks at the next task's run and clone while a validator runs
    (sandbox.look_ahead); the task's start then takes that answer instead of looking again: a
    run on /dev/shm still refuses it, and folders not looked at ahead are looked at as ever."""
    monkeypatch.setattr(sandbox, "_looked_ahead", {})
    run_on_shm, clone = on_shm / "run", tmp_path / "clone"
    run_on_shm.mkdir()
    clone.mkdir()
    sandbox.look_ahead((str(run_on_shm), clone))
    sandbox.shared_memory_refusal()  # trysquare's own folders, looked at once per process
    looked: list[str] = []
    real = sandbox._lies_on_shared_memory

    def counted(folder: str) -> bool:
        looked.append(folder)
        return real(folder)

    monkeypatch.setattr(sandbox, "_lies_on_shared_memory", counted)
    with sandbox.protecting((str(run_on_shm), clone)):
        assert sandbox.shared_memory_refusal() == f"{run_on_shm} lies on it"
    assert looked == [] and sandbox._looked_ahead == {}  # taken once, not looked at again
    other = tmp_path / "other"
    other.mkdir()
    sandbox.look_ahead((str(other),))
    looked.clear()
    with sandbox.protecting((str(run_on_shm), clone)):  # not the folders looked at ahead
        assert sandbox.shared_memory_refusal() == f"{run_on_shm} lies on it"
    assert looked == [str(run_on_shm)]

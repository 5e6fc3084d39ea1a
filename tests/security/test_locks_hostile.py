"""A lock file inside a run folder is the agent's input like any other file there.

A FIFO (or socket, folder) planted at ``runs/<run>/.trysquare/validate.lock`` once
made ``validate`` and ``form ingest`` wait for ever while holding the experiment's
lock. Each test runs the command in a real process with a deadline: a hang is a
failure, not a stuck suite.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from trysquare.testing import build_run

from tests.helpers import write_scenario, write_script

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare.lock",)


HERE = os.getcwd()
DEADLINE = 30  # seconds; each command here ends in a few when it does not wait

SCORE = """\
import json
print(json.dumps({"metrics": {"ok": True}}))
"""


def experiment(tmp_path: Path) -> tuple[Path, Path]:
    exp = tmp_path / "exp"
    for index in range(2):
        build_run(
            exp / "runs" / f"r{index}",
            base={"a.py": "a = 1\n"},
            changes={"a.py": f"a = {index + 2}\n"},
            response="done\n",
            repetition=index + 1,
        )
    write_script(tmp_path / "s", "score.py", SCORE)
    scenario = write_scenario(
        tmp_path / "s",
        """
        [[validation]]
        name = "score"
        mode = "script"
        command = "score.py"
        metrics = ["ok"]

        [[validation]]
        name = "human"
        mode = "form"
        pieces = ["diff", "response"]
        metrics = ["clear"]
    """,
    )
    return exp, scenario


def plant(run: Path, kind: str) -> Path:
    lock = run / ".trysquare" / "validate.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    if lock.exists():
        lock.unlink()
    if kind == "fifo":
        os.mkfifo(lock)
    elif kind == "folder":
        lock.mkdir()
    else:
        # A socket path must be short: bound in a short folder, then moved into place.
        short = Path(tempfile.mkdtemp(dir=run.parent))
        with socket.socket(socket.AF_UNIX) as sock:
            os.chdir(short)
            try:
                sock.bind("s")
            finally:
                os.chdir(HERE)
        os.rename(short / "s", lock)
        short.rmdir()
    return lock


@pytest.mark.parametrize("kind", ["fifo", "socket", "folder"])
def test_a_non_regular_lock_in_a_run_refuses_that_run_and_validates_the_others(
    cli_process, tmp_path: Path, kind: str
) -> None:
    exp, scenario = experiment(tmp_path)
    lock = plant(exp / "runs" / "r0", kind)
    done = cli_process(
        "validate", scenario, exp, "--no-progress", "--only", "score", timeout=DEADLINE
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert str(lock) in done.stderr and "not a regular file" in done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    # The other run is scored; the refused one has no result.
    assert (exp / "runs" / "r1" / "validation" / "score.json").is_file()
    assert not (exp / "runs" / "r0" / "validation" / "score.json").exists()
    # The experiment's own lock was released: a second validate is not refused as "another trysquare".
    again = cli_process(
        "validate", scenario, exp, "--no-progress", "--only", "score", timeout=DEADLINE
    )
    assert "another trysquare" not in again.stderr


def test_validate_on_the_run_whose_lock_is_a_fifo_names_the_run(
    cli_process, tmp_path: Path
) -> None:
    exp, scenario = experiment(tmp_path)
    lock = plant(exp / "runs" / "r0", "fifo")
    done = cli_process("validate", scenario, exp / "runs" / "r0", "--no-progress", timeout=DEADLINE)
    assert done.returncode == 1, done.stdout + done.stderr
    assert str(lock) in done.stderr and "not a regular file" in done.stderr
    assert "internal error" not in done.stderr and "Errno" not in done.stderr


def test_form_ingest_never_waits_on_a_fifo_lock(cli_process, tmp_path: Path) -> None:
    exp, scenario = experiment(tmp_path)
    form = tmp_path / "FORM.toml"
    exported = cli_process(
        "form", "export", scenario, exp, "-o", form, "--seed", "1", timeout=DEADLINE
    )
    assert exported.returncode == 0, exported.stderr
    text = form.read_text(encoding="utf-8").replace("# clear = true|false", "clear = true")
    form.write_text(text, encoding="utf-8")
    lock = plant(exp / "runs" / "r0", "fifo")
    done = cli_process("form", "ingest", scenario, exp, form, "--by", "ana", timeout=DEADLINE)
    assert str(lock) in done.stderr, done.stdout + done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    # The other run's answer landed.
    human = exp / "runs" / "r1" / "validation" / "human.json"
    assert human.is_file()


WAITS_IN_PREPARE = """
import os
from trysquare import hookimpl
from trysquare.modes import Validation

FIFO = os.environ["WAIT_ON_FIFO"]

class WaitingValidation(Validation):
    def prepare(self):
        open(FIFO).read()  # waits until someone writes: nobody will

class WaitingMode:
    name = "waits"
    def load(self, table, source):
        return source.structure(table, WaitingValidation)

@hookimpl
def trysquare_register_modes(register):
    register(WaitingMode())
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_validate_whatever_it_waits_on(
    cli_process, site, tmp_path: Path, signum: int
) -> None:
    """A wait no handler can cut short (a blocking open in a plugin) still ends on SIGTERM/SIGINT."""
    site("trysquare-waits", "trysquare_waits", WAITS_IN_PREPARE)
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)
    exp, _ = experiment(tmp_path)
    scenario = write_scenario(
        tmp_path / "w",
        """
        [[validation]]
        name = "w"
        mode = "waits"
        metrics = ["x"]
    """,
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "trysquare", "validate", str(scenario), str(exp), "--no-progress"],
        env={**cli_process.env, "WAIT_ON_FIFO": str(fifo)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Wait until the process is in the plugin's open (it holds the experiment's lock).
        started = time.monotonic()
        while not (exp / ".trysquare" / "validate.lock").exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() - started < DEADLINE
            time.sleep(0.05)
        time.sleep(1.0)
        process.send_signal(signum)
        sent = time.monotonic()
        _, stderr = process.communicate(timeout=DEADLINE)
        took = time.monotonic() - sent
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert took < 15, f"ended {took:.1f} s after the signal"
    assert process.returncode == 128 + signum, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr


def test_a_fifo_lock_planted_after_the_runs_were_loaded_never_holds_the_lock(
    tmp_path: Path,
) -> None:
    """The race: the run loaded clean, then its lock became a FIFO before the overlap probe."""
    import threading

    from trysquare.lock import experiment_lock
    from trysquare.runs import discover

    exp, _ = experiment(tmp_path)
    (found,) = discover([exp])
    plant(exp / "runs" / "r0", "fifo")
    ended = threading.Event()

    def take() -> None:
        with experiment_lock(found.root, found.runs):
            pass
        ended.set()

    threading.Thread(target=take, daemon=True).start()
    assert ended.wait(DEADLINE), "the lock probe waited on the FIFO"

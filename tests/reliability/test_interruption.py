"""SIGINT/SIGTERM mid-matrix, and two validate processes on one experiment."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import write_scenario, write_script

SLOW = """
import json, os, sys, time
if os.path.exists(SWITCH):
    time.sleep(SECONDS)
print(json.dumps({"metrics": {"done": True}}))
"""


def slow_scenario(folder: Path, seconds: float = 0.6) -> Path:
    """One script validator, `slow`, that sleeps ``seconds`` before it answers while the file
    ``slow.switch`` beside it exists (removed, it answers at once)."""
    switch = folder / "slow.switch"
    write_script(
        folder,
        "slow.py",
        SLOW.replace("SWITCH", repr(str(switch))).replace("SECONDS", str(seconds)),
    )
    switch.write_text("on\n")
    return write_scenario(
        folder,
        """
        [[validation]]
        name = "slow"
        mode = "script"
        command = "slow.py"
        metrics = ["done"]
    """,
    )


GATED = """
import json, os, sys, time
deadline = time.monotonic() + 60
while os.path.exists(GATE) and time.monotonic() < deadline:
    time.sleep(0.02)
print(json.dumps({"metrics": {"done": True}}))
"""


def gated_scenario(folder: Path, gate: Path) -> Path:
    """One script validator, `slow`, that answers only once ``gate`` is removed (60 s at most):
    a second command is then tried while the first surely holds its lock, however loaded the
    machine (a fixed sleep raced the first command's end)."""
    gate.write_text("closed\n")
    write_script(folder, "slow.py", GATED.replace("GATE", repr(str(gate))))
    return write_scenario(
        folder,
        """
        [[validation]]
        name = "slow"
        mode = "script"
        command = "slow.py"
        metrics = ["done"]
    """,
    )


def wait_for_validator(script: Path, timeout: float = 60) -> None:
    """Until a process running ``script`` exists (the first validate holds its lock by then)."""
    needle = str(script).encode()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                if needle in cmdline.read_bytes():
                    return
            except OSError:
                continue
        time.sleep(0.05)
    raise AssertionError(f"no validator running {script} appeared")


def matrix(make_run, count: int) -> Path:
    first = make_run("r00")
    first.base({"a.py": "a = 1\n"})
    first.repo.write("a.py", "a = 2\n")
    first.finish()
    for index in range(1, count):
        run = make_run(f"r{index:02d}", repetition=index + 1)
        run.base({"a.py": "a = 1\n"})
        run.finish()
    return first.path.parents[1]


def start_validate(cli, scenario: Path, experiment: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trysquare",
            "validate",
            str(scenario),
            str(experiment),
            "--no-progress",
            "--jobs",
            "1",
            *extra,
        ],
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_results(experiment: Path, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(list(experiment.glob("runs/*/validation/slow.json"))) >= count:
            return
        time.sleep(0.05)
    raise AssertionError("validate never recorded a result")


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_keeps_finished_results_and_resumes(
    cli, make_run, tmp_path: Path, signum, code
) -> None:
    experiment = matrix(make_run, 8)
    scenario = slow_scenario(tmp_path / "s")
    process = start_validate(cli, scenario, experiment)
    wait_for_results(experiment, 2)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == code, stderr
    assert "interrupted:" in stderr and "finished and were kept" in stderr
    recorded = sorted(experiment.glob("runs/*/validation/slow.json"))
    assert 2 <= len(recorded) < 8
    for path in recorded:  # every recorded result is whole, and none is a killed validator's
        assert json.loads(path.read_text())["state"] == "valid"
    leftovers = [p for p in experiment.rglob("*.tmp")]
    assert leftovers == []
    rows = json.loads((experiment / "measures.json").read_text())
    assert sum(row["state"] == "valid" for row in rows) == len(recorded)
    # The next validate does only what is missing (at once: no need to be slow now).
    (scenario.parent / "slow.switch").unlink()
    again = cli("validate", scenario, experiment, "--no-progress")
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("slow: valid") == 8 - len(recorded)
    assert "8 runs: 8 valid" in again.stdout


def test_a_second_validate_is_refused_by_the_lock(cli, make_run, tmp_path: Path) -> None:
    experiment = matrix(make_run, 3)
    gate = tmp_path / "gate"
    scenario = gated_scenario(tmp_path / "s", gate)
    first = start_validate(cli, scenario, experiment)
    wait_for_validator(scenario.parent / "slow.py")
    second = cli("validate", scenario, experiment, "--no-progress")
    gate.unlink()
    first.communicate(timeout=60)
    assert first.returncode == 0
    assert second.returncode == 1
    assert "another trysquare validate is running on" in second.stderr
    assert "Traceback" not in second.stderr


@pytest.mark.parametrize("second_path", ["a run inside", "the folder above"])
def test_overlapping_paths_are_refused_too(cli, make_run, tmp_path: Path, second_path: str) -> None:
    experiment = matrix(make_run, 2)
    gate = tmp_path / "gate"
    scenario = gated_scenario(tmp_path / "s", gate)
    inner = experiment / "runs" / "r01"
    first_path, other = (
        (experiment, inner) if second_path == "a run inside" else (inner, experiment)
    )
    first = start_validate(cli, scenario, first_path)
    wait_for_validator(scenario.parent / "slow.py")
    second = cli("validate", scenario, other, "--no-progress")
    gate.unlink()
    first.communicate(timeout=60)
    assert first.returncode == 0
    assert second.returncode == 1, second.stdout + second.stderr
    assert "another trysquare validate is running on" in second.stderr

"""A task prepared ahead (trysquare._ahead) is out of reach of the validator running meanwhile,
and a kill of trysquare while it waits for its go never blames it.

Real ``trysquare validate`` processes at ``--jobs 1``, where the next task is prepared while
the current validator runs: its scratch folder exists, its pipes and confined thread too. A
hostile validator (standing for the agent's code a validation may run) looks for the other
scratch folders beside its own and tries to plant a file in each, lists the descriptors it
inherited and tries to open trysquare's own; another kills trysquare while the next task is
prepared, and the next validate must name the run that was running, not the prepared one.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest
from trysquare.sandbox import sandbox_enabled
from trysquare.testing import build_run

from tests.helpers import write_scenario, write_script
from tests.security.test_inflight_kill import KILLER, result, validate

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare._ahead", "trysquare.executors", "trysquare._inflight")

LOOKER = """
import json, os, sys

mine = os.getcwd()
own_start = sorted(os.listdir("."))  # what this run's scratch held when it began
beside = os.path.dirname(mine)
seen, planted = [], []
for name in sorted(os.listdir(beside)):
    path = os.path.join(beside, name)
    if path == mine or not name.startswith("trysquare-script-"):
        continue
    seen.append(name)
    try:
        with open(os.path.join(path, "planted-by-" + os.path.basename(mine)), "w") as handle:
            handle.write("x")
        planted.append(name)
    except OSError:
        pass
inherited = sorted(int(fd) for fd in os.listdir("/proc/self/fd") if int(fd) > 2)
theirs, opened = f"/proc/{os.getppid()}/fd", []
try:
    listed = os.listdir(theirs)
except OSError:
    listed = []
for fd in listed:  # trysquare's descriptors, the prepared task's pipes among them
    for flags in (os.O_RDONLY, os.O_WRONLY):
        try:
            os.close(os.open(os.path.join(theirs, fd), flags | os.O_NONBLOCK))
            opened.append(fd)
        except OSError:
            pass
sys.stderr.write(json.dumps({
    "own_start": own_start, "seen": seen, "planted": planted,
    "inherited": inherited, "listed": len(listed), "opened": opened,
}))
print(json.dumps({"metrics": {"ok": True}}))
"""

SCENARIO = """
[[validation]]
name = "score"
mode = "script"
command = "score.py"
metrics = ["ok"]
warm = false
"""

needs_landlock = pytest.mark.skipif(
    sys.platform != "linux" or not sandbox_enabled(), reason="the confinement is Landlock's"
)


def _experiment(root: Path, runs: list[tuple[str, str, int]]) -> Path:
    for run_id, cell, repetition in runs:
        build_run(
            root / "runs" / run_id,
            base={"a.py": "a = 1\n"},
            changes={"a.py": "a = 2\n"},
            cell=cell,
            repetition=repetition,
        )
    return root


@needs_landlock
def test_the_validator_running_cannot_reach_what_is_prepared_for_the_next(
    tmp_path: Path, cli
) -> None:
    folder = tmp_path / "scenario"
    write_script(folder, "score.py", LOOKER)
    scenario = write_scenario(folder, SCENARIO)
    root = _experiment(tmp_path / "exp", [(f"r{n}", "c", n) for n in range(6)])
    done = cli("validate", scenario, root, "--no-progress", "--jobs", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    said = [
        json.loads((root / "runs" / f"r{n}" / "validation" / "score.stderr").read_text())
        for n in range(6)
    ]
    # The next task's scratch folder was there while each one ran (what is shown is shown
    # against something), and none of them could write into it, or into any other.
    assert any(s["seen"] for s in said), said
    assert all(s["planted"] == [] for s in said), said
    # Each began in an empty folder: nothing planted by the run before.
    assert all(s["own_start"] == [] for s in said), said
    # No descriptor of trysquare's (a prepared task's pipes, its ruleset) was inherited: the
    # only one above stderr is the listing's own; trysquare's cannot be opened again through
    # /proc (listed, maybe: the folder is the same user's; each link is ptrace-checked).
    assert all(len(s["inherited"]) <= 1 for s in said), said
    assert all(s["opened"] == [] for s in said), said


def test_a_kill_while_the_next_task_is_prepared_names_only_the_run_that_ran(
    tmp_path: Path, cli_process
) -> None:
    # bad-1 runs first and kills trysquare; ok-1 is prepared meanwhile (its scratch folder,
    # its confined thread) but never started: its marker is written only at its go.
    folder = tmp_path / "scenario"
    write_script(folder, "score.py", KILLER.replace("HOW", "os.kill(pid, signal.SIGKILL)"))
    scenario = write_scenario(folder, SCENARIO)
    root = _experiment(tmp_path / "exp", [("bad-1", "bad", 1), ("ok-1", "ok", 1)])
    first = validate(cli_process, scenario, root, jobs=1)
    assert first.returncode == -signal.SIGKILL, first.stdout + first.stderr
    assert result(root, "ok-1") is None  # it never ran

    second = validate(cli_process, scenario, root, jobs=1)
    said = second.stdout + second.stderr
    assert "run 'bad-1'" in said and "was running when trysquare last ended" in said, said
    assert "run 'ok-1'" not in said, said
    document = result(root, "ok-1")
    assert document is not None and document["metrics"] == {"ok": True}, said

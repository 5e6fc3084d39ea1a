"""One lock model: ``validate`` and ``form ingest`` exclude each other on overlapping folders.

Real processes: a ``validate`` held open by a slow validator, and a second
command started while it works — on the folder above, below, or the same run
reached through a symlinked path.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

from trysquare.runs import discover
from trysquare.testing import build_run

from tests.helpers import write_scenario, write_script

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare.lock",)


# Says it started (a file beside the scenario), then waits until the test removes the
# gate beside it (60 s at most): it outlasts the second command however loaded the
# machine is (a fixed sleep raced it).
SLOW = """\
import json, pathlib, sys, time
marker = pathlib.Path(__file__).with_name("started")
marker.write_text("x")
gate = pathlib.Path(__file__).with_name("gate")
deadline = time.monotonic() + 60
while gate.exists() and time.monotonic() < deadline:
    time.sleep(0.02)
print(json.dumps({"metrics": {"done": True}}))
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
    write_script(tmp_path / "s", "slow.py", SLOW)
    (tmp_path / "s" / "gate").write_text("closed\n")
    scenario = write_scenario(
        tmp_path / "s",
        """
        [[validation]]
        name = "slow"
        mode = "script"
        command = "slow.py"
        metrics = ["done"]

        [[validation]]
        name = "human"
        mode = "form"
        pieces = ["diff", "response"]
        metrics = ["clear"]
    """,
    )
    return exp, scenario


def start(cli, *args: str | Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "trysquare", *map(str, args)],
        # The slow validator signals through a file beside the scenario: a write the
        # sandbox would refuse, and these tests are about the lock, not the sandbox.
        env={**cli.env, "TRYSQUARE_SANDBOX": "off"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_started(scenario: Path, process: subprocess.Popen[str]) -> None:
    marker = scenario.with_name("started")
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the slow validator never started"
        time.sleep(0.05)


def filled_form(cli, exp: Path, scenario: Path, tmp_path: Path) -> Path:
    form = tmp_path / "FORM.toml"
    done = cli("form", "export", scenario, exp, "-o", form, "--seed", "3")
    assert done.returncode == 0, done.stderr
    text = form.read_text(encoding="utf-8")
    form.write_text(re.sub(r"# clear = true\|false", "clear = true", text), encoding="utf-8")
    return form


def test_form_ingest_on_the_experiment_while_validate_works_on_one_run(cli, tmp_path: Path) -> None:
    exp, scenario = experiment(tmp_path)
    form = filled_form(cli, exp, scenario, tmp_path)
    validating = start(
        cli, "validate", scenario, exp / "runs" / "r0", "--no-progress", "--only", "slow"
    )
    wait_started(scenario, validating)
    ingest = cli("form", "ingest", scenario, exp, form, "--by", "ana")
    scenario.with_name("gate").unlink()
    validating.communicate(timeout=60)
    assert validating.returncode == 0
    assert ingest.returncode == 1, ingest.stdout + ingest.stderr
    assert "another trysquare validate is running on" in ingest.stderr
    assert str((exp / "runs" / "r0").resolve()) in ingest.stderr
    assert "Traceback" not in ingest.stderr
    # Refused before writing anything: the human's answers are ingested whole afterwards.
    again = cli("form", "ingest", scenario, exp, form, "--by", "ana")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "2 merged" in again.stdout


def test_validate_on_one_run_while_form_ingest_holds_the_experiment(
    cli_process, tmp_path: Path
) -> None:
    from trysquare.lock import experiment_lock

    exp, scenario = experiment(tmp_path)
    runs = discover([exp])[0].runs
    # The lock is held by this process, as `form ingest` would hold it: validate must be another.
    with experiment_lock(exp, runs, command="form ingest"):
        done = cli_process(
            "validate", scenario, exp / "runs" / "r1", "--no-progress", "--only", "slow"
        )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "another trysquare form ingest is running on" in done.stderr
    assert not (exp / "runs" / "r1" / "validation" / "slow.json").exists()


def test_same_run_through_a_symlinked_path_is_not_validated_twice(cli, tmp_path: Path) -> None:
    exp, scenario = experiment(tmp_path)
    alias = tmp_path / "alias"
    alias.symlink_to(exp / "runs" / "r1", target_is_directory=True)
    validating = start(
        cli, "validate", scenario, exp, "--no-progress", "--only", "slow", "--jobs", "1"
    )
    wait_started(scenario, validating)
    second = cli("validate", scenario, alias, "--no-progress", "--only", "slow")
    scenario.with_name("gate").unlink()
    validating.communicate(timeout=60)
    assert validating.returncode == 0
    assert second.returncode == 1, second.stdout + second.stderr
    assert "another trysquare validate is running on" in second.stderr
    assert str(exp.resolve()) in second.stderr


def test_symlinked_experiment_above_a_run_being_validated(cli, tmp_path: Path) -> None:
    exp, scenario = experiment(tmp_path)
    alias = tmp_path / "alias"
    alias.symlink_to(exp, target_is_directory=True)
    validating = start(
        cli, "validate", scenario, exp / "runs" / "r0", "--no-progress", "--only", "slow"
    )
    wait_started(scenario, validating)
    second = cli("validate", scenario, alias, "--no-progress", "--only", "slow")
    scenario.with_name("gate").unlink()
    validating.communicate(timeout=60)
    assert second.returncode == 1, second.stdout + second.stderr
    assert "another trysquare validate is running on" in second.stderr

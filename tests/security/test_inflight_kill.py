"""One run's code never ends the matrix: a validation that kills trysquare is named, then made
invalid, and every other run is scored.

Real ``trysquare validate`` processes, each built at test time: a validator (standing for
any code a validation runs) walks ``/proc`` up to its ``trysquare validate`` ancestor and
signals it. The first validate dies; the next names the run that was in flight, scores
the others first and then runs it alone, and dies again; the third records that run
invalid, saying why, and finishes the matrix.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from trysquare.testing import build_run

from tests.helpers import write_scenario, write_script

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare._inflight",)


KILLER = """
import json, os, signal, sys, time

context = json.load(open(sys.argv[1]))
if context["cell"] == "bad":
    pid = os.getppid()
    while pid > 1:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            words = handle.read().split(b"\\0")
        if any(w.endswith(b"trysquare") for w in words) and b"validate" in words:
            break
        with open(f"/proc/{pid}/stat") as handle:
            pid = int(handle.read().rsplit(")", 1)[1].split()[1])
    else:
        raise SystemExit("no trysquare validate above me")
    HOW
    end = time.monotonic() + 10
    while time.monotonic() < end:  # trysquare dies (or stops, killing me) meanwhile
        try:
            with open(f"/proc/{pid}/stat") as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
        except OSError:
            break
        time.sleep(0.05)
print(json.dumps({"metrics": {"ok": True}}))
"""

HOW = {
    "sigkill": "os.kill(pid, signal.SIGKILL)",
    "sigterm": "os.kill(pid, signal.SIGTERM)",
    "killpg": "os.killpg(os.getpgid(pid), signal.SIGKILL)",  # its whole process group
}
EXIT = {"sigkill": -signal.SIGKILL, "sigterm": 143, "killpg": -signal.SIGKILL}

SCENARIO = """
[[validation]]
name = "score"
mode = "script"
command = "score.py"
metrics = ["ok"]
"""


def lab(tmp_path: Path, how: str) -> tuple[Path, Path]:
    folder = tmp_path / "scenario"
    write_script(folder, "score.py", KILLER.replace("HOW", HOW[how]))
    scenario = write_scenario(folder, SCENARIO)
    root = tmp_path / "exp"
    base = {"a.py": "a = 1\n"}
    for run_id, cell, repetition in (("ok-1", "ok", 1), ("bad-1", "bad", 1), ("ok-2", "ok", 2)):
        build_run(
            root / "runs" / run_id,
            base=base,
            changes={"a.py": "a = 2\n"},
            cell=cell,
            repetition=repetition,
        )
    return scenario, root


def validate(cli_process, scenario: Path, root: Path) -> subprocess.CompletedProcess[str]:
    """A real ``trysquare validate`` in a session of its own (its process group is its own:
    a validator killing that group kills trysquare, never the test)."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "trysquare",
            "validate",
            str(scenario),
            str(root),
            "--no-progress",
            "--jobs",
            "2",
        ],
        env=cli_process.env,
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
        check=False,
    )


def rows(root: Path) -> dict[str, dict[str, Any]]:
    found = json.loads((root / "measures.json").read_text(encoding="utf-8"))
    return {row["id"]: row for row in found}


def result(root: Path, run_id: str) -> dict[str, Any] | None:
    path = root / "runs" / run_id / "validation" / "score.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


@pytest.mark.parametrize("how", ["sigkill", "sigterm", "killpg"])
def test_a_validation_that_ends_trysquare_twice_is_invalid_and_the_matrix_finishes(
    tmp_path: Path, cli_process, how: str
) -> None:
    scenario, root = lab(tmp_path, how)

    first = validate(cli_process, scenario, root)
    assert first.returncode == EXIT[how], first.stdout + first.stderr
    assert result(root, "bad-1") is None

    second = validate(cli_process, scenario, root)
    assert second.returncode == EXIT[how], second.stdout + second.stderr
    said = second.stdout + second.stderr
    assert "run 'bad-1'" in said and "was running when trysquare last ended" in said
    # What was not in flight the first time is scored before the suspects run, each alone
    # (one ok run, in flight beside bad-1 the first time, may be one of them).
    suspects = {r for r in ("ok-1", "ok-2") if f"run '{r}'" in said}
    assert len(suspects) <= 1, said
    for run_id in {"ok-1", "ok-2"} - suspects:
        document = result(root, run_id)
        assert document is not None and document["metrics"] == {"ok": True}, said

    third = validate(cli_process, scenario, root)
    assert third.returncode == 1, third.stdout + third.stderr
    assert "run 'bad-1'" in third.stdout and "marked invalid, not retried" in third.stdout
    found = rows(root)
    assert found["ok-1"]["state"] == found["ok-2"]["state"] == "valid"
    assert found["bad-1"]["state"] == "invalid"
    [error] = found["bad-1"]["errors"]
    assert "trysquare ended 2 times while validator 'score' ran" in error["error"]
    assert "Traceback" not in third.stdout + third.stderr

    # Not retried for ever: the next validate reuses the invalid result and ends well.
    fourth = validate(cli_process, scenario, root)
    assert fourth.returncode == 1 and "3 results unchanged (reused)" in fourth.stdout, fourth.stdout


def test_a_planted_marker_is_named_and_not_believed(tmp_path: Path, cli) -> None:
    """The experiment folder may be a run folder (the agent's): a marker it did not sign
    (here: one claiming a good run ended trysquare twice) is named, removed, ignored."""
    scenario, root = lab(tmp_path, "sigkill")
    folder = root / ".trysquare" / "inflight"
    folder.mkdir(parents=True)
    (folder / ("0" * 32 + ".json")).write_text(
        json.dumps(
            {
                "kind": "trysquare validation in flight",
                "run": "runs/ok-1",
                "id": "ok-1",
                "validator": "score",
                "ended": 2,
                "digest": "x",
                "context_digest": None,
                "mac": "0" * 64,
            }
        ),
        encoding="utf-8",
    )
    done = cli("validate", scenario, root, "--no-progress", "--only", "score", "--run", "ok-*")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "was not written by trysquare here: removed, not believed" in done.stdout
    assert rows(root)["ok-1"]["state"] == "valid"
    assert not list(folder.iterdir())

"""``trysquare._inflight``: a validation is marked in flight only while it runs.

A finished ``validate``, and one stopped by ``-x`` (which ends validators itself), leave no
marker behind: only trysquare ending during a validation does (tests/security/
test_inflight_kill.py shows what the next validate makes of one).
"""

from __future__ import annotations

from pathlib import Path

from trysquare._inflight import FOLDER
from trysquare.testing import build_run

from tests.helpers import write_scenario, write_script

SCORE = """
import json, sys
context = json.load(open(sys.argv[1]))
if context["cell"] == "bad":
    raise SystemExit(3)
print(json.dumps({"metrics": {"ok": True}}))
"""

SCENARIO = """
[[validation]]
name = "score"
mode = "script"
command = "score.py"
metrics = ["ok"]
"""


def matrix(tmp_path: Path) -> tuple[Path, Path]:
    folder = tmp_path / "scenario"
    write_script(folder, "score.py", SCORE)
    scenario = write_scenario(folder, SCENARIO)
    root = tmp_path / "exp"
    runs = (("a", "ok"), ("b", "bad"), ("c", "ok"), ("d", "ok"))
    for repetition, (run_id, cell) in enumerate(runs):
        build_run(
            root / "runs" / run_id,
            base={"a.py": "a = 1\n"},
            changes={"a.py": "a = 2\n"},
            cell=cell,
            repetition=repetition,
        )
    return scenario, root


def markers(root: Path) -> list[Path]:
    folder = root / FOLDER
    return sorted(folder.iterdir()) if folder.exists() else []


def test_a_finished_validate_leaves_no_marker(tmp_path: Path, cli) -> None:
    scenario, root = matrix(tmp_path)
    done = cli("validate", scenario, root, "--no-progress", "--jobs", "2")
    assert done.returncode == 1, done.stdout + done.stderr  # run b is invalid, the matrix went on
    assert markers(root) == []
    assert "trysquare last ended" not in done.stdout


def test_a_validate_stopped_by_exitfirst_leaves_no_marker(tmp_path: Path, cli) -> None:
    scenario, root = matrix(tmp_path)
    done = cli("validate", scenario, root, "--no-progress", "--jobs", "2", "-x")
    assert done.returncode == 1, done.stdout + done.stderr
    assert markers(root) == []
    again = cli("validate", scenario, root, "--no-progress")
    assert "trysquare last ended" not in again.stdout


def test_a_run_whose_validator_exited_is_in_flight_no_more_while_its_result_is_recorded(
    tmp_path: Path, cli, monkeypatch
) -> None:
    """trysquare ending while a result is being recorded (the next validator already
    started) must not name that run as the one that ended it: no code of it runs then."""
    import json

    from trysquare import execute

    scenario, root = matrix(tmp_path)
    real_record = execute.record_task
    named_while_recorded: list[str] = []
    recorded: list[str] = []

    def record_task(evaluated):
        run_id = evaluated.task.run.id
        for marker in markers(root):
            text = marker.read_text(encoding="utf-8")
            if text and json.loads(text)["id"] == run_id:
                named_while_recorded.append(run_id)
        recorded.append(run_id)
        return real_record(evaluated)

    monkeypatch.setattr(execute, "record_task", record_task)
    done = cli("validate", scenario, root, "--no-progress", "--jobs", "2")
    assert done.returncode == 1, done.stdout + done.stderr
    assert sorted(recorded) == ["a", "b", "c", "d"]
    assert named_while_recorded == []
    assert markers(root) == []


SEES_MARKERS = """
import json, sys
from pathlib import Path
root = Path(sys.argv[1]).parents[4]  # runs/<id>/validation/score/context.json
named = []
for slot in sorted((root / ".trysquare" / "inflight").iterdir()):
    text = slot.read_text(encoding="utf-8")
    if text:
        named.append(json.loads(text)["id"])
sys.stderr.write(json.dumps(named))
print(json.dumps({"metrics": {"ok": True}}))
"""


def test_a_marker_is_made_as_its_task_is_built_and_written_only_as_its_validator_starts(
    tmp_path: Path, cli, monkeypatch
) -> None:
    """Encoding and signing a marker is done by the thread building the tasks ahead (not on
    the way from one validator's exit to the next one's start); it is written only as its own
    validator is about to start, so each validator sees its own run in flight and no other."""
    import json
    import os
    import threading

    from trysquare import _inflight

    scenario, root = matrix(tmp_path)
    write_script(tmp_path / "scenario", "score.py", SEES_MARKERS)
    made_by: list[tuple[str, str]] = []
    real_prepare = _inflight.InFlight.prepare

    def prepare(self, task):  # type: ignore[no-untyped-def]
        made_by.append((task.run.id, threading.current_thread().name))
        return real_prepare(self, task)

    monkeypatch.setattr(_inflight.InFlight, "prepare", prepare)
    # Tasks are built ahead where a core is left beside the one validator at a time.
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    signed: list[bool] = []
    real_marker = _inflight.InFlight._marker_bytes

    def marker_bytes(self, task, *, ended):  # type: ignore[no-untyped-def]
        signed.append(threading.current_thread().name == "trysquare-task-builder")
        return real_marker(self, task, ended=ended)

    monkeypatch.setattr(_inflight.InFlight, "_marker_bytes", marker_bytes)
    done = cli("validate", scenario, root, "--no-progress", "--jobs", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(made_by) == [(run, "trysquare-task-builder") for run in "abcd"]
    assert signed == [True] * 4  # none made again as its task was taken
    for run in "abcd":
        stderr = root / "runs" / run / "validation" / "score.stderr"
        assert json.loads(stderr.read_text(encoding="utf-8")) == [run]
    assert markers(root) == []

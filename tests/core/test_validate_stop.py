"""Each ``validate`` owns its stop state: ``-x`` or a full disk in one stops no other."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

from trysquare._stop import StopState
from trysquare.runner import ValidateOptions, validate
from trysquare.runs import discover
from trysquare.scenario import load_scenario
from trysquare.testing import build_matrix

from tests.helpers import write_scenario, write_script

SCORE = """\
import json, sys
context = json.load(open(sys.argv[1]))
if context["cell"] == "broken":
    sys.exit("this cell's validator fails on purpose")
print(json.dumps({"metrics": {"changed": bool(context["touched"])}, "reasons": {}}))
"""


def _experiment(tmp_path: Path, name: str, runs: list[tuple[str, str, int]]) -> tuple[Path, Path]:
    folder = tmp_path / f"{name}-scenario"
    write_script(folder, "score.py", SCORE)
    scenario = write_scenario(
        folder,
        """
        [[validation]]
        name = "score"
        mode = "script"
        command = "score.py"
        metrics = ["changed"]
    """,
    )
    experiment = tmp_path / name
    build_matrix(
        experiment, runs, base={"counter.py": "count = 1\n"}, changes={"counter.py": "count = 0\n"}
    )
    return scenario, experiment


def test_exitfirst_in_one_validate_stops_nothing_of_another_running_beside_it(
    tmp_path: Path,
) -> None:
    stopped_scenario, stopped_experiment = _experiment(
        tmp_path, "stopped", [("b1", "broken", 1), ("b2", "broken", 2), ("b3", "broken", 3)]
    )
    other_scenario, other_experiment = _experiment(
        tmp_path, "other", [("p1", "plain", 1), ("p2", "plain", 2), ("p3", "plain", 3)]
    )
    other_waiting = threading.Event()
    stopped_done = threading.Event()

    def other_should_stop() -> bool:
        # The other validate is under way (its options read, its state set up) and waits,
        # between two tasks, until the first one has stopped at its first invalid result.
        other_waiting.set()
        stopped_done.wait(timeout=120)
        return False

    found: dict[str, object] = {}

    def run_other() -> None:
        found["summary"] = validate(
            load_scenario(other_scenario), discover([other_experiment]),
            ValidateOptions(progress=False, jobs=1), out=io.StringIO(), should_stop=other_should_stop,
        )  # fmt: skip

    other = threading.Thread(target=run_other)
    other.start()
    try:
        assert other_waiting.wait(timeout=120)
        time.sleep(1)  # its planning, if it runs beside its first task, is over
        stopped = validate(
            load_scenario(stopped_scenario), discover([stopped_experiment]),
            ValidateOptions(progress=False, jobs=1, exitfirst=True), out=io.StringIO(),
        )  # fmt: skip
    finally:
        stopped_done.set()
        other.join(timeout=300)
    assert stopped.executed == 1 and stopped.not_started == 2
    summary = found["summary"]
    assert summary.executed == 3 and summary.not_started == 0  # type: ignore[attr-defined]
    assert summary.exit_code == 0  # type: ignore[attr-defined]


def test_a_full_disk_in_one_stop_state_is_not_seen_by_another() -> None:
    first, second = StopState(), StopState()
    first.note_write_failure(OSError(28, "No space left on device"))
    assert first.disk_full and first.should_stop() and not first.complete
    assert not second.disk_full and not second.should_stop() and second.complete
    assert first.note_first_invalid() and not first.note_first_invalid()
    assert not second.first_invalid

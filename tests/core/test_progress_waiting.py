"""Lines of tasks finished while planning still runs: kept only when they will be shown."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from trysquare.options import ValidateOptions
from trysquare.runner import _ProgressLines


def _result(folder: Path, index: int, state: str) -> Any:
    run = SimpleNamespace(id=f"r{index}", cell="c0", repetition=index, dir=folder)
    outcome = SimpleNamespace(
        state=state, error="it broke", metrics={}, reasons={}, kept_after=None
    )
    task = SimpleNamespace(run=run, validation=SimpleNamespace(name="script"))
    return SimpleNamespace(task=task, outcome=outcome, document={})


def _shown(tmp_path: Path, *, quiet: bool) -> tuple[str, int]:
    # Planning still runs: no line is said until it ends (then 5 tasks in all).
    planned = type("Tasks", (), {"planned": False, "bounded": False, "__len__": lambda self: 5})()
    out = io.StringIO()
    options = ValidateOptions(quiet=quiet, progress=False)
    lines = _ProgressLines(planned, options, out)  # type: ignore[arg-type]
    states = ["valid", "valid", "invalid", "valid", "valid"]
    for index, state in enumerate(states):
        lines.advance(_result(tmp_path, index, state))
    kept = len({id(pair) for pair in lines._waiting})
    lines.close_late()
    return out.getvalue(), kept


def test_under_q_only_an_invalid_tasks_line_waits_and_its_count_is_kept(tmp_path: Path) -> None:
    said, kept = _shown(tmp_path, quiet=True)
    assert said == "[3/5] r2 (c0 #2) script: invalid: it broke\n"
    assert kept == 2  # the invalid line, and one pair shared by every valid task


def test_without_q_every_line_waits_and_is_said_in_order(tmp_path: Path) -> None:
    said, kept = _shown(tmp_path, quiet=False)
    assert said.splitlines() == [
        "[1/5] r0 (c0 #0) script: valid",
        "[2/5] r1 (c0 #1) script: valid",
        "[3/5] r2 (c0 #2) script: invalid: it broke",
        "[4/5] r3 (c0 #3) script: valid",
        "[5/5] r4 (c0 #4) script: valid",
    ]
    assert kept == 5


def test_where_planning_is_held_back_lines_are_said_at_once_with_the_tasks_known_so_far(
    tmp_path: Path,
) -> None:
    # A matrix larger than planning's lead: its end comes only near the last tasks, so no
    # line waits for it (nothing is kept), and the count says the total is not final yet.
    class Tasks:
        planned = False
        bounded = True
        planned_so_far = 3

        def __len__(self) -> int:
            return 5

    tasks = Tasks()
    out = io.StringIO()
    lines = _ProgressLines(tasks, ValidateOptions(progress=False), out)  # type: ignore[arg-type]
    for index in range(5):
        if index == 2:
            tasks.planned_so_far = 4
        if index == 4:
            tasks.planned = True  # planning ended before the last task: the whole count
        lines.advance(_result(tmp_path, index, "valid"))
        assert not lines._waiting
    lines.close()
    said = [line.split()[0] for line in out.getvalue().splitlines()]
    assert said == ["[1/3+]", "[2/3+]", "[3/4+]", "[4/4+]", "[5/5]"]

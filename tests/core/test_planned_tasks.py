"""The planned tasks of a validate: every run's plan kept in a few numbers, made again when read."""

from __future__ import annotations

import gc
import pathlib
import tracemalloc
from pathlib import Path

from trysquare import _spill
from trysquare._planned_tasks import PlannedTasks
from trysquare.options import ValidateOptions
from trysquare.planning import RunPlan
from trysquare.runs import Run
from trysquare.scenario import load_scenario

from tests.helpers import replay_runs


def _scenario(root: Path) -> Path:
    scenario = root / "scenario.toml"
    if not scenario.exists():
        (root / "check.sh").write_text("#!/bin/sh\n", encoding="utf-8")
        (root / "check.sh").chmod(0o755)
        scenario.write_text(
            '[[validation]]\nmode = "script"\ncommand = "check.sh"\nmetrics = ["ok"]\n',
            encoding="utf-8",
        )
    return scenario


def _planned(root: Path, runs: list[Run], spill: _spill.Spill) -> PlannedTasks:
    # No validator chosen: every run still gets its plan (nothing to run), as a replay whose
    # results are all current does.
    return PlannedTasks(
        load_scenario(_scenario(root)), runs, (), ValidateOptions(replay=True, jobs=1), spill,
        overlapped=False,
    )  # fmt: skip


def test_each_plan_reads_back_as_planned_in_run_order(tmp_path: Path) -> None:
    runs = replay_runs(tmp_path, 30)
    with _spill.Spill() as spill:
        tasks = _planned(tmp_path, runs, spill)
        plans = tasks.plans
        assert len(plans) == 30
        assert [plan.run for plan in plans] == runs
        assert plans[-1] == plans[29]
        assert [plan.run for plan in plans[2:5]] == runs[2:5]
        assert all(isinstance(plan, RunPlan) and plan.size == 0 for plan in plans)
        assert len({plan.kept for plan in plans}) == 30  # each its own spill record
        assert list(plans.unsigned()) == []
        assert len(tasks) == 0


def test_the_plans_hold_no_object_per_run(tmp_path: Path) -> None:
    runs = replay_runs(tmp_path, 2000)
    with _spill.Spill() as spill:
        _planned(tmp_path, runs[:10], spill)  # the modules' first use, unmeasured
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot()
            tasks = _planned(tmp_path, runs, spill)
            gc.collect()
            after = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
        assert len(tasks.plans) == len(runs)
    # Planning builds paths, whose parts pathlib interns, and a run's id is not kept interned:
    # the interpreter's table of interned strings is rebuilt when it will (~1-2 MiB), in this
    # measurement or another. That table is not the plans'.
    not_interning = [tracemalloc.Filter(False, pathlib.__file__)]
    grown = after.filter_traces(not_interning).compare_to(
        before.filter_traces(not_interning), "filename"
    )
    per_run = sum(stat.size_diff for stat in grown) / len(runs)
    assert per_run < 110, f"{per_run:.0f} bytes per run held by the planned tasks"

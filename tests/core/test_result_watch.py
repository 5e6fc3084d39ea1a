"""The result ledger of a validate: each run found by its folder, and what it holds per run."""

from __future__ import annotations

import gc
import pathlib
import pickle
import tracemalloc
from pathlib import Path

import attrs
from trysquare.result_guard import ResultWatch

from tests.helpers import replay_runs


def test_each_run_is_found_by_its_folder_even_as_a_copy_handed_back(tmp_path: Path) -> None:
    runs = replay_runs(tmp_path, 50)
    watch = ResultWatch(runs, ["a", "b"])
    for index, run in enumerate(runs):
        # A worker hands back a copy of the run (pickled), never the object it was given.
        copy = pickle.loads(pickle.dumps(run))
        watch.ran(copy, "b" if index % 2 else "a")
    for index, run in enumerate(runs):
        assert watch.ran_names(run) == (["b"] if index % 2 else ["a"])
    elsewhere = attrs.evolve(runs[0], dir=tmp_path / "not-watched")
    watch.ran(elsewhere, "a")
    assert watch.ran_names(elsewhere) == []
    assert watch.forged() == []


def test_the_ledger_holds_no_table_entry_per_run(tmp_path: Path) -> None:
    runs = replay_runs(tmp_path, 2000)
    ResultWatch(runs, ["a"])  # once unmeasured: the modules' first use
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        watch = ResultWatch(runs, ["a"])
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    # Each path it builds interns its parts (pathlib), and a run's id is not kept interned: the
    # interpreter's table of interned strings fills with ids come and gone and is rebuilt
    # (~1-2 MiB) when it will, in this measurement or another. That table is not the ledger's.
    not_interning = [tracemalloc.Filter(False, pathlib.__file__)]
    grown = after.filter_traces(not_interning).compare_to(
        before.filter_traces(not_interning), "filename"
    )
    assert watch.ran_names(runs[-1]) == []
    # Its arrays take 66 bytes a run and validator, and 8 a run to find each (76 seen); a
    # dict from each run's folder to its place costs about 40 bytes more a run (118 seen).
    per_run = sum(stat.size_diff for stat in grown) / len(runs)
    assert per_run < 95, f"{per_run:.0f} bytes per run held by the ledger"

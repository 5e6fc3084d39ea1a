"""The result ledger of a validate: each run found by its folder, and what it holds per run."""

from __future__ import annotations

import gc
import pickle
import tracemalloc
from pathlib import Path

import attrs
from trysquare.result_guard import ResultWatch
from trysquare.runs import Run, discover


def _runs(root: Path, count: int) -> list[Run]:
    """``count`` run folders, loaded as ``--replay`` loads them (no clone needed)."""
    experiment = root / f"exp{count}"
    for index in range(count):
        folder = experiment / "runs" / f"r{index:06d}"
        folder.mkdir(parents=True)
        (folder / "run.toml").write_text(
            f'cell = "c{index % 4}"\nrepetition = {index}\nrepo = "repo"\nprompt = "prompt.txt"\n'
        )
    (found,) = discover([experiment], replay=True)
    return list(found.runs)


def test_each_run_is_found_by_its_folder_even_as_a_copy_handed_back(tmp_path: Path) -> None:
    runs = _runs(tmp_path, 50)
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
    runs = _runs(tmp_path, 2000)
    # The paths it builds intern their parts, and the interpreter's table of interned strings
    # grows by a megabyte or two when it will (its mortal entries come and go): the least of
    # three measures is the ledger's own, a table per run would show in all three.
    held: list[int] = []
    for _ in range(3):
        gc.collect()
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            watch = ResultWatch(runs, ["a"])
            gc.collect()
            after, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        held.append(after - before)
        del watch
    watch = ResultWatch(runs, ["a"])
    assert watch.ran_names(runs[-1]) == []
    # Its arrays take 66 bytes a run and validator, and 8 a run to find each (76 seen); a
    # dict from each run's folder to its place costs about 40 bytes more a run (118 seen).
    per_run = min(held) / len(runs)
    assert per_run < 95, f"{per_run:.0f} bytes per run held by the ledger"

"""Run records: what a loaded run costs in memory while a command holds every run."""

from __future__ import annotations

import gc
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import attrs
import pytest
from trysquare import results
from trysquare._measure_rows import PlainRows
from trysquare.runs import discover
from trysquare.scenario import load_scenario
from trysquare.testing import build_run

from tests.helpers import replay_experiment, write_scenario, write_script


def _held_per_run(experiment: Path, count: int) -> float:
    """Bytes still allocated per run once ``discover`` returned (tracemalloc, after a
    collection): what the experiment holds, discovery's own lists and sets gone."""
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        (found,) = discover([experiment], replay=True)
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(found.runs) == count
    return (after - before) / count


def test_a_loaded_run_costs_its_record_and_its_folder_and_no_more_at_2000_runs_than_at_200(
    tmp_path: Path,
) -> None:
    # A run's record, its folder's text and its id take a little under 500 bytes; a path
    # object per run (its folder, clone or prompt kept as one: about 300 bytes) goes over the
    # bound.
    small = _held_per_run(replay_experiment(tmp_path, 200), 200)
    big = _held_per_run(replay_experiment(tmp_path, 2000), 2000)
    assert big < 520, f"{big:.0f} bytes per run held at 2000 runs"
    # Flat, within what a dict or cache growing a size step apart costs (seen at 3.5%).
    assert big <= small * 1.10, f"{big:.0f} bytes per run at 2000 runs, {small:.0f} at 200"


def test_a_run_keeps_a_path_beside_its_folder_as_a_name_and_resolves_it_there(
    tmp_path: Path,
) -> None:
    (experiment,) = discover([replay_experiment(tmp_path, 1)], replay=True)
    (run,) = experiment.runs
    assert run.repo == run.dir / "repo" and run.prompt == run.dir / "prompt.txt"
    moved = attrs.evolve(run, dir=tmp_path / "scratch")
    assert (moved.repo, moved.prompt) == (run.repo, run.prompt)
    assert attrs.evolve(run, id=run.id) == run


def _report_runs(tmp_path: Path, count: int) -> tuple[Any, list[Any]]:
    """A scenario of two validators and ``count`` runs (one run's record, each its own id)."""
    folder = tmp_path / "scn"
    write_script(folder, "score.py", "print('{}')\n")
    scenario = load_scenario(
        write_scenario(
            folder,
            """
        [[validation]]
        name = "score"
        mode = "script"
        command = "score.py"
        metrics = ["changed", "size"]

        [[validation]]
        name = "other"
        mode = "script"
        command = "score.py"
        metrics = ["clear"]
    """,
        )
    )
    build_run(tmp_path / "exp" / "runs" / "r1", base={"a.py": "a\n"})
    (run,) = discover([tmp_path / "exp"], replay=True)[0].runs
    runs = [attrs.evolve(run, id=f"r{i:06d}", repetition=i) for i in range(count)]
    return scenario, runs


def _results(run: Any, name: str) -> dict[str, Any]:
    """Each run's recorded result, without a disk: numbers its own, booleans shared."""
    if name == "score":
        return {"metrics": {"changed": True, "size": run.repetition + 0.5}, "reasons": {}}
    if run.repetition % 10 == 0:
        return {"metrics": {"clear": None}, "reasons": {"clear": "could not tell"}}
    return {"metrics": {"clear": run.repetition % 3 == 0}}


def test_a_report_holds_a_run_s_row_in_under_420_bytes_and_writes_the_same_measures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario, runs = _report_runs(tmp_path, 2000)
    monkeypatch.setattr(results, "load_result", _results)

    def held_per_run(build: Any) -> tuple[float, list[Any]]:
        gc.collect()
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            rows = build(scenario, runs, {})
            gc.collect()
            after, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        return (after - before) / len(runs), rows

    plain_cost, plain_rows = held_per_run(results.build_measures)
    held_cost, held_rows = held_per_run(results.hold_measures)
    # A row built as a dict literal (eight keys, its metrics dict, three empty containers)
    # took about 680 bytes; held, its keys and empty containers are shared (~390 here, its
    # metrics dict of a number its own; ~170 where they are booleans, shared too).
    assert held_cost < 420, f"{held_cost:.0f} bytes per held row ({plain_cost:.0f} as dicts)"
    assert held_rows == plain_rows  # the same rows, read as mappings
    # What a report format plugin is handed: copies, so changing one changes no other row.
    handed = PlainRows(held_rows)
    assert list(handed) == plain_rows and handed[-2:] == plain_rows[-2:]
    first = handed[0]
    first["pending"].append("x")
    first["metrics"]["changed"] = False
    first["reasons"]["clear"] = "changed"
    assert held_rows == plain_rows
    assert results.write_measures(tmp_path / "a", held_rows).read_bytes() == (
        results.write_measures(tmp_path / "b", plain_rows).read_bytes()
    )


def test_discovery_holds_no_more_than_its_runs_and_one_text_a_run_at_its_peak(
    tmp_path: Path,
) -> None:
    experiment = replay_experiment(tmp_path, 2000)
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        (found,) = discover([experiment], replay=True)
        gc.collect()
        after, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Each run's real path was kept beside the path found (the same text, ~90 bytes), the run
    # files were sorted by lists of their parts, and every path found was held while the runs
    # loaded: ~415 bytes a run over what the runs hold at the end (~60 left: the id table).
    over = (peak - after) / len(found.runs)
    assert over < 120, f"discovery's peak is {over:.0f} bytes a run over what it returns"


def test_a_run_id_taken_from_its_folder_is_not_kept_interned(tmp_path: Path) -> None:
    # pathlib interns each part of a path; a run's id kept as its folder's part would hold an
    # entry a run in the interpreter's table of interned strings (a table that only grows
    # while they live: ~7 MiB at 100,000 runs).
    (found,) = discover([replay_experiment(tmp_path, 3)], replay=True)
    for run in found.runs:
        fresh = "".join(list(run.id))  # an equal text that is a new object
        assert sys.intern(fresh) is not run.id, f"{run.id} is interned"


def _scenario(folder: Path) -> Any:
    write_script(folder, "v.py", "print('{}')\n")
    text = '[[validation]]\nmode = "script"\ncommand = "v.py"\nmetrics = ["ok"]\n'
    return load_scenario(write_scenario(folder, text))


def _measures_peak_per_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int) -> float:
    """Bytes a run allocated at most while the measures rows are put in order (each row a
    shared stand-in: only the ordering is measured)."""
    scenario = _scenario(tmp_path)
    (found,) = discover([replay_experiment(tmp_path, count)], replay=True)
    stand_in: dict[str, Any] = {}
    monkeypatch.setattr(results, "_read_row", lambda *_: stand_in)
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        rows = results.iter_measures(scenario, found.runs)
        assert next(rows) is stand_in  # ordered before the first row
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return (peak - before) / count


def test_measures_rows_are_put_in_order_without_a_key_object_per_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A list of the runs and one of the keys of one pass: about 16 bytes a run (22 seen). One
    # sort on (cell, repetition, id) tuples made a tuple and an index object a run, all alive
    # at once (about 125 bytes a run), while a report holds every run.
    per_run = _measures_peak_per_run(tmp_path, monkeypatch, 3000)
    assert per_run < 40, f"{per_run:.0f} bytes per run at the peak of putting rows in order"


def test_measures_rows_keep_the_order_of_one_sort_on_cell_repetition_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = _scenario(tmp_path)
    experiment = tmp_path / "mixed"
    # Ties on cell and repetition, ids out of order, and the same (cell, repetition) twice.
    plan = [("b3", "b", 1), ("a9", "a", 2), ("a1", "a", 2), ("b0", "a", 10), ("x", "a", 1),
            ("c", "b", 0), ("a0", "b", 1), ("d", "a", 2)]  # fmt: skip
    for run_id, cell, repetition in plan:
        folder = experiment / "runs" / f"f-{run_id}"
        folder.mkdir(parents=True)
        (folder / "run.toml").write_text(
            f'id = "{run_id}"\ncell = "{cell}"\nrepetition = {repetition}\n'
            'repo = "repo"\nprompt = "prompt.txt"\n'
        )
    # Unusable folders that name a cell come as rows of their own, sorted among the runs.
    for name, cell in (("broken-b", "b"), ("broken-a", "a")):
        folder = experiment / "runs" / name
        folder.mkdir(parents=True)
        (folder / "run.toml").write_text(f'cell = "{cell}"\nrepetition = -1\nprompt = "p"\n')
    (found,) = discover([experiment], replay=True)
    assert len(found.errors) == 2
    monkeypatch.setattr(results, "_read_row", lambda _s, run, _d, _h: {"id": run.id})
    got = [row["id"] for row in results.iter_measures(scenario, found.runs, unusable=found.errors)]
    extra = [row for row in map(results.unusable_row, found.errors) if row is not None]
    keyed = [(run.cell, run.repetition, run.id) for run in found.runs]
    keyed += [(row["cell"], -1, row["id"]) for row in extra]  # no repetition: -1, as before
    assert got == [key[2] for key in sorted(keyed, key=lambda key: key)]
    assert got[:2] == ["broken-a", "x"]

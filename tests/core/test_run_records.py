"""Run records: what a loaded run costs in memory while a command holds every run."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import attrs
from trysquare.runs import discover


def _experiment(root: Path, count: int) -> Path:
    """``count`` run folders (no clone: loaded as ``--replay`` loads them)."""
    experiment = root / f"exp{count}"
    for index in range(count):
        folder = experiment / "runs" / f"r{index:06d}"
        folder.mkdir(parents=True)
        (folder / "run.toml").write_text(
            f'cell = "c{index % 4}"\nrepetition = {index}\nrepo = "repo"\nprompt = "prompt.txt"\n'
        )
    return experiment


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
    small = _held_per_run(_experiment(tmp_path, 200), 200)
    big = _held_per_run(_experiment(tmp_path, 2000), 2000)
    assert big < 520, f"{big:.0f} bytes per run held at 2000 runs"
    # Flat, within what a dict or cache growing a size step apart costs (seen at 3.5%).
    assert big <= small * 1.10, f"{big:.0f} bytes per run at 2000 runs, {small:.0f} at 200"


def test_a_run_keeps_a_path_beside_its_folder_as_a_name_and_resolves_it_there(
    tmp_path: Path,
) -> None:
    (experiment,) = discover([_experiment(tmp_path, 1)], replay=True)
    (run,) = experiment.runs
    assert run.repo == run.dir / "repo" and run.prompt == run.dir / "prompt.txt"
    moved = attrs.evolve(run, dir=tmp_path / "scratch")
    assert (moved.repo, moved.prompt) == (run.repo, run.prompt)
    assert attrs.evolve(run, id=run.id) == run


def test_discovery_holds_no_more_than_its_runs_and_one_text_a_run_at_its_peak(
    tmp_path: Path,
) -> None:
    experiment = _experiment(tmp_path, 2000)
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        (found,) = discover([experiment], replay=True)
        gc.collect()
        after, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Each run's real path was kept beside the path found (the same text, ~90 bytes) and the
    # run files were sorted by lists of their parts: ~415 bytes a run over what the runs hold
    # at the end (~270 left: the found paths, the set of them, the id table).
    over = (peak - after) / len(found.runs)
    assert over < 340, f"discovery's peak is {over:.0f} bytes a run over what it returns"

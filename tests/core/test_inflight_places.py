"""Where a run's in-flight marker lives: its own experiment's folder, found from its path."""

from __future__ import annotations

from pathlib import Path

from trysquare._inflight import InFlight
from trysquare.runs import discover


def _run(folder: Path, index: int) -> None:
    folder.mkdir(parents=True)
    (folder / "run.toml").write_text(
        f'cell = "c0"\nrepetition = {index}\nrepo = "repo"\nprompt = "prompt.txt"\n'
    )


def test_each_run_is_placed_in_the_experiment_that_found_it_nested_or_beside(
    tmp_path: Path,
) -> None:
    outer = tmp_path / "exp"
    inner = outer / "inner"
    beside = tmp_path / "exp2"  # its name starts with the other's: not inside it
    _run(outer / "r1", 1)
    _run(inner / "r2", 2)
    _run(inner / "deep" / "r3", 3)
    _run(beside / "r4", 4)
    _run(tmp_path / "alone", 5)  # an experiment that is one run folder
    # The inner folder named first holds its runs; the outer one, named after, the rest.
    experiments = discover([inner, outer, beside, tmp_path / "alone"], replay=True)
    flight = InFlight(experiments, ["script"])
    placed = {run.id: flight._where(run) for experiment in experiments for run in experiment.runs}
    assert placed == {
        "r1": (outer, "r1"),
        "r2": (inner, "r2"),
        "r3": (inner, "deep/r3"),
        "r4": (beside, "r4"),
        "alone": (tmp_path / "alone", "."),
    }
    for experiment in experiments:
        for run in experiment.runs:
            assert placed[run.id][0] == experiment.root

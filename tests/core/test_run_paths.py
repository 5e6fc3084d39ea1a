"""A run's paths are built from its text once while it is in hand, not at every ask
(its folder was asked for some 27 times a run by validate), and never kept for every run."""

from __future__ import annotations

from pathlib import Path

import pytest
from trysquare import run_records
from trysquare.run_records import Run

from tests.helpers import record_run


def _run(folder: str, repo: str = "repo") -> Run:
    return record_run(folder, repo=repo)


def test_a_runs_folder_and_clone_are_built_once_while_in_hand() -> None:
    run = _run("/x/runs/r1")
    assert run.dir is run.dir and run.dir == Path("/x/runs/r1")
    assert run.validation_dir is run.validation_dir
    assert run.validation_dir == Path("/x/runs/r1/validation")
    assert run.repo is run.repo and run.repo == Path("/x/runs/r1/repo")
    assert run.prompt == Path("/x/runs/r1/prompt.txt")
    # Another run's record of the same folder (a copy, an evolve) shares the path too.
    assert _run("/x/runs/r1").dir is run.dir


def test_the_paths_kept_are_bounded_whatever_the_number_of_runs() -> None:
    for index in range(3000):
        _ = _run(f"/x/runs/r{index}").dir
    assert run_records._path.cache_info().currsize <= 64


def test_a_path_read_is_not_built_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trysquare import _atomic

    given = tmp_path / "f.json"
    given.write_text("{}")
    handed: list[Path] = []
    real = _atomic._open_read_sized

    def seen(path: Path, root: Path | None) -> tuple[int, int]:
        handed.append(path)
        return real(path, root)

    monkeypatch.setattr(_atomic, "_open_read_sized", seen)
    assert _atomic.read_bytes(given, root=tmp_path) == b"{}"
    assert handed[0] is given

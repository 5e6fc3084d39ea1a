"""What finding and loading the runs costs a ``--replay``: no thread, one ``lstat`` a run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from trysquare import runs
from trysquare.errors import RunError
from trysquare.runs import discover

from tests.helpers import threads_started


def _run(folder: Path, index: int) -> None:
    folder.mkdir(parents=True)
    (folder / "run.toml").write_text(
        f'cell = "c{index % 2}"\nrepetition = {index}\nrepo = "repo"\nprompt = "prompt.txt"\n'
    )


def _experiment(root: Path, count: int) -> Path:
    for index in range(count):
        _run(root / "runs" / f"r{index:03d}", index)
    return root


def test_a_replay_loads_its_runs_in_the_calling_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    experiment = _experiment(tmp_path / "exp", 12)
    started = threads_started(monkeypatch)
    (found,) = discover([experiment], replay=True)
    assert [run.id for run in found.runs] == [f"r{index:03d}" for index in range(12)]
    assert started == []  # loading a replay's runs is the interpreter's work: no pool


def test_a_replay_finds_each_run_without_resolving_its_whole_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Deep below the root: resolving every run's path part by part costs one lstat a part.
    experiment = _experiment(tmp_path / "a" / "b" / "c" / "exp", 20)
    calls = [0]
    lstat = os.lstat

    def counted(path: object, *args: object, **kwargs: object) -> os.stat_result:
        calls[0] += 1
        return lstat(path, *args, **kwargs)  # type: ignore[arg-type]

    run_files = list(runs._run_files(experiment))
    monkeypatch.setattr(os, "lstat", counted)
    monkeypatch.setattr(runs, "_run_files", lambda root: iter(run_files))
    monkeypatch.setattr(runs, "load_run", lambda run_file, replay: RunError("not loaded"))
    discover([experiment], replay=True)
    monkeypatch.setattr(os, "lstat", lstat)
    # The root resolved (one lstat a part of its path, a few times over), then one a run
    # found: not one a part of each run's path.
    assert calls[0] <= 3 * len(experiment.parts) + 20


def test_the_real_path_of_a_run_file_is_the_one_realpath_gives(tmp_path: Path) -> None:
    real = tmp_path / "real"
    _experiment(real, 3)
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    elsewhere = tmp_path / "elsewhere"
    _run(elsewhere, 9)
    (real / "runs" / "r009").mkdir()
    (real / "runs" / "r009" / "run.toml").symlink_to(elsewhere / "run.toml")
    (real / "runs" / "into").symlink_to(elsewhere, target_is_directory=True)  # not walked
    for named in (real, tmp_path / "link", tmp_path / "link" / "runs" / ".." / "runs"):
        root = named.absolute()
        real_root = os.path.realpath(root)
        found = list(runs._run_files(root))
        assert len(found) == 4
        for run_file in found:
            assert runs._real_run_file(run_file, os.fspath(root), real_root) == (
                os.path.realpath(run_file)
            ), run_file


def test_a_run_reached_twice_through_links_is_loaded_once(tmp_path: Path) -> None:
    experiment = _experiment(tmp_path / "exp", 2)
    (tmp_path / "alias").symlink_to(experiment, target_is_directory=True)
    (extra,) = discover([tmp_path / "alias"], replay=True)
    assert len(extra.runs) == 2
    experiments = discover([experiment, tmp_path / "alias"], replay=True)
    assert sum(len(found.runs) for found in experiments) == 2


def test_a_replay_loads_a_run_without_resolving_its_whole_path_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Deep below the root: resolving a run's inputs part by part costs one lstat a part.
    experiment = _experiment(tmp_path / "a" / "b" / "c" / "d" / "e" / "exp", 20)
    calls = [0]
    lstat = os.lstat

    def counted(path: object, *args: object, **kwargs: object) -> os.stat_result:
        calls[0] += 1
        return lstat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "lstat", counted)
    (found,) = discover([experiment], replay=True)
    monkeypatch.setattr(os, "lstat", lstat)
    assert len(found.runs) == 20
    # The clone and the prompt: one lstat for each part of what run.toml names (and for
    # response.md and the lock), not one for each part of the path to the run.
    assert calls[0] <= 3 * len(experiment.parts) + 20 * 6


def test_a_run_found_by_discover_is_the_run_load_run_reads(tmp_path: Path) -> None:
    real = tmp_path / "real"
    _experiment(real, 2)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "clone").mkdir(parents=True)
    (elsewhere / "clone" / "prompt.txt").write_text("do it\n")
    tables = {
        "linked": 'repo = "repo"\nprompt = "p/prompt.txt"\n',
        "dotted": 'repo = "./repo/"\nprompt = "./prompt.txt"\n',
        "absolute": f'repo = "{elsewhere / "clone"}"\nprompt = "prompt.txt"\n',
        "upward": 'repo = "../r000/repo"\nprompt = "prompt.txt"\n',
    }
    for name, table in tables.items():
        folder = real / "runs" / name
        folder.mkdir()
        (folder / "run.toml").write_text(f'cell = "c0"\nrepetition = 7\n{table}')
    (real / "runs" / "r000" / "repo").mkdir()
    (real / "runs" / "linked" / "repo").symlink_to(elsewhere / "clone")
    # A prompt through a link into the (linked) clone: inside the run's clone, allowed.
    (real / "runs" / "linked" / "p").symlink_to(elsewhere / "clone", target_is_directory=True)
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    for named in (real, tmp_path / "link", tmp_path / "link" / "runs" / ".." / "runs"):
        (experiment,) = discover([named], replay=True)
        assert len(experiment.runs) == 6, experiment.errors
        for run in experiment.runs:
            alone = runs.load_run(run.dir / "run.toml", replay=True)
            assert (os.fspath(run.repo), os.fspath(run.prompt)) == (
                os.fspath(alone.repo),
                os.fspath(alone.prompt),
            ), run.id
            assert run == alone, run.id


def _git_runs(root: Path, count: int, *, packed: bool) -> Path:
    import subprocess

    from trysquare.testing import build_run

    for index in range(count):
        run = root / "runs" / f"g{index:02d}"
        build_run(run, base={"a.py": "a = 1\n"}, changes={"a.py": "a = 2\n"}, repetition=index)
        if packed:  # as a clone made by `git clone` holds its base: in a pack
            subprocess.run(["git", "-C", str(run / "repo"), "gc", "-q"], check=True)
    return root


@pytest.mark.parametrize("packed", [False, True], ids=["loose", "packed"])
def test_runs_are_loaded_in_the_calling_thread_until_one_asks_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, packed: bool
) -> None:
    """Bases read from the clones' files: no thread. Packed bases ask git, whose processes
    overlap in a pool."""
    from trysquare.git import running

    experiment = _git_runs(tmp_path / "exp", 6, packed=packed)
    asked = running.processes_started()
    started = threads_started(monkeypatch)
    (found,) = discover([experiment])
    assert [run.id for run in found.runs] == [f"g{index:02d}" for index in range(6)]
    assert not found.errors and all(run.base_commit for run in found.runs)
    assert (running.processes_started() > asked) is packed
    assert bool(started) is packed


def test_a_replay_looks_at_each_input_of_a_run_once_or_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prompt: its stat (what it is) and its entry (a link?); response.md: its entry alone
    (followed only when it is a link); nothing asked twice."""
    experiment = _experiment(tmp_path / "exp", 3)
    for folder in (experiment / "runs").iterdir():
        (folder / "prompt.txt").write_text("do it\n")
        (folder / "response.md").write_text("done\n")
    looked: list[str] = []
    stat, lstat = os.stat, os.lstat

    def counted(real):  # type: ignore[no-untyped-def]
        def look(path, *args, **kwargs):  # type: ignore[no-untyped-def]
            looked.append(os.path.basename(os.fspath(path)))
            return real(path, *args, **kwargs)

        return look

    monkeypatch.setattr(os, "stat", counted(stat))
    monkeypatch.setattr(os, "lstat", counted(lstat))
    (found,) = discover([experiment], replay=True)
    monkeypatch.setattr(os, "stat", stat)
    monkeypatch.setattr(os, "lstat", lstat)
    assert len(found.runs) == 3
    assert looked.count("prompt.txt") == 2 * 3
    assert looked.count("response.md") == 3

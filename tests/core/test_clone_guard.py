"""The clone check reads again only what was written since its recorded picture."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from trysquare import clone_guard
from trysquare import context as contexts
from trysquare.runs import load_run
from trysquare.testing import RunBuilder


def _run(tmp_path: Path):
    built = RunBuilder(tmp_path / "exp" / "runs" / "r1", cell="plain", repetition=1)
    built.base({"a.py": "a = 1\n", "b.py": "b = 1\n"})
    built.repo.write("a.py", "a = 2\n")
    built.finish()
    return load_run(built.path / "run.toml")


def test_an_untouched_clone_is_checked_without_hashing_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _run(tmp_path)
    first = clone_guard.picture_clone(run, contexts.gather_facts(run))  # records work.json
    assert first is not None and first.problem is None
    hashed: list[Path] = []
    real = clone_guard._hash_path
    monkeypatch.setattr(clone_guard, "_hash_path", lambda path: hashed.append(path) or real(path))
    again = clone_guard.picture_clone(run, None)  # as --replay does
    assert again is not None and again.problem is None
    assert hashed == []
    # A .git file written again with the same length is read again, and named.
    config = run.repo / ".git" / "config"
    text = config.read_text()
    assert "bare = false" in text
    config.write_text(text.replace("bare = false", "bare = fals0"))
    changed = clone_guard.picture_clone(run, None)
    assert config in hashed
    assert changed is not None and changed.problem is not None and ".git/config" in changed.problem


def test_a_touched_file_rewritten_is_hashed_and_named(tmp_path: Path) -> None:
    run = _run(tmp_path)
    clone_guard.picture_clone(run, contexts.gather_facts(run))
    (run.repo / "a.py").write_text("a = 3\n")  # same size, new content
    changed = clone_guard.picture_clone(run, None)
    assert changed is not None and changed.problem is not None and "a.py" in changed.problem


def test_a_skipped_folder_is_known_by_its_inode_whatever_path_names_it(tmp_path: Path) -> None:
    # An old layout keeps the run folder inside the clone: trysquare's writes there are not
    # the clone's, however the run folder's path was spelled (here through a symlink).
    clone = tmp_path / "clone"
    (clone / "runs" / "r1" / "validation").mkdir(parents=True)
    (clone / "a.py").write_text("a = 1\n")
    (clone / "runs" / "r1" / "validation" / "score.json").write_text("{}\n")
    (tmp_path / "link").symlink_to(clone)
    pictured = clone_guard.stat_picture(
        clone, [tmp_path / "link" / "runs" / "r1", tmp_path / "absent"]
    )
    assert set(pictured) == {"a.py", "runs"}
    assert set(clone_guard.stat_picture(clone)) == {
        "a.py",
        "runs",
        "runs/r1",
        "runs/r1/validation",
        "runs/r1/validation/score.json",
    }


def test_a_clone_is_pictured_once_before_and_once_after_however_many_validators_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    """The validators of one run share its picture: three validators on two runs walk each
    clone twice (planning, and the check once its last validator is back), not six times."""
    from tests.helpers import write_scenario, write_script

    for run_id in ("r1", "r2"):
        built = RunBuilder(
            tmp_path / "exp" / "runs" / run_id,
            cell="plain",
            repetition=int(run_id[1]),
            etalon_tag=None,
        )
        built.base({"a.py": "a = 1\n"})
        built.repo.write("a.py", "a = 2\n")
        built.finish()
    body = ""
    for name in ("one", "two", "three"):
        write_script(
            tmp_path / "scenario", f"{name}.py", f'print(\'{{"metrics": {{"{name}": 1}}}}\')\n'
        )
        body += f'[[validation]]\nmode = "script"\nname = "{name}"\ncommand = "{name}.py"\nmetrics = ["{name}"]\n'
    scenario = write_scenario(tmp_path / "scenario", body)
    walks: list[str] = []
    real = clone_guard.stat_picture
    monkeypatch.setattr(
        clone_guard,
        "stat_picture",
        lambda clone, skip=(), known=None, known_taken_ns=0: (
            walks.append(Path(clone).parent.name) or real(clone, skip, known, known_taken_ns)
        ),
    )
    done = cli("validate", scenario, tmp_path / "exp", "--no-progress", "--jobs", "2")
    assert done.returncode == 0, done.stderr
    assert sorted(walks) == ["r1", "r1", "r2", "r2"]


def _folders_listed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    listed: list[str] = []
    real = clone_guard.os.scandir

    def scandir(path):  # type: ignore[no-untyped-def]
        listed.append(str(path))
        return real(path)

    monkeypatch.setattr(clone_guard.os, "scandir", scandir)
    return listed


def test_a_walk_knowing_the_picture_before_lists_only_folders_a_name_came_to_or_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clone = tmp_path / "clone"
    (clone / "src" / "deep").mkdir(parents=True)
    (clone / "docs").mkdir()
    (clone / "src" / "deep" / "a.py").write_text("a = 1\n")
    (clone / "docs" / "guide.md").write_text("guide\n")
    # As on a kernel with fine-grained times: a folder changed before the walk counts as
    # settled at once (the one-second margin has its own test below).
    monkeypatch.setattr(clone_guard, "_SETTLED_NS", 0)
    taken = time.time_ns()
    before = clone_guard.stat_picture(clone)
    listed = _folders_listed(monkeypatch)
    assert clone_guard.stat_picture(clone, known=before, known_taken_ns=taken) == before
    assert listed == [str(clone)]  # the clone's own folder alone, every other one unchanged
    listed.clear()
    (clone / "src" / "deep" / "stray.py").write_text("stray\n")
    (clone / "docs" / "guide.md").write_text("guide, edited\n")
    after = clone_guard.stat_picture(clone, known=before, known_taken_ns=taken)
    assert str(clone / "src" / "deep") in listed and str(clone / "docs") not in listed
    assert after == clone_guard.stat_picture(clone)
    assert "src/deep/stray.py" in after and after["docs/guide.md"] != before["docs/guide.md"]


def test_a_folder_whose_names_are_not_plain_text_is_always_listed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    clone = tmp_path / "clone"
    (clone / "odd").mkdir(parents=True)
    (clone / "odd" / os.fsdecode(b"caf\xe9.py")).write_text("x\n")  # not UTF-8: an escaped key
    (clone / "odd" / "plain.py").write_text("x\n")
    monkeypatch.setattr(clone_guard, "_SETTLED_NS", 0)
    taken = time.time_ns()
    before = clone_guard.stat_picture(clone)
    listed = _folders_listed(monkeypatch)
    assert clone_guard.stat_picture(clone, known=before, known_taken_ns=taken) == before
    assert str(clone / "odd") in listed
    assert str(clone) in listed and len(listed) == 2  # the settled rule alone lists no more


def test_a_folder_changed_within_a_second_of_the_walk_is_listed_again_though_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before Linux 6.13 a change takes the clock's coarse tick: a folder changed just before
    # the walk could take a new name after it and keep the very same ctime. Its names are
    # never taken as known; they are listed again.
    clone = tmp_path / "clone"
    (clone / "src").mkdir(parents=True)
    (clone / "src" / "a.py").write_text("a = 1\n")
    taken = time.time_ns()
    before = clone_guard.stat_picture(clone)
    listed = _folders_listed(monkeypatch)
    assert clone_guard.stat_picture(clone, known=before, known_taken_ns=taken) == before
    assert sorted(listed) == sorted([str(clone), str(clone / "src")])
    listed.clear()
    # The same picture taken two seconds later: that folder has settled.
    later = taken + 2 * 10**9
    assert clone_guard.stat_picture(clone, known=before, known_taken_ns=later) == before
    assert listed == [str(clone)]

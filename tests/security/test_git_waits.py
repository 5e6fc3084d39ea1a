"""A clone that holds git for ever: a FIFO or a device where git opens a file.

No config is needed for that (the shadow repository does not help): git opens loose
objects, packs, commit-graphs, the alternates file and every ``.gitattributes`` on the
way to a path with a plain open(), which waits for a writer for ever on a FIFO. What can
be seen beforehand is refused by name; every git process has a deadline for the rest
(``TRYSQUARE_GIT_TIMEOUT``). Each case runs in a thread that must end: without the
guard it hangs, and the test fails on the join.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from trysquare import context as contexts
from trysquare.errors import RepoError, RunError
from trysquare.git import shadow
from trysquare.git.changes import changed_files
from trysquare.git.etalon import materialise_etalon
from trysquare.git.patch import diff_patch
from trysquare.git.running import GIT_TIMEOUT_VARIABLE
from trysquare.runs import load_run
from trysquare.testing import RunBuilder, build_run

from tests.helpers import write_scenario, write_script

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare.git.hostile", "trysquare.git.running")


BASE = {"counter.py": "x = 1\n", "sub/a.py": "a = 1\n"}
WAIT = 30.0  # far beyond any case here, far below "for ever"


def finished(tmp_path: Path) -> RunBuilder:
    run = RunBuilder(tmp_path / "runs" / "r1")
    run.base(BASE)
    run.repo.write("counter.py", "x = 2\n")
    run.repo.write("sub/b.py", "b = 1\n")
    run.finish(response="Done.\n")
    return run


def within(seconds: float, work: Callable[[], object]) -> BaseException | object:
    """``work()``'s result or the exception it raised, or a failed test if it never ends."""
    box: list[object] = []

    def target() -> None:
        try:
            box.append(work())
        except BaseException as error:  # handed to the test
            box.append(error)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still waiting after {seconds:g} s"
    return box[0]


def facts_of(run: RunBuilder) -> BaseException | object:
    return within(WAIT, lambda: contexts.gather_facts(load_run(run.path / "run.toml")))


def git_of(run: RunBuilder, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(run.repo.path), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def fifo_at(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.chmod(0o644)
        path.unlink()
    os.mkfifo(path)
    return path


def loose(run: RunBuilder, rev: str) -> Path:
    oid = git_of(run, "rev-parse", rev)
    return run.repo.path / ".git" / "objects" / oid[:2] / oid[2:]


PACK = "pack-" + "0" * 40
PLACES: dict[str, Callable[[RunBuilder], Path]] = {
    "blob object": lambda run: loose(run, "HEAD:counter.py"),
    "tree object": lambda run: loose(run, "HEAD^{tree}"),
    "pack index": lambda run: run.repo.path / f".git/objects/pack/{PACK}.idx",
    "multi-pack index": lambda run: run.repo.path / ".git/objects/pack/multi-pack-index",
    "commit-graph": lambda run: run.repo.path / ".git/objects/info/commit-graph",
    "commit-graph chain": lambda run: (
        run.repo.path / ".git/objects/info/commit-graphs/commit-graph-chain"
    ),
    "alternates": lambda run: run.repo.path / ".git/objects/info/alternates",
    "top .gitattributes": lambda run: run.repo.path / ".gitattributes",
    "nested .gitattributes": lambda run: run.repo.path / "sub" / ".gitattributes",
    "new folder's .gitattributes": lambda run: run.repo.path / "fresh" / ".gitattributes",
}


@pytest.mark.parametrize("place", list(PLACES))
def test_a_fifo_where_git_opens_a_file_is_refused_by_name(
    tmp_path: Path, place: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(GIT_TIMEOUT_VARIABLE, "600")  # refused at once, not by the deadline
    run = finished(tmp_path)
    if place == "pack index":
        (run.repo.path / f".git/objects/pack/{PACK}.pack").write_bytes(b"")
    if place == "new folder's .gitattributes":
        run.repo.write(
            "fresh/new.py", "n = 1\n"
        )  # untracked: its attributes are asked for the patch
    fifo = fifo_at(PLACES[place](run))
    started = time.monotonic()
    got = facts_of(run)
    assert isinstance(got, RunError), got
    assert f"{fifo} is a FIFO where git reads a file" in got.message
    assert time.monotonic() - started < 10


def test_a_link_to_a_fifo_is_refused_as_one(tmp_path: Path) -> None:
    run = finished(tmp_path)
    os.symlink(fifo_at(tmp_path / "elsewhere"), run.repo.path / "sub" / ".gitattributes")
    got = facts_of(run)
    assert isinstance(got, RunError), got
    assert "sub/.gitattributes is a link to a FIFO where git reads a file" in got.message


def test_a_fifo_in_an_alternate_object_store_is_refused(tmp_path: Path) -> None:
    run = finished(tmp_path)
    other = tmp_path / "other-objects"
    fifo = fifo_at(other / "ab" / ("c" * 38))
    (run.repo.path / ".git/objects/info/alternates").write_text(f"{other}\n")
    got = facts_of(run)
    assert isinstance(got, RunError), got
    assert f"{fifo} is a FIFO" in got.message


def blob_fifo_elsewhere(run: RunBuilder, store: Path) -> Path:
    """The base's blob of counter.py moved out of the clone's store: a FIFO in ``store``."""
    loose(run, "HEAD:counter.py").chmod(0o644)
    loose(run, "HEAD:counter.py").unlink()
    oid = git_of(run, "rev-parse", "HEAD:counter.py")
    return fifo_at(store / oid[:2] / oid[2:])


ALTERNATES: dict[str, Callable[[RunBuilder, Path], tuple[bytes, Path]]] = {
    # (what info/alternates holds, the store it leads to)
    "relative": lambda run, tmp: (b"../../../alt\n", run.repo.path.parent / "alt"),
    "quoted": lambda run, tmp: (b'"' + os.fsencode(tmp / "q\tstore") + b'"\n', tmp / "q\tstore"),
    "trailing space kept": lambda run, tmp: (os.fsencode(tmp / "sp ") + b"\n", tmp / "sp "),
    "inside objects/info": lambda run, tmp: (
        b"info/alt\n",
        run.repo.path / ".git/objects/info/alt",
    ),
    "carriage return kept": lambda run, tmp: (
        b"# a comment\n" + os.fsencode(tmp / "cr\r") + b"\n",
        tmp / "cr\r",
    ),
}


@pytest.mark.parametrize("how", list(ALTERNATES))
def test_an_alternate_store_is_found_as_git_finds_it(
    tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(GIT_TIMEOUT_VARIABLE, "600")
    run = finished(tmp_path)
    listing, store = ALTERNATES[how](run, tmp_path)
    for stripped in ("sp", "cr"):
        (tmp_path / stripped).mkdir()  # what a stripped line would name: an empty store
    fifo = blob_fifo_elsewhere(run, store)
    (run.repo.path / ".git/objects/info/alternates").write_bytes(listing)
    got = facts_of(run)
    assert isinstance(got, RunError), got
    assert f"{fifo} is a FIFO" in got.message


def test_an_alternates_file_that_is_a_link_is_followed(tmp_path: Path) -> None:
    run = finished(tmp_path)
    fifo = blob_fifo_elsewhere(run, tmp_path / "linked")
    (tmp_path / "list").write_text(f"{tmp_path / 'linked'}\n")
    os.symlink(tmp_path / "list", run.repo.path / ".git/objects/info/alternates")
    got = facts_of(run)
    assert isinstance(got, RunError), got
    assert f"{fifo} is a FIFO" in got.message


def test_a_folder_reached_deep_first_is_still_listed_where_git_opens_it(tmp_path: Path) -> None:
    # objects/pack/up -> ../info: listed through the link first, info's commit-graphs/
    # would be one level too deep there; git opens the chain in info/commit-graphs/.
    run = finished(tmp_path)
    objects = run.repo.path / ".git/objects"
    (objects / "pack").mkdir(exist_ok=True)
    (objects / "info" / "commit-graphs").mkdir(parents=True, exist_ok=True)
    os.symlink("../info", objects / "pack" / "up")
    fifo = fifo_at(objects / "info" / "commit-graphs" / "commit-graph-chain")
    got = facts_of(run)
    assert isinstance(got, RunError), got
    assert f"{fifo} is a FIFO" in got.message


def test_a_fifo_planted_after_the_shadow_was_built_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(GIT_TIMEOUT_VARIABLE, "600")
    run = finished(tmp_path)
    first = facts_of(run)
    assert not isinstance(first, BaseException), first
    run.repo.tag("base-v1")
    assert within(WAIT, lambda: changed_files(run.repo.path, "base-v1")) == {
        "counter.py",
        "sub/b.py",
    }
    (run.repo.path / ".git/objects/pack").mkdir(exist_ok=True)
    fifo = fifo_at(run.repo.path / f".git/objects/pack/{PACK}.idx")
    (run.repo.path / f".git/objects/pack/{PACK}.pack").write_bytes(b"")
    got = facts_of(run)  # the cached shadow is reused: its clone is looked at again
    assert isinstance(got, RunError), got
    assert f"{fifo} is a FIFO" in got.message
    # A base named by a tag is read from the clone's files, and its cached shadow taken
    # as built: the same look again.
    named = within(WAIT, lambda: changed_files(run.repo.path, "base-v1"))
    assert isinstance(named, RepoError), named
    assert f"{fifo} is a FIFO" in named.message


def test_an_etalon_read_that_fails_while_git_waits_ends_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One blob missing (git says so: the read fails), the next a FIFO git then waits on:
    # the failed read must stop git, not wait for it (no deadline would come in time).
    monkeypatch.setenv(GIT_TIMEOUT_VARIABLE, "600")
    monkeypatch.setattr(shadow, "_check_object_store", lambda objects: None)
    run = finished(tmp_path)
    tree = git_of(run, "rev-parse", "HEAD^{tree}")
    loose(run, "HEAD:counter.py").chmod(0o644)
    loose(run, "HEAD:counter.py").unlink()
    fifo_at(loose(run, "HEAD:sub/a.py"))
    started = time.monotonic()
    got = within(WAIT, lambda: materialise_etalon(run.repo.path, tree, tmp_path / "etalons"))
    assert isinstance(got, RepoError), got
    assert "git cat-file could not read 'counter.py'" in got.message
    assert time.monotonic() - started < 10
    assert not list((tmp_path / "etalons").glob("[0-9a-f]*")), "half a tree was cached"


def test_a_wait_nothing_names_beforehand_ends_at_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # git's walk for new files asks every folder with a .git whether it is a repository:
    # it reads that .git/HEAD, here a FIFO. Nothing lists it before git finds it.
    monkeypatch.setenv(GIT_TIMEOUT_VARIABLE, "1")
    run = finished(tmp_path)
    nested = run.repo.path / "vendored"
    subprocess.run(["git", "init", "-q", str(nested)], check=True)
    fifo_at(nested / ".git" / "HEAD")
    started = time.monotonic()
    got = facts_of(run)
    assert isinstance(got, RunError), got
    assert "did not finish within 1 s" in got.message and GIT_TIMEOUT_VARIABLE in got.message
    assert time.monotonic() - started < 15


@pytest.mark.parametrize("what", ["patch", "etalon"])
def test_the_streamed_reads_have_the_deadline_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, what: str
) -> None:
    # With the object store's check taken away, a FIFO blob holds `diff-files -p` (the
    # patch) and `cat-file --batch` (an etalon tree): the deadline must stop both.
    monkeypatch.setenv(GIT_TIMEOUT_VARIABLE, "1")
    monkeypatch.setattr(shadow, "_check_object_store", lambda objects: None)
    run = finished(tmp_path)
    if what == "patch":
        base = run.repo.head()
        fifo_at(loose(run, "HEAD:counter.py"))
        got = within(WAIT, lambda: diff_patch(run.repo.path, base))
        command = "diff-files"
    else:
        tree = git_of(run, "rev-parse", "HEAD^{tree}")
        fifo_at(loose(run, "HEAD:sub/a.py"))
        got = within(WAIT, lambda: materialise_etalon(run.repo.path, tree, tmp_path / "etalons"))
        command = "cat-file"
    assert isinstance(got, RepoError), got
    assert f"git {command} did not finish within 1 s" in got.message


@pytest.mark.parametrize("value", ["soon", "0", "-5", "nan", "inf"])
def test_a_deadline_that_is_no_number_of_seconds_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    run = finished(tmp_path)
    monkeypatch.setenv(GIT_TIMEOUT_VARIABLE, value)
    with pytest.raises(RepoError) as refused:
        diff_patch(run.repo.path, run.repo.head())
    assert refused.value.message == (
        f"{GIT_TIMEOUT_VARIABLE} must be a number of seconds above 0, not {value!r}"
    )


def test_validate_scores_the_others_and_names_the_run_git_would_wait_on(
    cli_process, tmp_path: Path
) -> None:
    # A real process: its timeout is what fails the test if validate waits for ever.
    exp = tmp_path / "exp"
    build_run(exp / "runs" / "good", base=BASE, changes={"counter.py": "x = 2\n"}, response="ok\n")
    hostile = build_run(
        exp / "runs" / "hostile",
        base=BASE,
        changes={"counter.py": "x = 3\n"},
        response="ok\n",
        repetition=2,
    )
    fifo = fifo_at(hostile.repo.path / ".gitattributes")
    write_script(
        tmp_path / "s",
        "score.py",
        'import json; print(json.dumps({"metrics": {"scored": True}}))\n',
    )
    scenario = write_scenario(
        tmp_path / "s",
        """
        [[validation]]
        name = "score"
        mode = "script"
        command = "score.py"
        metrics = ["scored"]
    """,
    )
    done = cli_process("validate", scenario, exp, "--no-progress", timeout=WAIT * 2)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{fifo} is a FIFO where git reads a file" in done.stderr
    rows = {r["id"]: r for r in json.loads((exp / "measures.json").read_text(encoding="utf-8"))}
    assert rows["good"]["state"] == "valid" and rows["good"]["metrics"] == {"scored": True}
    assert rows["hostile"]["state"] == "invalid"


@pytest.mark.parametrize("kind", ["FIFO", "socket"])
def test_a_tracked_file_replaced_by_no_file_refuses_the_run_naming_it(
    tmp_path: Path, kind: str
) -> None:
    import socket

    run = finished(tmp_path)
    target = run.repo.path / "counter.py"
    target.unlink()
    if kind == "FIFO":
        os.mkfifo(target)
    else:
        with socket.socket(socket.AF_UNIX) as holder:
            holder.bind(str(target))  # the file stays when the socket is closed
    got = facts_of(run)
    assert isinstance(got, RunError), got
    assert f"{target} is a {kind} where base has a file: git cannot hash it" in got.message

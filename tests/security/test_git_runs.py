"""Run folders whose git facts or input paths lie: a moved tag, a clone that is the run
folder, inputs that lead outside the run, given files that are not at base, harness
files declared in ``excluded``."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from trysquare import context as contexts
from trysquare.errors import RunError
from trysquare.runs import load_run
from trysquare.testing import RunBuilder

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare.runs", "trysquare.git.dotgit")


BASE = {"counter.py": "def count():\n    return 1\n", "README.md": "# counter\n"}


def finished(tmp_path: Path, **extra: object) -> RunBuilder:
    run = RunBuilder(tmp_path / "runs" / "r1")
    run.base(BASE)
    run.repo.write("counter.py", "def count():\n    return 2\n")
    run.extra.update(extra)
    run.finish(response="Done.\n")
    return run


def test_tag_moved_after_first_measurement(tmp_path: Path) -> None:
    run = finished(tmp_path)
    run.base_commit = None
    run.extra["base"] = "etalon-v1"
    run.finish(response="Done.\n")
    loaded = load_run(run.path / "run.toml")
    facts = contexts.gather_facts(loaded)
    assert facts.touched == ("counter.py",)
    pinned = json.loads((run.path / ".trysquare" / "base.json").read_text())
    assert pinned["base"] == loaded.base_commit
    # The agent (or its test code) moves the tag onto its own commit.
    run.repo.write("out_of_scope.py", "x = 1\n")
    moved = run.repo.commit("agent")
    run.repo.git("tag", "-f", "etalon-v1", "HEAD")
    with pytest.raises(RunError) as caught:
        load_run(run.path / "run.toml")
    assert loaded.base_commit in caught.value.message and moved in caught.value.message


def test_repo_is_the_run_folder(tmp_path: Path) -> None:
    run = finished(tmp_path)
    os.rename(run.path / "repo" / ".git", run.path / ".git")  # the run folder is the clone
    (run.path / "run.toml").write_text(
        (run.path / "run.toml").read_text().replace('repo = "repo"', 'repo = "."')
    )
    with pytest.raises(RunError, match=r"repo '\.' is the run folder"):
        load_run(run.path / "run.toml")


def test_repo_contains_the_run_folder(tmp_path: Path) -> None:
    run = finished(tmp_path)
    outer = tmp_path / "runs"
    os.rename(run.path / "repo" / ".git", outer / ".git")
    text = (run.path / "run.toml").read_text().replace('repo = "repo"', 'repo = ".."')
    (run.path / "run.toml").write_text(text)
    with pytest.raises(RunError, match=r"repo '\.\.' contains the run folder"):
        load_run(run.path / "run.toml")


def test_response_symlinked_outside_the_run(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not the agent's to send\n")
    run = finished(tmp_path)
    (run.path / "response.md").unlink()
    os.symlink(secret, run.path / "response.md")
    with pytest.raises(RunError, match="response.md resolves outside the run folder"):
        load_run(run.path / "run.toml")


@pytest.mark.parametrize(
    ("key", "name", "make", "kind"),
    [
        ("prompt", "prompt.txt", os.mkfifo, "a FIFO"),
        ("response", "response.md", os.mkfifo, "a FIFO"),
        ("response", "response.md", os.mkdir, "a folder"),
        ("session", "session.jsonl", os.mkfifo, "a FIFO"),
        ("trace", "trace.jsonl", os.mkfifo, "a FIFO"),
        ("session", "log.jsonl", lambda path: os.symlink("/dev/zero", path), "a device"),
    ],
    ids=[
        "prompt-fifo",
        "response-fifo",
        "response-folder",
        "session-fifo",
        "trace-fifo",
        "session-link-to-dev-zero",
    ],
)
def test_an_input_that_is_no_file_refuses_the_run_at_load(
    tmp_path: Path, key: str, name: str, make: Callable[[Path], None], kind: str
) -> None:
    # Read by the judge's blinding check, validators and forms with a plain open(): a FIFO
    # would hold them for ever, a device feed them without end.
    run = finished(tmp_path)
    target = run.path / name
    if target.exists():
        target.unlink()
    if key in ("session", "trace"):
        run.extra[key] = name
        run.finish(response="Done.\n")
    make(target)
    done: list[BaseException] = []
    worker = threading.Thread(target=lambda: _catch(done, run.path / "run.toml"), daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "load_run waited on it"
    (error,) = done
    assert isinstance(error, RunError), error
    assert f"{key} '{name}' is {kind}, not a file" in error.message


def _catch(into: list[BaseException], run_toml: Path) -> None:
    try:
        load_run(run_toml)
    except BaseException as error:  # handed to the test
        into.append(error)


def test_a_session_folder_log_linked_outside_the_run_is_refused_not_judged(tmp_path: Path) -> None:
    # Another agent's session elsewhere on the machine, linked into the run's session
    # folder: its last answer would become this run's response, sent to the judge.
    from trysquare.testing import write_pi_session

    run = finished(tmp_path)
    elsewhere = write_pi_session(
        tmp_path / "elsewhere" / "other.jsonl",
        [
            {
                "type": "message",
                "message": {"role": "assistant", "content": [{"type": "text", "text": "SECRET"}]},
            }
        ],
        cwd=str(run.repo.path),
    )
    (run.path / "logs").mkdir()
    write_pi_session(run.path / "logs" / "0-own.jsonl", [], cwd=str(run.repo.path))
    os.symlink(elsewhere, run.path / "logs" / "1-other.jsonl")
    (run.path / "response.md").unlink()
    run.extra["session"] = "logs"
    run.finish()
    with pytest.raises(
        RunError, match=r"session 'logs/1-other.jsonl' resolves outside the run folder"
    ):
        load_run(run.path / "run.toml")
    assert not (run.path / "response.md").exists()
    # A link that stays in the run is the agent's own log, read as before.
    (run.path / "logs" / "1-other.jsonl").unlink()
    os.symlink(run.path / "logs" / "0-own.jsonl", run.path / "logs" / "1-again.jsonl")
    assert load_run(run.path / "run.toml").session == (run.path / "logs").resolve()


def test_a_replay_refuses_a_prompt_linked_outside_the_run_too(tmp_path: Path) -> None:
    # A replay reads no git, but the judge's blinding line still reads the prompt.
    secret = tmp_path / "secret.txt"
    secret.write_text("x\n")
    run = finished(tmp_path)
    (run.path / "prompt.txt").unlink()
    os.symlink(secret, run.path / "prompt.txt")
    with pytest.raises(RunError, match="prompt 'prompt.txt' resolves outside"):
        load_run(run.path / "run.toml", replay=True)


def test_prompt_and_session_symlinked_outside_the_run(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("x\n")
    run = finished(tmp_path)
    os.symlink(secret, run.path / "session.jsonl")
    run.extra["session"] = "session.jsonl"
    run.finish(response="Done.\n")
    with pytest.raises(RunError, match="session 'session.jsonl' resolves outside"):
        load_run(run.path / "run.toml")
    run.extra.pop("session")
    (run.path / "prompt.txt").unlink()
    os.symlink(secret, run.path / "prompt.txt")
    (run.path / "run.toml").write_text((run.path / "run.toml").read_text())
    with pytest.raises(RunError, match="prompt 'prompt.txt' resolves outside"):
        load_run(run.path / "run.toml")


def test_given_symlinked_outside_the_clone(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("x\n")
    run = RunBuilder(tmp_path / "runs" / "r1")
    run.base(BASE)
    os.symlink(secret, run.repo.path / "hint.md")
    run.repo.commit("given: a link")
    run.base_commit = run.repo.head()
    run.given = ["hint.md"]
    run.finish()
    with pytest.raises(RunError, match="given 'hint.md' resolves outside the clone"):
        load_run(run.path / "run.toml")


def test_given_committed_after_base(tmp_path: Path) -> None:
    # The given file is the agent's diff, not at base: its content would reach the judge.
    run = RunBuilder(tmp_path / "runs" / "r1")
    base = run.base(BASE)
    run.repo.write("tests/test_probe.py", "probe\n")
    run.repo.commit("given, after base")
    run.given = ["tests/test_probe.py"]
    run.finish()
    with pytest.raises(RunError) as caught:
        load_run(run.path / "run.toml")
    assert "tests/test_probe.py" in caught.value.message and base in caught.value.message


def test_harness_files_in_excluded_are_not_the_agents_work(tmp_path: Path) -> None:
    run = finished(tmp_path, excluded=["AGENTS.md", ".pi/"])
    run.repo.write("AGENTS.md", "injected by the harness\n")
    run.repo.write(".pi/settings.json", "{}\n")
    facts = contexts.gather_facts(load_run(run.path / "run.toml"))
    assert facts.touched == ("counter.py",)
    assert "AGENTS.md" not in facts.files and "AGENTS.md" not in facts.diff.read_text()


def test_excluded_cannot_hide_the_agents_edit_of_a_base_file(tmp_path: Path) -> None:
    # excluded is an ignore rule: like .gitignore, it never hides a file tracked at base.
    run = finished(tmp_path, excluded=["counter.py"])
    facts = contexts.gather_facts(load_run(run.path / "run.toml"))
    assert facts.touched == ("counter.py",)


def test_excluded_that_is_not_a_pattern_is_refused(tmp_path: Path) -> None:
    run = finished(tmp_path, excluded=["ok", "two\nlines"])
    with pytest.raises(RunError, match="excluded 'two\\\\nlines' is not a gitignore-style pattern"):
        load_run(run.path / "run.toml")


def test_etalon_tag_moved_after_first_measurement(tmp_path: Path) -> None:
    run = finished(tmp_path)
    loaded = load_run(run.path / "run.toml")
    contexts.gather_facts(loaded)
    before = run.repo.git("rev-parse", "etalon-v1^{commit}").strip()
    run.repo.write("counter.py", "def count():\n    return 2\n")
    moved = run.repo.commit("agent")
    run.repo.git("tag", "-f", "etalon-v1", "HEAD")  # the reference now holds the answer
    with pytest.raises(RunError) as caught:
        contexts.gather_facts(load_run(run.path / "run.toml"))
    assert before in caught.value.message and moved in caught.value.message


def test_a_fifo_in_place_of_the_base_commit_object_refuses_the_run_without_waiting(
    tmp_path: Path,
) -> None:
    # git opens a loose object as a file: on a FIFO it would wait for a writer for ever.
    run = finished(tmp_path)
    base = run.repo.head()
    loose = run.repo.path / ".git" / "objects" / base[:2] / base[2:]
    loose.unlink()
    os.mkfifo(loose)
    with pytest.raises(RunError, match="is not a regular file"):
        load_run(run.path / "run.toml")

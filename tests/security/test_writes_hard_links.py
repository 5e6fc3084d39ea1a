"""Issue 29 item 6: hard links planted in a run folder are refused as symlinks are.

A hard link is a second name for a file elsewhere: the agent (same user) can leave one at
a name trysquare reads or appends to. Each test links (``os.link``) a file outside the run —
a 0600 secret, a shell rc file — into the hostile run, validates a matrix holding it and a
good run, and checks that nothing was read from or appended to that file, that the hostile
run is refused naming the path and its link count, and that the good run was validated.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from trysquare.runner import ValidateOptions, validate
from trysquare.runs import discover
from trysquare.scenario import load_scenario
from trysquare.testing import build_run

from tests.security.judgelab import lab_with_key, validate_in_process  # noqa: F401
from tests.security.test_writes_symlinks import (
    assert_good_run_validated,
    errors_of,
    row,
    run_validate,
    scenario_file,
    two_runs,
)

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare._atomic",)


SECRET = "s3cr3t-0600-token-7f1c"
RC_TEXT = "# ~/.bashrc\nexport PATH=$HOME/bin:$PATH\n"


def outside(tmp_path: Path, name: str, text: str) -> Path:
    """A 0600 file of the same user outside every run folder (``~/.ssh/id``, ``~/.bashrc``)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    target = home / name
    target.write_text(text, encoding="utf-8")
    target.chmod(0o600)
    return target


def plant(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.unlink(missing_ok=True)
    os.link(target, link)
    assert link.stat().st_nlink == 2


def text_below(folder: Path) -> str:
    """Every file's bytes below ``folder`` (the run folders, the reports), as one text."""
    texts = []
    for current, _, files in os.walk(folder):
        for name in files:
            path = Path(current) / name
            if not path.is_symlink():
                texts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(texts)


@pytest.mark.parametrize("target", ["score.history.jsonl", "score.stderr"])
def test_hard_linked_history_or_stderr_is_never_written_through(
    tmp_path: Path, target: str
) -> None:
    exp, _, evil = two_runs(tmp_path)
    run_validate(tmp_path, exp)  # a first result, so that the next one moves it to the history
    rc = outside(tmp_path, ".bashrc", RC_TEXT)
    planted = evil / "validation" / target
    plant(planted, rc)
    summary, _, rows = run_validate(tmp_path, exp, force=True)
    assert rc.read_text(encoding="utf-8") == RC_TEXT  # no result line became a shell command
    assert row(rows, "evil")["state"] == "invalid"
    said = errors_of(summary, rows, "evil")
    assert str(planted) in said and "has 2 links" in said
    assert summary.exit_code == 1
    assert_good_run_validated(rows)


def test_hard_linked_history_before_the_first_result_is_never_appended_to(tmp_path: Path) -> None:
    # Planted before trysquare ever ran: a result written by hand is there to be moved.
    exp, _, evil = two_runs(tmp_path)
    rc = outside(tmp_path, ".bashrc", RC_TEXT)
    planted = evil / "validation" / "score.history.jsonl"
    plant(planted, rc)
    forged = {"state": "valid", "metrics": {"scored": True}, "reasons": {"scored": "echo pwned"}}
    (evil / "validation" / "score.json").write_text(json.dumps(forged), encoding="utf-8")
    summary, _, rows = run_validate(tmp_path, exp, force=True)
    assert rc.read_text(encoding="utf-8") == RC_TEXT
    assert "has 2 links" in errors_of(summary, rows, "evil")
    assert_good_run_validated(rows)


def test_hard_linked_result_to_a_secret_is_never_read(tmp_path: Path) -> None:
    exp, _, evil = two_runs(tmp_path)
    # A 0600 file shaped as a result: read, it would be copied into the history and the reports.
    forged = {"state": "valid", "metrics": {"scored": True}, "reasons": {"scored": SECRET}}
    secret = outside(tmp_path, "id_secret", json.dumps(forged))
    planted = evil / "validation" / "score.json"
    plant(planted, secret)
    summary, output, rows = run_validate(tmp_path, exp)
    assert secret.read_text(encoding="utf-8") == json.dumps(forged)
    assert row(rows, "evil")["state"] == "invalid"
    said = errors_of(summary, rows, "evil")
    assert str(planted) in said and "has 2 links" in said
    # Nothing of the secret anywhere trysquare wrote (the secret's own link aside).
    planted.unlink()
    assert SECRET not in text_below(exp) and SECRET not in output
    assert_good_run_validated(rows)


INPUTS = ["response", "prompt", "session", "trace", "session folder", "diff"]


@pytest.mark.parametrize("key", INPUTS)
def test_hard_linked_input_is_never_read(tmp_path: Path, key: str) -> None:
    exp = tmp_path / "exp"
    base = {"a.py": "a = 1\n"}
    good = build_run(exp / "runs" / "good", base=base, changes={"a.py": "a = 2\n"}, response="ok\n")
    evil = build_run(
        exp / "runs" / "evil", base=base, changes={"a.py": "a = 3\n"}, response="ok\n", repetition=2
    )
    secret = outside(tmp_path, "id_secret", f"{SECRET}\n")
    run_toml = evil.path / "run.toml"
    names = {
        "response": "response.md",
        "prompt": "prompt.txt",
        "diff": "diff.patch",
        "session": "session.jsonl",
        "trace": "trace.jsonl",
        "session folder": "sessions/a.jsonl",
    }
    planted = evil.path / names[key]
    plant(planted, secret)
    if key in ("session", "trace", "session folder"):
        value = "sessions" if key == "session folder" else names[key]
        field = "trace" if key == "trace" else "session"
        # Before any table of run.toml.
        top_level = f'{field} = "{value}"\n' + run_toml.read_text(encoding="utf-8")
        run_toml.write_text(top_level, encoding="utf-8")
    out = io.StringIO()
    scenario = load_scenario(scenario_file(tmp_path / "s"))
    summary = validate(scenario, discover([exp]), ValidateOptions(progress=False, jobs=2), out=out)
    said = "\n".join(error.message for error in summary.skipped_runs)
    assert str(run_toml) in said and "has 2 links" in said, said  # the run, the key, the count
    assert not (evil.path / "validation").exists()  # no validator was handed it
    assert summary.exit_code == 1
    rows = json.loads((exp / "measures.json").read_text(encoding="utf-8"))
    assert_good_run_validated(rows)
    assert good.path.exists()
    planted.unlink()
    assert SECRET not in text_below(exp) and SECRET not in out.getvalue()


def test_hard_linked_lock_is_not_written_through(cli, tmp_path: Path) -> None:
    _, _, evil = two_runs(tmp_path)
    rc = outside(tmp_path, ".bashrc", RC_TEXT)
    plant(evil / ".trysquare" / "validate.lock", rc)
    done = cli("validate", scenario_file(tmp_path / "s"), evil, "--no-progress")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "has 2 links" in done.stderr
    assert rc.read_text(encoding="utf-8") == RC_TEXT  # never truncated, no pid written
    assert not (evil / "validation" / "score.json").exists()


def test_hard_linked_archived_context_is_never_replayed(tmp_path: Path) -> None:
    exp, _, evil = two_runs(tmp_path)
    run_validate(tmp_path, exp)
    archived = evil / "validation" / "score" / "context.json"
    forged = json.loads(archived.read_text(encoding="utf-8"))
    forged["touched"] = [SECRET]
    secret = outside(tmp_path, "context", json.dumps(forged))
    plant(archived, secret)
    scenario = load_scenario(tmp_path / "s" / "scenario.toml")
    out = io.StringIO()
    options = ValidateOptions(progress=False, replay=True, force=True)
    summary = validate(scenario, discover([exp], replay=True), options, out=out)
    said = "\n".join([e.message for e in summary.skipped_runs] + [out.getvalue()])
    assert str(archived) in said and "has 2 links" in said, said
    assert summary.exit_code == 1
    archived.unlink()
    assert SECRET not in text_below(exp)


@pytest.mark.parametrize("link", ["hard link", "symlink"])
@pytest.mark.parametrize("name", ["transcript.history.jsonl", "transcript.json"])
def test_linked_judge_transcript_is_refused_before_paying(
    lab_with_key: Any, link: str, name: str
) -> None:
    # The judge reads its previous transcript and appends it to the history: a link planted
    # at either is refused before a request is sent (it used to crash after the verdict).
    from tests.judge.chatserver import verdict

    lab = lab_with_key("sk-hard-link-test")
    lab.run()
    lab.respond(lambda _: verdict({"note_usable": True, "cites_paths": True}))
    assert validate_in_process(lab)[0] == 0
    rc = outside(lab.root, ".bashrc", RC_TEXT)
    planted = lab.exp / "runs" / "r1" / "validation" / "judge" / name
    if link == "hard link":
        plant(planted, rc)
    else:
        planted.unlink(missing_ok=True)
        planted.symlink_to(rc)
    sent = len(lab.server.received)
    code, _ = validate_in_process(lab, rejudge=True)
    assert rc.read_text(encoding="utf-8") == RC_TEXT  # the old transcript never landed in it
    assert code == 1
    result = lab.result()
    assert result["state"] == "invalid"
    said = "has 2 links" if link == "hard link" else "is a symlink"
    assert result["error"].startswith(f"judge 'judge': {planted} {said}"), result["error"]
    assert "crashed" not in result["error"]
    assert len(lab.server.received) == sent  # refused before paying for a verdict


def test_a_file_replaced_by_rename_is_never_kept_as_a_hard_link(tmp_path: Path) -> None:
    # diff.patch and measures.json are rewritten by a rename that keeps an identical file (and
    # its mtime): one with another name elsewhere is replaced all the same, so what is read
    # through the name later is trysquare's own file, not one that changes with the other.
    from trysquare import _atomic

    run = tmp_path / "run"
    run.mkdir()
    outside_file = outside(tmp_path, "kept", "same bytes\n")
    planted = run / "diff.patch"
    plant(planted, outside_file)
    _atomic.write_stream(planted, lambda out: out.write(b"same bytes\n"), root=run)
    assert planted.stat().st_nlink == 1 and outside_file.stat().st_nlink == 1
    assert planted.read_bytes() == b"same bytes\n"
    assert outside_file.read_text(encoding="utf-8") == "same bytes\n"  # untouched


def test_the_append_and_the_readers_refuse_a_hard_link_on_the_open_file(tmp_path: Path) -> None:
    from trysquare import _atomic

    run = tmp_path / "run"
    rc = outside(tmp_path, ".bashrc", RC_TEXT)
    planted = run / "validation" / "x.history.jsonl"
    plant(planted, rc)

    def append_once() -> None:  # a result's history: its last line checked, then appended
        with _atomic.folder(planted.parent, root=run) as folder:
            folder.append_once(planted.name, b'{"echo": "pwned"}')

    for act in (
        lambda: _atomic.append_line(planted, {"echo": "pwned"}, root=run),
        lambda: _atomic.read_bytes(planted, root=run),
        lambda: _atomic.last_line(planted, root=run),
        append_once,
    ):
        with pytest.raises(_atomic.UnsafePath, match="has 2 links"):
            act()
    assert rc.read_text(encoding="utf-8") == RC_TEXT


def test_a_fifo_planted_where_a_line_is_appended_is_refused_never_waited_on(
    tmp_path: Path,
) -> None:
    # A FIFO with no reader would block a plain open for writing for ever.
    from trysquare import _atomic

    run = tmp_path / "run"
    planted = run / "validation" / "x.history.jsonl"
    planted.parent.mkdir(parents=True)
    os.mkfifo(planted)

    def append_once() -> None:
        with _atomic.folder(planted.parent, root=run) as folder:
            folder.append_once(planted.name, b'{"echo": "pwned"}')

    for act in (lambda: _atomic.append_line(planted, {"echo": "pwned"}, root=run), append_once):
        with pytest.raises(_atomic.UnsafePath, match="is not a regular file"):
            act()

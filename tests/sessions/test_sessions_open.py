"""open_session: detection, folders, refusals, and the plugin registration."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from sessionlogs import (
    FIXTURES,
    WriteLog,
    pi_assistant,
    pi_call,
    pi_entry,
    pi_header,
    pi_text,
    pi_user,
)
from trysquare.errors import RunError
from trysquare.sessions import SessionFormat, final_response, open_session
from trysquare.sessions.claude_code import ClaudeCodeReading
from trysquare.sessions.codex import CodexReading
from trysquare.sessions.pi import PiReading

pytestmark = pytest.mark.fast  # the inner loop: `uv run pytest -m fast -n 0`


def test_detects_each_format_from_its_content(
    formats: dict[str, SessionFormat], write_log: WriteLog
) -> None:
    codex = write_log(
        [{"timestamp": "t", "type": "session_meta", "payload": {"cwd": "/r"}}], "rollout.jsonl"
    )
    assert isinstance(
        open_session(FIXTURES / "pi" / "large-session.jsonl", formats=formats), PiReading
    )
    for name in ("jssoundrecorder-7acd37a8.jsonl", "subagent-skill-a52886dc.jsonl"):
        assert isinstance(
            open_session(FIXTURES / "claude-code" / name, formats=formats), ClaudeCodeReading
        )
    assert isinstance(open_session(codex, formats=formats), CodexReading)


def test_each_sniff_refuses_the_others(formats: dict[str, SessionFormat]) -> None:
    heads = {
        "pi": FIXTURES / "pi" / "large-session.jsonl",
        "claude-code": FIXTURES / "claude-code" / "jssoundrecorder-7acd37a8.jsonl",
    }
    for owner, path in heads.items():
        head = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[:5]]
        assert [name for name, fmt in formats.items() if fmt.sniff(head)] == [owner]


def test_named_format_is_used_as_given(formats: dict[str, SessionFormat]) -> None:
    reading = open_session(FIXTURES / "pi" / "large-session.jsonl", format="pi", formats=formats)
    assert isinstance(reading, PiReading)


def test_unknown_format_name_is_one_sentence(formats: dict[str, SessionFormat]) -> None:
    path = FIXTURES / "pi" / "large-session.jsonl"
    with pytest.raises(RunError) as caught:
        open_session(path, format="aider", formats=formats)
    message = str(caught.value)
    assert str(path) in message and "'aider'" in message and "claude-code, codex, pi" in message
    assert message.count(".") >= 1 and "\n" not in message


def test_undetectable_log_is_one_sentence(
    formats: dict[str, SessionFormat], write_log: WriteLog
) -> None:
    log = write_log([{"event": "something else"}, "garbage"])
    with pytest.raises(
        RunError,
        match=r"cannot tell which agent wrote session log .*session\.jsonl.*session_format",
    ):
        open_session(log, formats=formats)


def test_missing_log_and_empty_folder(formats: dict[str, SessionFormat], tmp_path: Path) -> None:
    with pytest.raises(RunError, match="does not exist"):
        open_session(tmp_path / "nope.jsonl", formats=formats)
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunError, match="holds no .jsonl file"):
        open_session(tmp_path / "empty", formats=formats)


def test_a_folder_is_read_file_by_file_in_name_order(
    formats: dict[str, SessionFormat], tmp_path: Path
) -> None:
    folder = tmp_path / "session"
    from sessionlogs import jsonl

    jsonl(
        folder / "2-second.jsonl",
        [
            pi_header(cwd="/b"),
            pi_entry(
                "a", None, pi_assistant(pi_call("2", "write", path="/b/two.txt"), pi_text("second"))
            ),
        ],
    )
    jsonl(
        folder / "1-first.jsonl",
        [
            pi_header(cwd="/a"),
            pi_entry("a", None, pi_user("go")),
            pi_entry(
                "b", "a", pi_assistant(pi_call("1", "write", path="/a/one.txt"), pi_text("first"))
            ),
        ],
    )
    (folder / "notes.txt").write_text("not a log")
    reading = open_session(folder, formats=formats)
    calls = reading.tool_calls()
    assert [(call.index, call.writes) for call in calls] == [(0, ("one.txt",)), (1, ("two.txt",))]
    assert reading.final_response() == "second"
    assert final_response(folder, formats=formats) == "second"


def test_repo_moved_after_the_run(formats: dict[str, SessionFormat], tmp_path: Path) -> None:
    from sessionlogs import jsonl

    repo = tmp_path / "moved" / "repo"
    repo.mkdir(parents=True)
    log = jsonl(
        tmp_path / "s.jsonl",
        [
            pi_header(cwd="/ci/old/place/repo"),
            pi_entry(
                "a",
                None,
                pi_assistant(
                    pi_call("1", "write", path="/ci/old/place/repo/src/a.py"),
                    pi_call("2", "write", path=f"{repo}/src/b.py"),
                    pi_call("3", "write", path="src/c.py"),
                ),
            ),
        ],
    )
    calls = open_session(log, formats=formats, repo=repo).tool_calls()
    assert [call.writes for call in calls] == [("src/a.py",), ("src/b.py",), ("src/c.py",)]


def test_registered_through_the_plugin_hook(tmp_path: Path) -> None:
    plugins = pytest.importorskip("trysquare.plugins")
    installed = plugins.session_formats()
    assert {"pi", "claude-code", "codex"} <= set(installed)
    copy = tmp_path / "log.jsonl"
    shutil.copy(FIXTURES / "claude-code" / "subagent-skill-a52886dc.jsonl", copy)
    assert isinstance(open_session(copy), ClaudeCodeReading)

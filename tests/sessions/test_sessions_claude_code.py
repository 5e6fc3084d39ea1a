"""Claude Code: the two real logs, and hand-built entries for each rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sessionlogs import FIXTURES, WriteLog
from trysquare.sessions import SessionFormat, open_session
from trysquare.sessions.claude_code import ClaudeCodeFormat

pytestmark = pytest.mark.fast  # the inner loop: `uv run pytest -m fast -n 0`

MAIN = FIXTURES / "claude-code" / "jssoundrecorder-7acd37a8.jsonl"
SUBAGENT = FIXTURES / "claude-code" / "subagent-skill-a52886dc.jsonl"


def _entries(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _blocks(path: Path, kind: str) -> list[dict[str, Any]]:
    """Content blocks of one kind, straight from the JSON (no sidechain in either file's own chain)."""
    found = []
    for entry in _entries(path):
        content = (
            entry.get("message", {}).get("content")
            if isinstance(entry.get("message"), dict)
            else None
        )
        if isinstance(content, list):
            found += [block for block in content if block.get("type") == kind]
    return found


class TestRealMainSession:
    def test_calls_and_failures(self, formats: dict[str, SessionFormat]) -> None:
        uses = _blocks(MAIN, "tool_use")
        errors = {
            b["tool_use_id"] for b in _blocks(MAIN, "tool_result") if b.get("is_error") is True
        }
        calls = open_session(MAIN, formats=formats).tool_calls()
        # By hand: 71 tool_use blocks (Edit 18, TodoWrite 15, Bash 13, Read 11,
        # Write 5, Grep 3, Glob 2, BashOutput 2, KillShell 2); 71 results, of which
        # 55 carry no is_error at all, 10 say false and 6 say true.
        assert len(uses) == 71 and len(errors) == 6
        assert [call.name for call in calls] == [use["name"] for use in uses]
        assert sum(call.failed for call in calls) == 6
        assert {uses[call.index]["id"] for call in calls if call.failed} == errors
        assert all(call.result is not None for call in calls)

    def test_results_read_back_whole(self, formats: dict[str, SessionFormat]) -> None:
        def text(content: object) -> str:
            if isinstance(content, str):
                return content
            return "\n".join(b["text"] for b in content if b.get("type") == "text")

        results = {b["tool_use_id"]: text(b["content"]) for b in _blocks(MAIN, "tool_result")}
        uses = _blocks(MAIN, "tool_use")
        calls = open_session(MAIN, formats=formats).tool_calls()
        assert [call.result for call in calls] == [results[use["id"]] for use in uses]
        assert [call.arguments for call in calls] == [use["input"] for use in uses]
        assert max(len(value) for value in results.values()) > 5_000

    def test_writes_and_reads_repo_relative(self, formats: dict[str, SessionFormat]) -> None:
        uses = _blocks(MAIN, "tool_use")
        calls = open_session(MAIN, formats=formats).tool_calls()
        root = "/Users/dain/workspace/JSSoundRecorder/"
        for use, call in zip(uses, calls, strict=True):
            if use["name"] in {"Write", "Edit", "MultiEdit"}:
                assert call.writes == (use["input"]["file_path"].removeprefix(root),)
            if use["name"] == "Read":
                assert call.reads == (use["input"]["file_path"].removeprefix(root),)
        assert open_session(MAIN, formats=formats).first_write("CLAUDE.md") == next(
            i
            for i, use in enumerate(uses)
            if use["name"] == "Write" and use["input"]["file_path"].endswith("/CLAUDE.md")
        )

    def test_final_response_spans_the_last_message_entries(
        self, formats: dict[str, SessionFormat]
    ) -> None:
        entries = [e for e in _entries(MAIN) if e.get("type") == "assistant"]
        last_id = entries[-1]["message"]["id"]
        texts = [
            block["text"]
            for entry in entries
            if entry["message"]["id"] == last_id
            for block in entry["message"]["content"]
            if block["type"] == "text"
        ]
        # The last API message is spread over two entries: thinking, then text.
        assert sum(entry["message"]["id"] == last_id for entry in entries) == 2
        reading = open_session(MAIN, formats=formats)
        assert reading.final_response() == "\n".join(texts)
        assert reading.final_response().startswith(
            "Perfect! The AudioWorklet migration is complete."
        )
        assert reading.skipped == 0
        # /init arrived as an isMeta body, but it is a command, not a skill.
        assert reading.skills_expanded() == frozenset()


class TestRealSubagentFile:
    def test_read_as_its_own_chain(self, formats: dict[str, SessionFormat]) -> None:
        entries = _entries(SUBAGENT)
        assert all(entry["isSidechain"] for entry in entries)  # every entry is a sidechain
        calls = open_session(SUBAGENT, formats=formats).tool_calls()
        # By hand: 17 tool_use blocks (Bash 7, ToolSearch 3, Edit 3, Skill, TaskGet,
        # Write, TaskUpdate).
        assert len(calls) == 17
        assert [call.name for call in calls] == [
            use["name"] for use in _blocks(SUBAGENT, "tool_use")
        ]
        assert not any(call.failed for call in calls)

    def test_skill_call_reads_its_skill_file(self, formats: dict[str, SessionFormat]) -> None:
        reading = open_session(SUBAGENT, formats=formats)
        skill = next(call for call in reading.tool_calls() if call.name == "Skill")
        assert skill.arguments == {"skill": "my-worktree-actors"}
        # The isMeta body says: "Base directory for this skill: /home/cboos/.claude/skills/my-worktree-actors"
        assert skill.reads == ("/home/cboos/.claude/skills/my-worktree-actors/SKILL.md",)
        assert skill.read_matches("**/SKILL.md")
        assert reading.skills_expanded() == frozenset()  # fetched by a call, not expanded

    def test_writes_relative_to_the_worktree(self, formats: dict[str, SessionFormat]) -> None:
        reading = open_session(SUBAGENT, formats=formats)
        uses = _blocks(SUBAGENT, "tool_use")
        first_write = next(i for i, use in enumerate(uses) if use["name"] == "Write")
        assert reading.first_write("work/research-teammates.md") == first_write
        written = [call.writes for call in reading.tool_calls() if call.writes]
        assert written == [("work/research-teammates.md",)] * 4  # Write, then 3 Edits


def _entry(kind: str, content: Any, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": kind, "content": content}
    if "msg" in extra:
        message["id"] = extra.pop("msg")
    return {
        "type": kind,
        "uuid": extra.pop("uuid", "u"),
        "parentUuid": None,
        "isSidechain": extra.pop("side", False),
        "cwd": extra.pop("cwd", "/home/me/repo"),
        "sessionId": "s",
        "message": message,
        **extra,
    }


def _use(use_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": use_id, "name": name, "input": arguments}


def _result(use_id: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": use_id, "content": content, **extra}


class TestHandBuilt:
    def test_sidechain_entries_skipped_in_a_main_file(self, write_log: WriteLog) -> None:
        log = write_log(
            [
                _entry("user", "do it"),
                _entry("assistant", [_use("1", "Task", prompt="help")], msg="m1"),
                _entry("user", "sub prompt", side=True),
                _entry(
                    "assistant",
                    [_use("2", "Write", file_path="/home/me/repo/sub.txt")],
                    msg="s1",
                    side=True,
                ),
                _entry("user", [_result("2", "ok")], side=True),
                _entry("assistant", [{"type": "text", "text": "sub done"}], msg="s2", side=True),
                _entry("user", [_result("1", "the subagent said done")]),
                _entry("assistant", [{"type": "text", "text": "all done"}], msg="m2"),
            ]
        )
        reading = ClaudeCodeFormat().read([log], None)
        assert [call.name for call in reading.tool_calls()] == ["Task"]
        assert reading.final_response() == "all done"

    def test_one_message_over_several_entries(self, write_log: WriteLog) -> None:
        log = write_log(
            [
                _entry("user", "go"),
                _entry("assistant", [{"type": "text", "text": "First I look."}], msg="m1"),
                _entry("assistant", [_use("a", "Read", file_path="src/x.py")], msg="m1"),
                _entry("assistant", [_use("b", "Read", file_path="src/y.py")], msg="m1"),
                _entry("user", [_result("b", [{"type": "text", "text": "Y"}])]),
                _entry("user", [_result("a", "X", is_error=False)]),
                _entry("assistant", [{"type": "text", "text": "Part one."}], msg="m2"),
                _entry("assistant", [{"type": "thinking", "thinking": "hm"}], msg="m2"),
                _entry("assistant", [{"type": "text", "text": "Part two."}], msg="m2"),
            ]
        )
        reading = ClaudeCodeFormat().read([log], None)
        calls = reading.tool_calls()
        assert [(call.reads, call.result, call.failed) for call in calls] == [
            (("src/x.py",), "X", False),
            (("src/y.py",), "Y", False),
        ]
        assert reading.final_response() == "Part one.\nPart two."

    def test_is_error_absent_is_success_and_true_is_failure(self, write_log: WriteLog) -> None:
        log = write_log(
            [
                _entry("assistant", [_use("a", "Bash", command="true")], msg="m"),
                _entry("assistant", [_use("b", "Bash", command="false")], msg="m"),
                _entry("assistant", [_use("c", "Bash", command="sleep 9")], msg="m"),
                _entry("user", [_result("a", "")]),
                _entry("user", [_result("b", "Exit code 1", is_error=True)]),
            ]
        )
        calls = ClaudeCodeFormat().read([log], None).tool_calls()
        assert [(call.result, call.failed) for call in calls] == [
            ("", False),
            ("Exit code 1", True),
            (None, True),
        ]

    def test_write_edit_multiedit_are_writes(self, write_log: WriteLog) -> None:
        log = write_log(
            [
                _entry(
                    "assistant",
                    [_use("1", "Write", file_path="/home/me/repo/a.py", content="x")],
                    msg="m",
                ),
                _entry(
                    "assistant",
                    [
                        _use(
                            "2",
                            "Edit",
                            file_path="/home/me/repo/b.py",
                            old_string="a",
                            new_string="b",
                        )
                    ],
                    msg="m",
                ),
                _entry(
                    "assistant",
                    [
                        _use(
                            "3",
                            "MultiEdit",
                            file_path="c.py",
                            edits=[{"old_string": "a", "new_string": "b"}],
                        )
                    ],
                    msg="m",
                ),
                _entry("assistant", [_use("4", "Read", file_path="/etc/hosts")], msg="m"),
                _entry("user", [_result(key, "ok") for key in "1234"]),
            ]
        )
        reading = ClaudeCodeFormat().read([log], None)
        assert [call.writes for call in reading.tool_calls()] == [
            ("a.py",),
            ("b.py",),
            ("c.py",),
            (),
        ]
        assert reading.tool_calls()[3].reads == ("/etc/hosts",)
        assert reading.first_write("c.py") == 2

    def test_skill_call_and_its_meta_body(self, write_log: WriteLog) -> None:
        body = "Base directory for this skill: /home/me/.claude/skills/review\n\n# Review\n..."
        log = write_log(
            [
                _entry("user", "review this"),
                _entry("assistant", [_use("s", "Skill", skill="review")], msg="m"),
                _entry("user", [_result("s", "Launching skill: review")]),
                _entry("user", [{"type": "text", "text": body}], isMeta=True),
            ]
        )
        reading = ClaudeCodeFormat().read([log], None)
        [call] = reading.tool_calls()
        assert call.reads == ("/home/me/.claude/skills/review/SKILL.md",)
        assert reading.skills_expanded() == frozenset()

    def test_skill_body_with_no_call_arrived_expanded(self, write_log: WriteLog) -> None:
        body = "Base directory for this skill: /home/me/repo/.claude/skills/deploy\n\n# Deploy"
        log = write_log(
            [
                _entry("user", "<command-name>/deploy</command-name>"),
                _entry("user", [{"type": "text", "text": body}], isMeta=True),
                _entry("assistant", [{"type": "text", "text": "deployed"}], msg="m"),
            ]
        )
        reading = ClaudeCodeFormat().read([log], None)
        assert reading.skills_expanded() == frozenset({"deploy"})
        assert reading.tool_calls() == []

    def test_unknown_entries_and_broken_lines_counted(self, write_log: WriteLog) -> None:
        log = write_log(
            [
                _entry("user", "go"),
                {"type": "summary", "summary": "x", "leafUuid": "u"},
                {"type": "hologram", "uuid": "q"},
                "{{{",
                _entry("assistant", [_use("1", "Read", file_path="a")], msg="m"),
                '{"type": "user", "message": {"role": "user", "content": [{"type": "tool_res',
            ]
        )
        reading = ClaudeCodeFormat().read([log], None)
        assert [call.failed for call in reading.tool_calls()] == [True]
        assert reading.skipped == 3

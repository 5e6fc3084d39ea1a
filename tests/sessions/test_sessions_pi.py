"""pi: the real v1 log, and hand-built v3 trees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sessionlogs import (
    FIXTURES,
    WriteLog,
    pi_assistant,
    pi_call,
    pi_entry,
    pi_header,
    pi_result,
    pi_text,
    pi_user,
)
from trysquare.sessions import SessionFormat, open_session
from trysquare.sessions.pi import PiFormat

pytestmark = pytest.mark.fast  # the inner loop: `uv run pytest -m fast -n 0`

LARGE = FIXTURES / "pi" / "large-session.jsonl"


def _independent_pi_counts(path: Path) -> dict[str, object]:
    """Counted straight from the JSON, without the reader: v1 has no branches."""
    calls: list[dict] = []
    results: dict[str, bool] = {}
    last_text = None
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        if entry.get("type") != "message":
            continue
        message = entry["message"]
        if message["role"] == "assistant":
            calls += [block for block in message["content"] if block["type"] == "toolCall"]
            texts = [block["text"] for block in message["content"] if block["type"] == "text"]
            if texts:
                last_text = "\n".join(texts)
        elif message["role"] == "toolResult":
            results[message["toolCallId"]] = message["isError"]
    return {
        "names": [call["name"] for call in calls],
        "missing": sum(call["id"] not in results for call in calls),
        "errors": sum(results.get(call["id"], False) for call in calls),
        "last_text": last_text,
        "edits": [call["arguments"]["path"] for call in calls if call["name"] == "edit"],
    }


def _call_ids(path: Path) -> list[str]:
    ids = []
    for line in path.read_text(encoding="utf-8").splitlines():
        message = json.loads(line).get("message", {})
        if message.get("role") == "assistant":
            ids += [block["id"] for block in message["content"] if block["type"] == "toolCall"]
    return ids


class TestRealV1Log:
    def test_every_call_in_order(self, formats: dict[str, SessionFormat]) -> None:
        expected = _independent_pi_counts(LARGE)
        calls = open_session(LARGE, formats=formats).tool_calls()
        assert [call.name for call in calls] == expected["names"]
        # By hand (python over the file): 391 toolCall blocks — bash 192, edit 146,
        # read 50, write 3.
        assert len(calls) == 391
        assert [call.index for call in calls] == list(range(391))

    def test_missing_and_failed_results(self, formats: dict[str, SessionFormat]) -> None:
        expected = _independent_pi_counts(LARGE)
        calls = open_session(LARGE, formats=formats).tool_calls()
        # 18 calls never got a result (aborted turns), 19 results have isError.
        assert expected["missing"] == 18 and expected["errors"] == 19
        assert sum(call.result is None for call in calls) == 18
        assert sum(call.failed for call in calls) == 18 + 19
        assert all(call.failed for call in calls if call.result is None)

    def test_results_read_back_whole(self, formats: dict[str, SessionFormat]) -> None:
        texts: dict[str, str] = {}
        for line in LARGE.read_text(encoding="utf-8").splitlines():
            message = json.loads(line).get("message", {})
            if message.get("role") == "toolResult":
                parts = [block["text"] for block in message["content"] if block["type"] == "text"]
                texts[message["toolCallId"]] = "\n".join(parts)
        calls = open_session(LARGE, formats=formats).tool_calls()
        assert [call.result for call in calls] == [texts.get(i) for i in _call_ids(LARGE)]
        assert max(len(text) for text in texts.values()) > 10_000  # long ones are read back

    def test_arguments_read_back_whole(self, formats: dict[str, SessionFormat]) -> None:
        sent = []
        for line in LARGE.read_text(encoding="utf-8").splitlines():
            message = json.loads(line).get("message", {})
            if message.get("role") == "assistant":
                sent += [b["arguments"] for b in message["content"] if b["type"] == "toolCall"]
        calls = open_session(LARGE, formats=formats).tool_calls()
        assert [call.arguments for call in calls] == sent
        assert max(len(json.dumps(arguments)) for arguments in sent) > 5_000

    def test_paths_made_relative_to_the_header_cwd(self, formats: dict[str, SessionFormat]) -> None:
        calls = open_session(LARGE, formats=formats).tool_calls()
        first_read = next(call for call in calls if call.name == "read")
        assert first_read.reads == ("packages/coding-agent/docs/theme.md",)
        edits = [call.writes[0] for call in calls if call.name == "edit"]
        # Edits name paths relative to /Users/badlogic/workspaces/pi-mono, absolute
        # under it, or under "~" (the agent's home, read from the cwd: a theme file
        # outside the repo, which stays absolute).
        prefix = "/Users/badlogic/workspaces/pi-mono/"
        raw = _independent_pi_counts(LARGE)["edits"]
        expected = [
            "/Users/badlogic" + path[1:] if path.startswith("~/") else path.removeprefix(prefix)
            for path in raw
        ]
        assert edits == expected
        assert "/Users/badlogic/.pi/agent/themes/nord.json" in edits

    def test_final_response_and_nothing_skipped(self, formats: dict[str, SessionFormat]) -> None:
        reading = open_session(LARGE, formats=formats)
        assert reading.final_response() == _independent_pi_counts(LARGE)["last_text"]
        assert reading.final_response().startswith("Oh wait, these errors look like")
        assert reading.skipped == 0
        assert reading.skills_expanded() == frozenset()


class TestV3Tree:
    def test_only_the_active_branch_counts(self, write_log: WriteLog) -> None:
        log = write_log(
            [
                pi_header(),
                pi_entry("a", None, pi_user("fix it")),
                pi_entry("b", "a", pi_assistant(pi_call("c1", "read", path="src/a.py"))),
                pi_entry("c", "b", pi_result("c1", "print(1)")),
                # the abandoned branch: edits src/dead.py
                pi_entry(
                    "d",
                    "c",
                    pi_assistant(
                        pi_call("c2", "edit", path="src/dead.py", oldText="a", newText="b")
                    ),
                ),
                pi_entry("e", "d", pi_result("c2", "ok", name="edit")),
                pi_entry("f", "e", pi_assistant(pi_text("dead end"), stop="stop")),
                # the user went back to "c" and the agent wrote src/live.py instead
                pi_entry(
                    "g", "c", pi_assistant(pi_call("c3", "write", path="src/live.py", content="x"))
                ),
                pi_entry("h", "g", pi_result("c3", "written", name="write")),
                pi_entry("i", "h", pi_assistant(pi_text("done on the live branch"), stop="stop")),
            ]
        )
        reading = PiFormat().read([log], None)
        calls = reading.tool_calls()
        assert [call.name for call in calls] == ["read", "write"]
        assert [call.index for call in calls] == [0, 1]
        assert calls[1].writes == ("src/live.py",)
        assert reading.first_write("src/dead.py") is None
        assert reading.first_write("src/live.py") == 1
        assert reading.final_response() == "done on the live branch"

    def test_the_last_entry_picks_the_branch_even_when_it_is_the_older_one(
        self, write_log: WriteLog
    ) -> None:
        log = write_log(
            [
                pi_header(),
                pi_entry("a", None, pi_user("go")),
                pi_entry("b", "a", pi_assistant(pi_call("x", "bash", command="ls"))),
                pi_entry("c", "a", pi_assistant(pi_call("y", "bash", command="pwd"))),
                pi_entry("d", "b", pi_result("x", "files", name="bash")),
                {
                    "type": "label",
                    "id": "e",
                    "parentId": "d",
                    "timestamp": "t",
                    "targetId": "a",
                    "label": "x",
                },
            ]
        )
        calls = PiFormat().read([log], None).tool_calls()
        assert [call.arguments["command"] for call in calls] == ["ls"]
        assert calls[0].result == "files" and not calls[0].failed

    def test_results_paired_by_id_out_of_order_and_missing(self, write_log: WriteLog) -> None:
        log = write_log(
            [
                pi_header(),
                pi_entry("a", None, pi_user("go")),
                pi_entry(
                    "b",
                    "a",
                    pi_assistant(
                        pi_call("1", "read", path="a.txt"),
                        pi_call("2", "read", path="b.txt"),
                        pi_call("3", "bash", command="false"),
                    ),
                ),
                pi_entry(
                    "c", "b", pi_result("3", "Command exited with code 1", error=True, name="bash")
                ),
                pi_entry("d", "c", pi_result("1", "A")),
                pi_entry(
                    "e",
                    "d",
                    pi_assistant(
                        pi_call(
                            "4", "edit", path="a.txt", edits=[{"oldText": "A", "newText": "B"}]
                        ),
                        stop="aborted",
                    ),
                ),
            ]
        )
        calls = PiFormat().read([log], None).tool_calls()
        assert [(call.result, call.failed) for call in calls] == [
            ("A", False),
            (None, True),
            ("Command exited with code 1", True),
            (None, True),
        ]
        assert calls[3].writes == ("a.txt",)  # the newer edit shape counts as a write

    def test_skill_expanded_in_the_prompt(self, write_log: WriteLog) -> None:
        prompt = (
            'Use this.\n<skill name="pdf-tools" location="/home/u/.pi/agent/skills/pdf-tools/SKILL.md">\n'
            "# PDF tools\nDo things.\n</skill>\nNow convert the file."
        )
        log = write_log(
            [
                pi_header(),
                pi_entry("a", None, pi_user(prompt)),
                pi_entry("b", "a", pi_assistant(pi_text("converted"), stop="stop")),
            ]
        )
        reading = PiFormat().read([log], None)
        assert reading.skills_expanded() == frozenset({"pdf-tools"})
        assert reading.tool_calls() == []

    def test_skill_expanded_on_a_dead_branch_does_not_count(self, write_log: WriteLog) -> None:
        log = write_log(
            [
                pi_header(),
                pi_entry("a", None, pi_user("hello")),
                pi_entry("b", "a", pi_user('<skill name="gone" location="/x/SKILL.md">x</skill>')),
                pi_entry("c", "a", pi_user("plain")),
            ]
        )
        assert PiFormat().read([log], None).skills_expanded() == frozenset()

    def test_a_read_of_a_skill_file_is_recognisable(self, write_log: WriteLog) -> None:
        log = write_log(
            [
                pi_header(cwd="/home/u/work/repo"),
                pi_entry("a", None, pi_user("go")),
                pi_entry(
                    "b",
                    "a",
                    pi_assistant(
                        pi_call("1", "read", path="~/.pi/agent/skills/pdf-tools/SKILL.md"),
                        pi_call("2", "read", path="@skills/local/SKILL.md"),
                        pi_call("3", "read", path="/home/u/work/repo/README.md"),
                        pi_call("4", "bash", command="cat skills/other/SKILL.md | head -n 3"),
                    ),
                ),
                pi_entry("c", "b", pi_result("1", "body")),
                pi_entry("d", "c", pi_result("2", "body")),
                pi_entry("e", "d", pi_result("3", "readme")),
                pi_entry("f", "e", pi_result("4", "body", name="bash")),
            ]
        )
        calls = PiFormat().read([log], None).tool_calls()
        assert [call.reads for call in calls] == [
            ("/home/u/.pi/agent/skills/pdf-tools/SKILL.md",),
            ("skills/local/SKILL.md",),
            ("README.md",),
            ("skills/other/SKILL.md",),
        ]
        reads_a_skill = lambda call: call.read_matches("**/SKILL.md")
        assert [reads_a_skill(call) for call in calls] == [True, True, False, True]
        opened = {call for call in calls if not call.failed and reads_a_skill(call)}
        assert len(opened) == 3

    def test_version_2_is_a_tree_too(self, write_log: WriteLog) -> None:
        log = write_log(
            [
                pi_header(version=2),
                pi_entry("a", None, pi_user("go")),
                pi_entry("b", "a", pi_assistant(pi_call("1", "bash", command="ls"))),
                pi_entry("c", "a", pi_assistant(pi_text("nothing to do"), stop="stop")),
            ]
        )
        reading = PiFormat().read([log], None)
        assert reading.tool_calls() == []
        assert reading.final_response() == "nothing to do"

    def test_entries_written_in_another_key_order_still_form_the_tree(
        self, write_log: WriteLog
    ) -> None:
        # As trysquare.testing.builders writes them: id first, then the type.
        entries = [
            {"id": "a", "parentId": None, "type": "message", "message": pi_user("go")},
            {
                "id": "b",
                "parentId": "a",
                "type": "message",
                "message": pi_assistant(pi_call("1", "write", path="x.txt")),
            },
            {
                "id": "c",
                "parentId": "a",
                "type": "message",
                "message": pi_assistant(pi_call("2", "write", path="y.txt")),
            },
        ]
        calls = PiFormat().read([write_log([pi_header(), *entries])], None).tool_calls()
        assert [call.writes for call in calls] == [("y.txt",)]


class TestBrokenLines:
    def test_malformed_unknown_and_truncated_are_skipped_and_counted(
        self, write_log: WriteLog
    ) -> None:
        entries = [
            pi_header(),
            pi_entry("a", None, pi_user("go")),
            "{not json at all",
            {"type": "brand_new_entry", "id": "z", "parentId": "a", "timestamp": "t"},
            pi_entry("b", "z", pi_assistant(pi_call("1", "read", path="a.txt"))),
            pi_entry("c", "b", pi_result("1", "A")),
        ]
        log = write_log(entries)
        # and a last line cut off mid-write, whose head is intact
        truncated = json.dumps(
            pi_entry("d", "c", pi_assistant(pi_call("2", "write", path="b.txt")))
        )
        with log.open("a", encoding="utf-8") as stream:
            stream.write(truncated[: len(truncated) // 2])
        reading = PiFormat().read([log], None)
        calls = reading.tool_calls()
        assert [(call.name, call.result) for call in calls] == [("read", "A")]
        assert reading.skipped == 3

    def test_v1_broken_lines_are_counted(self, write_log: WriteLog) -> None:
        log = write_log(
            [
                {"type": "session", "id": "s", "timestamp": "t", "cwd": "/r"},
                {"type": "message", "message": pi_assistant(pi_call("1", "read", path="/r/a"))},
                "[1, 2]",
                {"type": "mystery"},
                '{"type": "message", "message": {"role": "assis',
            ]
        )
        reading = PiFormat().read([log], None)
        assert [call.reads for call in reading.tool_calls()] == [("a",)]
        assert reading.skipped == 3


def test_nothing_is_read_before_a_question(tmp_path: Path, write_log: WriteLog) -> None:
    log = write_log([pi_header(), pi_entry("a", None, pi_user("go"))])
    reading = PiFormat().read([log], None)
    log.unlink()  # a reading that had parsed eagerly would not notice
    with pytest.raises(FileNotFoundError):
        reading.tool_calls()

"""Codex CLI rollouts, hand-built in the shapes Codex writes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sessionlogs import WriteLog
from trysquare.sessions.codex import CodexFormat

pytestmark = pytest.mark.fast  # the inner loop: `uv run pytest -m fast -n 0`

CWD = "/home/me/repo"


def _line(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2025-12-01T00:00:00Z", "type": kind, "payload": payload}


def _meta(cwd: str = CWD) -> dict[str, Any]:
    return _line(
        "session_meta", {"id": "r", "timestamp": "t", "cwd": cwd, "originator": "codex_cli_rs"}
    )


def _item(**payload: Any) -> dict[str, Any]:
    return _line("response_item", payload)


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return _item(type="function_call", name=name, arguments=json.dumps(arguments), call_id=call_id)


def _output(call_id: str, output: str) -> dict[str, Any]:
    return _item(type="function_call_output", call_id=call_id, output=output)


PATCH = """*** Begin Patch
*** Add File: src/new.py
+print("new")
*** Update File: src/old.py
@@ def f():
-    return 1
+    return 2
*** Update File: src/name.py
*** Move to: src/renamed.py
@@
-a
+b
*** Delete File: src/gone.py
*** End Patch"""


def test_function_calls_paired_with_outputs(write_log: WriteLog) -> None:
    log = write_log(
        [
            _meta(),
            _line("turn_context", {"cwd": CWD, "model": "gpt-5-codex"}),
            _item(type="message", role="user", content=[{"type": "input_text", "text": "fix it"}]),
            _call("c1", "shell", {"command": ["bash", "-lc", "cat README.md"], "workdir": CWD}),
            _call("c2", "shell_command", {"command": "sed -n '1,40p' src/app.py", "workdir": CWD}),
            _call("c3", "shell", {"command": ["bash", "-lc", "false"]}),
            _output("c2", "Exit code: 0\nWall time: 0 seconds\nOutput:\nimport os"),
            _output(
                "c1",
                json.dumps(
                    {"output": "# readme", "metadata": {"exit_code": 0, "duration_seconds": 0.1}}
                ),
            ),
            _output(
                "c3",
                json.dumps({"output": "", "metadata": {"exit_code": 1, "duration_seconds": 0.1}}),
            ),
            _item(type="reasoning", summary=[], encrypted_content="..."),
            _item(
                type="message",
                role="assistant",
                content=[{"type": "output_text", "text": "Fixed."}],
            ),
            _line("event_msg", {"type": "agent_message", "message": "Fixed."}),
        ]
    )
    reading = CodexFormat().read([log], None)
    calls = reading.tool_calls()
    assert [(call.name, call.result, call.failed) for call in calls] == [
        ("shell", "# readme", False),
        ("shell_command", "Exit code: 0\nWall time: 0 seconds\nOutput:\nimport os", False),
        ("shell", "", True),
    ]
    assert calls[0].arguments == {"command": ["bash", "-lc", "cat README.md"], "workdir": CWD}
    assert [call.reads for call in calls] == [("README.md",), ("src/app.py",), ()]
    assert reading.final_response() == "Fixed."
    assert reading.skipped == 0


def test_apply_patch_custom_form(write_log: WriteLog) -> None:
    log = write_log(
        [
            _meta(),
            _item(
                type="custom_tool_call",
                status="completed",
                call_id="p1",
                name="apply_patch",
                input=PATCH,
            ),
            _item(
                type="custom_tool_call_output",
                call_id="p1",
                output=json.dumps(
                    {
                        "output": "Success. Updated the following files:\nA src/new.py\n",
                        "metadata": {"exit_code": 0},
                    }
                ),
            ),
        ]
    )
    reading = CodexFormat().read([log], None)
    [call] = reading.tool_calls()
    assert call.writes == (
        "src/new.py",
        "src/old.py",
        "src/name.py",
        "src/renamed.py",
        "src/gone.py",
    )
    assert call.arguments == {"input": PATCH}
    assert not call.failed and call.result.startswith("Success.")
    assert reading.first_write("src/gone.py") == 0


def test_apply_patch_function_form_and_through_the_shell(write_log: WriteLog) -> None:
    log = write_log(
        [
            _meta(),
            _call("p1", "apply_patch", {"input": PATCH.replace("src/", "/home/me/repo/lib/")}),
            _call(
                "p2",
                "shell",
                {
                    "command": [
                        "apply_patch",
                        "*** Begin Patch\n*** Add File: b.txt\n+b\n*** End Patch",
                    ]
                },
            ),
            _call(
                "p3",
                "shell",
                {
                    "command": [
                        "bash",
                        "-lc",
                        "apply_patch <<'EOF'\n*** Begin Patch\n*** Delete File: c.txt\n*** End Patch\nEOF",
                    ]
                },
            ),
            _output("p1", "Done!"),
            _output("p2", "Done!"),
            _line("event_msg", {"type": "patch_apply_end", "call_id": "p3", "success": False}),
            _output("p3", "Done!"),
        ]
    )
    calls = CodexFormat().read([log], None).tool_calls()
    assert calls[0].writes == (
        "lib/new.py",
        "lib/old.py",
        "lib/name.py",
        "lib/renamed.py",
        "lib/gone.py",
    )
    assert calls[1].writes == ("b.txt",)
    assert calls[2].writes == ("c.txt",)
    assert [call.failed for call in calls] == [False, False, True]


def test_exec_end_event_marks_a_failure(write_log: WriteLog) -> None:
    log = write_log(
        [
            _meta(),
            _call("x", "shell", {"command": ["pytest"]}),
            _line("event_msg", {"type": "exec_command_end", "call_id": "x", "exit_code": 2}),
            _output("x", "collected 0 items"),
            _call("y", "shell", {"command": ["ls"]}),
        ]
    )
    calls = CodexFormat().read([log], None).tool_calls()
    assert [(call.failed, call.result) for call in calls] == [
        (True, "collected 0 items"),
        (True, None),
    ]


def test_skill_in_a_user_message_and_broken_lines(write_log: WriteLog) -> None:
    log = write_log(
        [
            _meta(),
            _item(
                type="message",
                role="user",
                content=[
                    {
                        "type": "input_text",
                        "text": '<skill name="lint" location="/s/lint/SKILL.md">x</skill>',
                    }
                ],
            ),
            _line("mystery_line", {"x": 1}),
            _item(type="hologram"),
            "not json",
            '{"timestamp": "t", "type": "response_item", "payload": {"type": "function_ca',
        ]
    )
    reading = CodexFormat().read([log], None)
    assert reading.skills_expanded() == frozenset({"lint"})
    assert reading.skipped == 4


def test_older_rollout_without_payload_wrappers(write_log: WriteLog) -> None:
    log = write_log(
        [
            {"id": "r", "timestamp": "t", "instructions": None},
            {
                "type": "message",
                "role": "user",
                "content": [
                    {
                        "type": "input_text",
                        "text": "<environment_context>\n  <cwd>/old/repo</cwd>\n</environment_context>",
                    }
                ],
            },
            {"record_type": "state"},
            {
                "type": "function_call",
                "name": "shell",
                "arguments": json.dumps({"command": ["cat", "/old/repo/a.md"]}),
                "call_id": "1",
            },
            {
                "type": "function_call_output",
                "call_id": "1",
                "output": json.dumps({"output": "A", "metadata": {"exit_code": 0}}),
            },
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "read it"}],
            },
        ]
    )
    assert CodexFormat().sniff([json.loads(line) for line in log.read_text().splitlines()[:5]])
    reading = CodexFormat().read([log], None)
    [call] = reading.tool_calls()
    assert (call.reads, call.result, call.failed) == (("a.md",), "A", False)
    assert reading.final_response() == "read it"


def test_a_long_output_is_read_back_from_the_log(write_log: WriteLog) -> None:
    long_text = "line of output\n" * 5000
    log = write_log(
        [
            _meta(),
            _call("a", "shell", {"command": ["make"]}),
            _call("b", "shell", {"command": ["make", "test"]}),
            _output("b", json.dumps({"output": long_text, "metadata": {"exit_code": 0}})),
            _output("a", long_text + "tail"),
        ]
    )
    calls = CodexFormat().read([log], None).tool_calls()
    assert [call.result for call in calls] == [long_text + "tail", long_text]
    assert calls[0] == CodexFormat().read([log], None).tool_calls()[0]


def test_a_large_patch_is_read_back_from_the_log(write_log: WriteLog) -> None:
    body = "".join(f"+line {number}\n" for number in range(2000))
    patch = f"*** Begin Patch\n*** Add File: big.txt\n{body}*** End Patch"
    log = write_log(
        [
            _meta(),
            _call("f", "apply_patch", {"input": patch}),
            _item(type="custom_tool_call", call_id="c", name="apply_patch", input=patch),
        ]
    )
    calls = CodexFormat().read([log], None).tool_calls()
    assert [call.arguments for call in calls] == [{"input": patch}, {"input": patch}]
    assert [call.writes for call in calls] == [("big.txt",), ("big.txt",)]

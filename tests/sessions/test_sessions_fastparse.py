"""The readers parse lines with msgspec; what they answer is what a plain ``json.loads`` gives.

Each reading is made twice: as shipped, and with the fast parser replaced by
``json.loads`` (the straightforward parse). The two must agree on everything a
metric can ask — on the real logs and on hostile lines msgspec refuses (and hands
to ``json.loads``) or reads itself.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pytest
from sessionlogs import FIXTURES, FORMATS, pi_assistant, pi_call, session_entries
from trysquare.assay import Unjudged
from trysquare.sessions import _json, base, open_session
from trysquare.sessions.builtin import builtin_formats

# Marked `fast` one by one: the 50 MB line is not for the inner loop.


_LONG = 65_536


def _long_apart(value: Any, longs: list[str]) -> Any:
    """``value`` with its long strings moved to ``longs`` (compared with ``==``, not ``repr``)."""
    if isinstance(value, str) and len(value) > _LONG:
        longs.append(value)
        return f"<long string {len(longs) - 1}>"
    if isinstance(value, dict):
        return {key: _long_apart(item, longs) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_long_apart(item, longs) for item in value]
    return value


def _answers(path: Path, fmt: str) -> tuple[str, list[str]]:
    """Everything a metric can read from the session at ``path``, as comparable values.

    ``repr``, not ``==``: a NaN read from the log is never equal to itself; strings
    too long to ``repr`` cheaply are set apart and compared as they are.
    """
    reading = open_session(path, format=fmt, formats=builtin_formats())
    answers: dict[str, Any] = {
        "skipped": reading.skipped,
        "notes": reading.notes,
        "doubts": reading.doubts,
        "final": reading.final_response(),
    }
    try:
        calls = reading.tool_calls()
        answers["skills"] = sorted(reading.skills_expanded())
    except Unjudged as unjudged:
        answers["unjudged"] = unjudged.reason
        calls = []
    answers["calls"] = [
        (
            call.index,
            call.name,
            call.arguments,
            call.result,
            call.failed,
            call.reads,
            call.writes,
            call.shell,
            call.unclear,
            sorted(call.mentions),
        )
        for call in calls
    ]
    longs: list[str] = []
    return repr(_long_apart(answers, longs)), longs


Answers = tuple[str, list[str]]


def _both(path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Answers, Answers]:
    """(as shipped, with json.loads in msgspec's place) for the session at ``path``."""
    fast = _answers(path, fmt)
    with monkeypatch.context() as patched:
        patched.setattr(_json, "fast_loads", json.loads)
        plain = _answers(path, fmt)
    return fast, plain


@pytest.mark.fast
@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("pi/large-session.jsonl", "pi"),
        ("claude-code/jssoundrecorder-7acd37a8.jsonl", "claude-code"),
        ("claude-code/subagent-skill-a52886dc.jsonl", "claude-code"),
    ],
)
def test_real_logs_read_alike(name: str, fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, plain = _both(FIXTURES / name, fmt, monkeypatch)
    assert fast == plain
    assert "'calls': [[0, " in fast[0]  # the comparison covers calls, not two empty readings


# Lines msgspec refuses or reads differently from what the eye expects; each is put
# in a log of every format, where json.loads must decide what it holds.
_HOSTILE: dict[str, bytes] = {
    "invalid UTF-8": b'{"type": "message", "text": "caf\xe9 \xff"}',
    "invalid UTF-8 in a call": (
        b'{"type":"message","id":"h1","message":{"role":"assistant","content":'
        b'[{"type":"toolCall","id":"h1","name":"write","arguments":{"path":"\xff.py"}}]}}'
    ),
    "nested past any limit": b"[" * 100_000,
    "nested deep inside an entry": (
        b'{"type":"message","message":{"role":"assistant","content":'
        + b"[" * 5_000
        + b"]" * 5_000
        + b"}}"
    ),
    "nested a little": (
        b'{"type":"message","message":{"role":"assistant","content":'
        + b"[" * 200
        + b"]" * 200
        + b"}}"
    ),
    "NaN in arguments": (
        b'{"type":"message","id":"h2","message":{"role":"assistant","content":'
        b'[{"type":"toolCall","id":"h2","name":"read","arguments":{"path":"n.py","limit":NaN}}]}}'
    ),
    "Infinity and a number past float range": b'{"a": Infinity, "b": -1e999}',
    "duplicate keys": (
        b'{"type":"message","type":"message","id":"h3","message":{"role":"assistant","content":'
        b'[{"type":"toolCall","id":"h3","name":"read","name":"write","arguments":'
        b'{"path":"first.py","path":"second.py"}}]}}'
    ),
    "lone surrogate": b'{"type": "message", "message": {"role": "user", "content": "x\\ud83d"}}',
    "byte-order mark": b'\xef\xbb\xbf{"type": "message"}',
    "an integer past 64 bits": b'{"type": "message", "n": 123456789012345678901234567890}',
    "control character in a string": b'{"type": "message", "text": "a\x01b"}',
    "two objects on a line": b'{"type": "message"}{"type": "message"}',
}


@pytest.mark.fast
@pytest.mark.parametrize("fmt", FORMATS)
def test_hostile_lines_read_alike(
    fmt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [
        json.dumps(entry).encode()
        for entry in session_entries(fmt, [("edit", "a.py", True), ("text", "Done.")])
    ]
    # After the first line (the format is still told), before the final text.
    lines[1:1] = list(_HOSTILE.values())
    path = tmp_path / "session.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    fast, plain = _both(path, fmt, monkeypatch)
    assert fast == plain
    assert "a.py" in fast[0]  # the honest call around the hostile lines is read by both


def test_a_50_mb_line_reads_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = "x" * (50 * 1024 * 1024)
    entries = session_entries("pi", [("edit", "a.py", True), ("text", "Done.")])
    entries.insert(
        1,
        {
            "type": "message",
            "id": "big",
            "parentId": None,
            "message": pi_assistant(pi_call("big", "write", path="big.py", content="BIG")),
        },
    )
    entries[2]["parentId"] = "big"  # the big entry is on the active branch
    lines = [json.dumps(entry).encode() for entry in entries]
    lines[1] = lines[1].replace(b'"BIG"', b'"' + big.encode() + b'"')  # not through json.dumps
    path = tmp_path / "session.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    fast, plain = _both(path, "pi", monkeypatch)
    assert fast == plain
    assert "'big.py'" in fast[0] and fast[1] == [big]  # the 50 MB argument was read back


@pytest.mark.fast
def test_an_escaped_key_still_names_a_tool_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An agent hiding a call from a byte-level filter would spell its keys with \u
    # escapes: the parser must see the same keys the JSON means.
    entries = session_entries("pi", [("text", "Done.")])
    hidden = (
        '{"\\u0074ype":"message","id":"x1","parentId":null,"message":{"role":"assistant",'
        '"content":[{"type":"tool\\u0043all","id":"x1","n\\u0061me":"write",'
        '"arguments":{"path":"hidden.py","content":"gotcha"}}]}}'
    )
    answer = (
        '{"type":"message","id":"x2","parentId":"x1","message":{"\u0072ole":"toolResult",'
        '"toolC\u0061llId":"x1","content":[{"type":"text","text":"ok"}],"isError":false}}'
    )
    lines = [json.dumps(entry) for entry in entries]
    final = json.loads(lines[-1])
    final["parentId"] = "x2"
    lines[-1:] = [hidden, answer, json.dumps(final)]
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    reading = open_session(path, format="pi", formats=builtin_formats())
    calls = reading.tool_calls()
    assert [(call.name, call.writes) for call in calls] == [("write", ("hidden.py",))]
    assert reading.first_write("hidden.py") == 0
    fast, plain = _both(path, "pi", monkeypatch)
    assert fast == plain


@pytest.mark.fast
@pytest.mark.parametrize("raw", list(_HOSTILE.values()), ids=list(_HOSTILE))
def test_loads_is_json_loads(raw: bytes) -> None:
    def outcome(loads: Any) -> str:
        try:
            return repr(loads(raw))
        except (ValueError, RecursionError) as error:
            return type(error).__name__

    assert outcome(base.loads) == outcome(json.loads)


@pytest.mark.fast
def test_collector_comes_back_and_frozen_objects_stay_frozen(write_log: Any) -> None:
    path = write_log(session_entries("pi", [("edit", "a.py", True), ("text", "Done.")]))
    before = gc.get_freeze_count()
    reading = open_session(path, format="pi", formats=builtin_formats())
    assert len(reading.tool_calls()) == 1
    assert gc.isenabled()
    # Nothing of the reading is left frozen (the count may drop: a frozen object freed).
    assert gc.get_freeze_count() <= before
    gc.freeze()  # a host that froze its objects on purpose (say, before forking)
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        again = open_session(path, format="pi", formats=builtin_formats())
        assert len(again.tool_calls()) == 1
        # Still frozen (an unfreeze would empty it; a frozen object freed meanwhile lowers it).
        assert frozen - 1000 < gc.get_freeze_count() <= frozen and gc.isenabled()
    finally:
        gc.unfreeze()

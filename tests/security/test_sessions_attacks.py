"""The session log is the measured agent's: forged, contradictory or broken logs are named, never trusted.

Each test builds the hostile run folder itself (a real clone, a session written
line by line) and reads it the way a validator does: the context trysquare builds,
then a ``@validator`` over ``trysquare.assay``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from trysquare.assay import Assay, Metric, validator
from trysquare.context import gather_facts, preflight
from trysquare.runs import load_run
from trysquare.testing import RunBuilder

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare.sessions",)


CWD_PLACEHOLDER = "@REPO@"


def _message(entry_id: str | None, parent: str | None, message: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "message", "timestamp": "t", "message": message}
    if entry_id is not None:
        entry = {
            "type": "message",
            "id": entry_id,
            "parentId": parent,
            "timestamp": "t",
            "message": message,
        }
    return entry


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def _assistant(*blocks: dict[str, Any], stop: str = "toolUse") -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks), "stopReason": stop}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}


def _result(call_id: str, text: str = "ok", *, error: bool = False) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": "edit",
        "content": [{"type": "text", "text": text}],
        "isError": error,
    }


@pytest.fixture
def hostile_run(tmp_path: Path) -> Callable[..., Path]:
    """A run whose agent edited src/a.py, with the session log given line by line."""

    def build(lines: Iterable[Mapping[str, Any] | bytes], *, version: int = 3) -> Path:
        run = RunBuilder(tmp_path / "runs" / "r1")
        run.base({"src/a.py": "a = 1\n"})
        run.repo.write("src/a.py", "a = 2\n")
        header = {
            "type": "session",
            "version": version,
            "id": "s",
            "timestamp": "t",
            "cwd": str(run.repo.path),
        }
        with (run.path / "session.jsonl").open("wb") as stream:
            for line in (header, *lines):
                stream.write(line if isinstance(line, bytes) else json.dumps(line).encode() + b"\n")
        run.extra["session"] = "session.jsonl"
        return run.finish()

    return build


def _assay(run_dir: Path, **keys: Any) -> Assay:
    """The context a validator of this run is handed (the keys a process metric reads)."""
    run = load_run(run_dir / "run.toml")
    facts = gather_facts(run)
    context = {
        "repo": str(run.repo),
        "session": str(run.session) if run.session else None,
        "response": None if facts.response is None else str(facts.response),
        "declared": ["edited_first", "calls_ok"],
        **keys,
    }
    return Assay(context)


@validator
def _process(run: Assay) -> dict[str, Any]:
    return {
        "edited_first": lambda: run.first_write("src/a.py", default=None) == 0,
        "calls_ok": lambda: all(not call.failed for call in run.tool_calls()),
    }


def _honest_work() -> list[dict[str, Any]]:
    return [
        _message("u1", None, _user("Fix a.py")),
        _message(
            "a1", "u1", _assistant(_call("c1", "edit", path="src/a.py", oldText="1", newText="2"))
        ),
        _message("r1", "a1", _result("c1")),
        _message("a2", "r1", _assistant(_text("Fixed a.py."), stop="stop")),
    ]


def test_forged_branch_that_abandons_recorded_work_is_named(
    hostile_run: Callable[..., Path],
) -> None:
    # One appended entry whose parentId points at the first message: the active
    # branch now holds no call, and its text replaces the response.
    forged = _message("zz", "u1", _assistant(_text("I was told to do nothing."), stop="stop"))
    metrics, reasons = _process.evaluate(_assay(hostile_run([*_honest_work(), forged])))
    assert metrics["edited_first"] is False  # the active branch's rule, as documented ...
    for name in ("edited_first", "calls_ok"):  # ... but every process metric says what was left out
        assert "leaves out 3 recorded entries holding 1 tool call" in reasons[name]


def test_reused_entry_id_makes_process_metrics_unjudged(hostile_run: Callable[..., Path]) -> None:
    # A later entry reusing the edit's id silently replaced it in the tree.
    reuse = _message("a1", "u1", _assistant(_text("nothing here")))
    metrics, reasons = _process.evaluate(_assay(hostile_run([*_honest_work(), reuse])))
    assert metrics == {"edited_first": None, "calls_ok": None}
    assert "both use the entry id 'a1'" in reasons["edited_first"]
    assert "both use the entry id 'a1'" in reasons["calls_ok"]


def test_reused_entry_id_leaves_no_response(hostile_run: Callable[..., Path]) -> None:
    reuse = _message("a2", "r1", _assistant(_text("A forged summary."), stop="stop"))
    assert _assay(hostile_run([*_honest_work(), reuse])).response_or(None) is None


def test_result_placed_before_its_call_pairs(hostile_run: Callable[..., Path]) -> None:
    lines = [
        _message("u1", None, _user("Fix a.py")),
        _message("r1", "u1", _result("c1")),
        _message(
            "a1", "r1", _assistant(_call("c1", "edit", path="src/a.py", oldText="1", newText="2"))
        ),
        _message("a2", "a1", _assistant(_text("Fixed."), stop="stop")),
    ]
    metrics, reasons = _process.evaluate(_assay(hostile_run(lines)))
    assert metrics == {"edited_first": True, "calls_ok": True}
    assert reasons == {}


def test_late_error_result_does_not_flip_a_successful_call(
    hostile_run: Callable[..., Path],
) -> None:
    late = _message("r2", "a2", _result("c1", "Error: nothing matched", error=True))
    metrics, reasons = _process.evaluate(_assay(hostile_run([*_honest_work(), late])))
    # Two results that disagree: which one is true cannot be told, so nothing is scored.
    assert metrics == {"edited_first": None, "calls_ok": None}
    assert "two results that disagree" in reasons["edited_first"]


def test_tool_result_with_no_call_is_named(hostile_run: Callable[..., Path]) -> None:
    orphan = _message("r9", "a2", _result("c404", "ok"))
    metrics, reasons = _process.evaluate(_assay(hostile_run([*_honest_work(), orphan])))
    assert metrics == {"edited_first": True, "calls_ok": True}
    assert "1 tool result answers no call ('c404' on line 6)" in reasons["calls_ok"]


def test_undecodable_session_line_is_named(hostile_run: Callable[..., Path]) -> None:
    work = _honest_work()
    lines = [*work[:3], b'{"type": "message", "text": "caf\xe9"}\n', *work[3:]]
    metrics, reasons = _process.evaluate(_assay(hostile_run(lines)))
    assert metrics == {"edited_first": True, "calls_ok": True}
    assert "line 5: not UTF-8" in reasons["edited_first"]
    assert "line 5: not UTF-8" in reasons["calls_ok"]


def test_undecodable_last_message_leaves_no_response(hostile_run: Callable[..., Path]) -> None:
    work = _honest_work()
    last = (
        json.dumps(work[3])
        .replace("Fixed a.py.", "Fixed caf\\u00e9")
        .encode()
        .replace(b"\\u00e9", b"\xe9")
    )
    run_dir = hostile_run([*work[:3], last + b"\n"])
    run = _assay(run_dir)
    assert run.response_or(None) is None  # unknown, never "" (and never an older message)
    assert not (run_dir / "response.md").exists()


def test_lone_surrogate_in_the_last_text_is_written_safely(
    hostile_run: Callable[..., Path],
) -> None:
    work = _honest_work()
    work[3] = _message("a2", "r1", _assistant(_text("Done \ud83d"), stop="stop"))
    run_dir = hostile_run(work)  # json.dumps writes the lone surrogate as \ud83d
    assert b"\\ud83d" in (run_dir / "session.jsonl").read_bytes()
    assert _assay(run_dir).response == "Done \ufffd"
    assert (run_dir / "response.md").read_text(encoding="utf-8") == "Done \ufffd"


def test_nested_brackets_line_is_skipped_and_counted(hostile_run: Callable[..., Path]) -> None:
    work = _honest_work()
    run_dir = hostile_run([b"[" * 100_000 + b"\n", *work])
    preflight(load_run(run_dir / "run.toml"))  # what `check SCENARIO PATH` does: no crash
    metrics, reasons = _process.evaluate(_assay(run_dir))
    assert metrics == {"edited_first": True, "calls_ok": True}
    assert "line 2: nested too deep to read" in reasons["calls_ok"]


def test_failed_edit_is_not_the_first_write(hostile_run: Callable[..., Path]) -> None:
    lines = [
        _message("u1", None, _user("Fix a.py")),
        _message(
            "a1", "u1", _assistant(_call("c1", "edit", path="src/a.py", oldText="x", newText="y"))
        ),
        _message("r1", "a1", _result("c1", "Could not find the exact text", error=True)),
        _message(
            "a2", "r1", _assistant(_call("c2", "edit", path="src/a.py", oldText="1", newText="2"))
        ),
        _message("r2", "a2", _result("c2")),
    ]
    assert _assay(hostile_run(lines)).first_write("src/a.py") == 1


def test_shell_heredoc_write_is_the_first_write(hostile_run: Callable[..., Path]) -> None:
    lines = [
        _message("u1", None, _user("Fix a.py")),
        _message(
            "a1",
            "u1",
            _assistant(_call("c1", "bash", command="cat > src/a.py <<'EOF'\na = 2\nEOF")),
        ),
        _message("r1", "a1", _result("c1", "")),
        _message(
            "a2", "r1", _assistant(_call("c2", "edit", path="src/a.py", oldText="2", newText="3"))
        ),
        _message("r2", "a2", _result("c2")),
    ]
    assert _assay(hostile_run(lines)).first_write("src/a.py") == 0


def test_unknown_tool_write_is_unjudged(hostile_run: Callable[..., Path]) -> None:
    lines = [
        _message("u1", None, _user("Fix a.py")),
        _message("a1", "u1", _assistant(_call("c1", "subagent", task="fix src/a.py"))),
        _message("r1", "a1", _result("c1", "done")),
        _message(
            "a2", "r1", _assistant(_call("c2", "edit", path="src/a.py", oldText="2", newText="3"))
        ),
        _message("r2", "a2", _result("c2")),
    ]
    metrics, reasons = _process.evaluate(_assay(hostile_run(lines)))
    assert metrics["edited_first"] is None
    assert "call 0 (subagent)" in reasons["edited_first"]


def test_no_session_and_no_response_is_null(tmp_path: Path) -> None:
    run = RunBuilder(tmp_path / "runs" / "r1")
    run.base({"src/a.py": "a = 1\n"})
    run_dir = run.finish()
    assay = _assay(run_dir, declared=["note"])
    assert assay.response_or(None) is None

    @validator
    def note(run: Assay) -> dict[str, Any]:
        # No None check: the unknown response leaves this metric unjudged, with why.
        return {"note": lambda: len(run.response.split()) >= 5}

    assert note.evaluate(assay) == ({"note": None}, {"note": "no response was recorded"})


def test_session_notes_stay_off_metrics_that_did_not_read_it(
    hostile_run: Callable[..., Path],
) -> None:
    work = _honest_work()
    run = _assay(
        hostile_run([*work[:3], b"\xff\xfe\n", *work[3:]]), declared=["edited_first", "small"]
    )

    @validator
    def mixed(run: Assay) -> dict[str, Any]:
        return {
            "edited_first": lambda: run.first_write("src/a.py", default=None) == 0,
            "small": lambda: Metric(True, "one file"),
        }

    metrics, reasons = mixed.evaluate(run)
    assert metrics == {"edited_first": True, "small": True}
    assert "line 5: not UTF-8" in reasons["edited_first"]
    assert reasons["small"] == "one file"

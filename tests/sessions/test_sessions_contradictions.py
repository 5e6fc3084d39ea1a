"""Logs that contradict themselves, or cannot be read whole: named in ``notes``, never guessed.

The same rules in every format: results pair with their calls in any order; a
result for no call is counted and named; a second result that agrees is ignored
(the first wins) and named; two results that disagree make the history ambiguous
(``tool_calls()`` raises ``Unjudged``); a line that cannot be read is named by number.
"""

from __future__ import annotations

import pytest
from sessionlogs import (
    FORMATS,
    WriteLog,
    pi_assistant,
    pi_call,
    pi_entry,
    pi_header,
    pi_result,
    pi_text,
    pi_user,
    session_entries,
)
from trysquare.assay import Unjudged
from trysquare.sessions import SessionFormat, open_session

pytestmark = pytest.mark.fast  # the inner loop: `uv run pytest -m fast -n 0`


@pytest.fixture(params=FORMATS)
def fmt(request: pytest.FixtureRequest) -> str:
    return request.param


def _open(
    write_log: WriteLog, formats: dict[str, SessionFormat], fmt: str, entries: list
) -> object:
    return open_session(write_log(entries), format=fmt, formats=formats)


def test_a_result_before_its_call_pairs(
    write_log: WriteLog, formats: dict[str, SessionFormat], fmt: str
) -> None:
    entries = session_entries(fmt, [("edit", "a.py", True)])
    entries[-2], entries[-1] = entries[-1], entries[-2]
    if fmt == "pi":  # keep the tree's chain in file order
        entries[-2]["parentId"], entries[-1]["parentId"] = None, entries[-2]["id"]
    reading = _open(write_log, formats, fmt, entries)
    [call] = reading.tool_calls()
    assert not call.failed and call.result == "ok"
    assert reading.notes == ()


def test_a_result_for_no_call_is_named(
    write_log: WriteLog, formats: dict[str, SessionFormat], fmt: str
) -> None:
    reading = _open(
        write_log,
        formats,
        fmt,
        session_entries(fmt, [("edit", "a.py", True), ("orphan", "ghost", True)]),
    )
    assert len(reading.tool_calls()) == 1
    [note] = reading.notes
    assert "1 tool result answers no call ('ghost' on line" in note


def test_a_second_agreeing_result_is_ignored_and_named(
    write_log: WriteLog, formats: dict[str, SessionFormat], fmt: str
) -> None:
    reading = _open(
        write_log,
        formats,
        fmt,
        session_entries(fmt, [("edit", "a.py", True), ("orphan", "call0", True)]),
    )
    assert reading.first_write("a.py") == 0
    assert any("call 0 (" in note and "second result" in note for note in reading.notes)


def test_a_later_disagreeing_result_makes_the_history_ambiguous(
    write_log: WriteLog, formats: dict[str, SessionFormat], fmt: str
) -> None:
    reading = _open(
        write_log,
        formats,
        fmt,
        session_entries(fmt, [("edit", "a.py", True), ("orphan", "call0", False)]),
    )
    with pytest.raises(Unjudged, match="two results that disagree"):
        reading.tool_calls()
    with pytest.raises(Unjudged, match="two results that disagree"):
        reading.first_write("a.py")
    with pytest.raises(Unjudged, match="two results that disagree"):
        reading.skills_expanded()


def test_broken_lines_are_named_by_number(
    write_log: WriteLog, formats: dict[str, SessionFormat], fmt: str
) -> None:
    entries = session_entries(fmt, [("edit", "a.py", True), ("text", "Done.")])
    entries.insert(1, "{not json")
    entries.insert(2, "[" * 50_000)
    entries.insert(3, "42")
    reading = _open(write_log, formats, fmt, entries)
    assert reading.first_write("a.py") == 0
    assert reading.final_response() == "Done."
    [note] = reading.notes
    assert "3 lines could not be read" in note
    assert "line 2: not JSON; line 3: nested too deep to read; line 4: not a JSON object" in note


def test_a_broken_line_after_the_last_message_leaves_no_response(
    write_log: WriteLog, formats: dict[str, SessionFormat], fmt: str
) -> None:
    path = write_log(session_entries(fmt, [("text", "First."), ("edit", "a.py", True)]))
    with path.open("ab") as stream:
        stream.write(b'{"type": "message", "text": "Sec\xffond"}\n')
    reading = open_session(path, format=fmt, formats=formats)
    assert reading.final_response() is None
    assert any("no final response is read" in note for note in reading.notes)


def test_calls_sharing_an_id_are_ambiguous(
    write_log: WriteLog, formats: dict[str, SessionFormat], fmt: str
) -> None:
    entries = session_entries(fmt, [("edit", "a.py", True), ("edit", "b.py", True)])
    text = [str(entry) for entry in entries]
    assert any("call1" in line for line in text)
    renamed = [_rename(entry, "call1", "call0") for entry in entries]
    reading = _open(write_log, formats, fmt, renamed)
    with pytest.raises(Unjudged, match="share the id 'call0'"):
        reading.tool_calls()


def _rename(value: object, old: str, new: str) -> object:
    if isinstance(value, dict):
        return {key: _rename(item, old, new) for key, item in value.items()}
    if isinstance(value, list):
        return [_rename(item, old, new) for item in value]
    return new if value == old else value


class TestPiResponse:
    def test_a_really_empty_last_answer_is_empty(
        self, write_log: WriteLog, formats: dict[str, SessionFormat]
    ) -> None:
        log = write_log(
            [
                pi_header(),
                pi_entry("a", None, pi_user("go")),
                pi_entry(
                    "b",
                    "a",
                    pi_assistant(pi_text("Working on it."), pi_call("1", "read", path="a")),
                ),
                pi_entry("c", "b", pi_result("1", "x")),
                pi_entry("d", "c", pi_assistant(pi_text("  "), stop="stop")),
            ]
        )
        assert open_session(log, formats=formats).final_response() == ""

    def test_no_assistant_text_is_none(
        self, write_log: WriteLog, formats: dict[str, SessionFormat]
    ) -> None:
        log = write_log([pi_header(), pi_entry("a", None, pi_user("go"))])
        assert open_session(log, formats=formats).final_response() is None

    def test_an_aborted_turn_keeps_the_last_text(
        self, write_log: WriteLog, formats: dict[str, SessionFormat]
    ) -> None:
        log = write_log(
            [
                pi_header(),
                pi_entry("a", None, pi_user("go")),
                pi_entry("b", "a", pi_assistant(pi_text("Half done."), stop="stop")),
                pi_entry("c", "b", pi_assistant(stop="aborted")),
            ]
        )
        assert open_session(log, formats=formats).final_response() == "Half done."

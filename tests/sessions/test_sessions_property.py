"""Whatever lines a log holds, every reader finishes: bad lines are counted and named, never fatal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sessionlogs import FORMATS, session_entries
from trysquare.assay import Unjudged
from trysquare.sessions import open_session
from trysquare.sessions.builtin import builtin_formats

pytestmark = pytest.mark.fast  # the inner loop: `uv run pytest -m fast -n 0`

_HOSTILE = st.one_of(
    st.binary(max_size=40).filter(lambda raw: b"\n" not in raw),
    st.integers(1, 30_000).map(lambda depth: b"[" * depth),
    st.integers(1, 3_000).map(lambda depth: b'{"a":' * depth),
    st.text(max_size=20).map(
        lambda text: json.dumps(
            {"type": "message", "message": {"role": "assistant", "content": text}}
        ).encode()
    ),
    st.just(
        b'{"type": "message", "message": {"role": "assistant", "content": [{"type": "text", "text": "x\\ud83d"}]}}'
    ),
    st.just(b"null"),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    fmt=st.sampled_from(FORMATS),
    hostile=st.lists(st.tuples(st.integers(0, 6), _HOSTILE), max_size=4),
)
def test_any_lines_are_survived(tmp_path: Path, fmt: str, hostile: list[tuple[int, bytes]]) -> None:
    lines = [
        json.dumps(entry).encode()
        for entry in session_entries(fmt, [("edit", "a.py", True), ("text", "Done.")])
    ]
    for position, raw in hostile:
        lines.insert(
            min(position + 1, len(lines)), raw
        )  # after the first line: the format is still told
    path = tmp_path / f"{fmt}.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    reading = open_session(path, format=fmt, formats=builtin_formats())
    try:
        reading.tool_calls()
        reading.first_write("a.py")
    except Unjudged as unjudged:
        assert unjudged.reason
    response = reading.final_response()
    if response is not None:
        response.encode("utf-8")  # always writable as UTF-8
    for note in reading.notes:
        assert isinstance(note, str) and note


def _places(value: object, where: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """The key path of every string inside a parsed JSON value."""
    found: list[tuple[object, ...]] = []
    items: Any = value.items() if isinstance(value, dict) else ()
    if isinstance(value, list):
        items = enumerate(value)
    for key, item in items:
        if isinstance(item, str):
            found.append((*where, key))
        found.extend(_places(item, (*where, key)))
    return found


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_list_or_object_where_a_name_belongs_is_survived(fmt: str, tmp_path: Path) -> None:
    # A type, role, id or stop reason spelled as an array or object cannot be looked
    # up in a set or dict: each must be read as unknown, never crash the reader.
    entries = session_entries(
        fmt, [("edit", "a.py", True), ("shell", "cat b.py > c.py", True), ("text", "Done.")]
    )
    path = tmp_path / f"{fmt}.jsonl"
    tried = 0
    for number, entry in enumerate(entries):
        for place in _places(entry):
            changed = json.loads(json.dumps(entries))
            target = changed[number]
            for key in place[:-1]:
                target = target[key]
            target[place[-1]] = [1]  # unhashable, as an object would be
            path.write_text("\n".join(json.dumps(line) for line in changed) + "\n")
            reading = open_session(path, format=fmt, formats=builtin_formats())
            try:
                reading.tool_calls()
                reading.first_write("a.py")
                reading.skills_expanded()
            except Unjudged as unjudged:
                assert unjudged.reason
            assert all(isinstance(note, str) and note for note in reading.notes)
            reading.final_response()
            tried += 1
    assert tried > 20  # the log had places to spoil

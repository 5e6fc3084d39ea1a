"""The readers' shared skeleton (``trysquare.sessions._tools``): one table a format."""

from __future__ import annotations

from typing import Any

import pytest
from trysquare.sessions._paths import PathResolver
from trysquare.sessions._tools import (
    ToolTable,
    arguments_in,
    call_paths,
    logged_call_arguments,
)

pytestmark = pytest.mark.fast

TABLE = ToolTable(
    reader="probe",
    reads={"read": ("path", "file_path")},
    writes={"write": ("path", "file_path")},
    shells=frozenset({"bash"}),
    quiet=frozenset({"ls"}),
    subagents=frozenset({"Task"}),
)
PATHS = PathResolver.for_session("/work", None)


def test_the_first_key_present_names_the_path_even_when_a_later_one_is_given() -> None:
    # As arguments.get("path", arguments.get("file_path")): "path" wins whenever it is there.
    reads, writes, more = call_paths(TABLE, "read", {"file_path": "b.py", "path": "a.py"}, PATHS)
    assert (reads, writes, more) == (PATHS.resolve_all("a.py"), (), {})
    reads, _, _ = call_paths(TABLE, "read", {"file_path": "b.py"}, PATHS)
    assert reads == PATHS.resolve_all("b.py")
    _, writes, _ = call_paths(TABLE, "write", {"path": None, "file_path": "b.py"}, PATHS)
    assert writes == PATHS.resolve_all(None)


def test_a_shell_call_is_read_for_what_it_reads_and_writes() -> None:
    reads, writes, more = call_paths(TABLE, "bash", {"command": "cat a.py > b.py"}, PATHS)
    assert reads == PATHS.resolve_all(["a.py"])
    assert writes == PATHS.resolve_all(["b.py"])
    assert more["shell"] is True


@pytest.mark.parametrize(
    ("name", "unclear"),
    [
        ("ls", None),
        ("Task", "'Task' runs a subagent, whose edits are not this log's calls"),
        ("paint", "'paint' is a tool the probe reader does not know"),
    ],
)
def test_quiet_subagent_and_unknown_tools(name: str, unclear: str | None) -> None:
    reads, writes, more = call_paths(TABLE, name, {"path": "a.py"}, PATHS)
    assert (reads, writes, more.get("unclear")) == ((), (), unclear)


def test_arguments_come_out_of_the_block_by_the_formats_key() -> None:
    assert arguments_in({"input": {"a": 1}}, "input") == {"a": 1}
    assert arguments_in({"input": "raw"}, "input") == {"input": "raw"}
    assert arguments_in({}, "arguments") == {}
    entry: dict[str, Any] = {
        "message": {
            "content": [
                {"type": "text", "id": "c1", "input": {"no": 1}},
                {"type": "tool_use", "id": "c2", "input": {"no": 2}},
                {"type": "tool_use", "id": "c1", "input": {"yes": 1}},
            ]
        }
    }
    read_back = logged_call_arguments("tool_use", "input")
    assert read_back(entry, "c1") == {"yes": 1}
    assert read_back(entry, "c3") == {}

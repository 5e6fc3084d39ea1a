"""``trysquare.results``: what is written beside a run, and how a row of ``measures.json`` is read.

Called directly on a real run folder: the history keeps every replaced result
once, a damaged file is never read as a measurement, and a run's state follows
the rules (invalid beats pending beats valid).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trysquare import _atomic, results
from trysquare.runs import Run, discover
from trysquare.scenario import Scenario, load_scenario
from trysquare.testing import build_run

from tests.helpers import write_scenario, write_script

pytestmark = pytest.mark.fast


@pytest.fixture
def run(tmp_path: Path) -> Run:
    build_run(
        tmp_path / "exp" / "runs" / "r1", base={"a.py": "a = 1\n"}, changes={"a.py": "a = 2\n"}
    )
    (found,) = discover([tmp_path / "exp"])[0].runs
    return found


@pytest.fixture
def scenario(tmp_path: Path) -> Scenario:
    folder = tmp_path / "scn"
    write_script(folder, "score.py", "print('{}')\n")
    return load_scenario(
        write_scenario(
            folder,
            """
        [[validation]]
        name = "score"
        mode = "script"
        command = "score.py"
        metrics = ["changed", "small"]

        [[validation]]
        name = "human"
        mode = "form"
        pieces = ["diff"]
        metrics = ["clear"]
    """,
        )
    )


def document(state: str = "valid", **metrics: object) -> dict:
    return {
        "metrics": metrics,
        "reasons": {},
        "state": state,
        "error": None if state != "invalid" else "boom",
    }


def history(run: Run, name: str = "score") -> list[dict]:
    path = run.validation_dir / f"{name}.history.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_replaced_result_goes_to_the_history_once(run: Run) -> None:
    first, second = document(changed=True), document(changed=False)
    results.write_result(run, "score", first, b"first stderr")
    assert history(run) == [] and results.read_result(run, "score") == first
    results.write_result(run, "score", second, None)
    # Each history line is the replaced result as written: signed.
    signed_first, signed_second = (results.sign_result(run, "score", d) for d in (first, second))
    assert history(run) == [signed_first] and results.read_result(run, "score") == second
    # Killed after the history append, before the replacement: the retry appends nothing twice.
    results.write_result(run, "score", document(changed=None), None)
    (run.validation_dir / "score.json").write_text(json.dumps(signed_second, indent=2))
    results.write_result(run, "score", document(changed=None), None)
    assert history(run) == [signed_first, signed_second]
    assert (run.validation_dir / "score.stderr").read_bytes() == b"first stderr"


def test_a_stderr_already_recorded_is_not_written_again(run: Run) -> None:
    stderr = run.validation_dir / "score.stderr"
    results.write_result(run, "score", document(changed=True), b"same\n")
    first = stderr.stat()
    results.write_result(run, "score", document(changed=False), b"same\n")
    assert stderr.stat().st_ino == first.st_ino and stderr.read_bytes() == b"same\n"
    for different in (b"same\nand more\n", b"sam", b""):  # longer, shorter, empty: each written
        results.write_result(run, "score", document(changed=False), different)
        assert stderr.read_bytes() == different
    assert json.loads(results.result_path(run, "score").read_text())["metrics"] == {
        "changed": False
    }
    assert [entry["metrics"] for entry in history(run)] == [{"changed": True}, {"changed": False}]


@pytest.mark.parametrize("damage", ["{not json", "[1, 2]", '{"state": "maybe", "metrics": {}}'])
def test_a_damaged_result_is_never_a_measurement(run: Run, scenario: Scenario, damage: str) -> None:
    run.validation_dir.mkdir(parents=True, exist_ok=True)
    (run.validation_dir / "score.json").write_text(damage)
    assert results.read_result(run, "score") is None
    with pytest.raises(results.UnreadableResult):
        results.load_result(run, "score")
    row = results.run_row(scenario, run)
    assert row["state"] == "invalid" and row["metrics"] == {}
    assert (
        row["errors"][0]["validator"] == "score"
        and "run validate again" in row["errors"][0]["error"]
    )


def test_a_rows_state_is_invalid_then_pending_then_valid(run: Run, scenario: Scenario) -> None:
    assert results.run_row(scenario, run)["pending"] == ["changed", "clear", "small"]
    results.write_result(run, "score", document(changed=True), None)  # `small` missing
    row = results.run_row(scenario, run)
    assert row["state"] == "pending" and row["pending"] == ["clear", "small"]
    results.write_result(run, "score", document(changed=True, small=True), None)
    results.write_result(run, "human", document(clear=True), None)
    row = results.run_row(scenario, run)
    assert (row["state"], row["metrics"]) == (
        "valid",
        {"changed": True, "small": True, "clear": True},
    )
    results.write_result(run, "human", document("invalid"), None)
    row = results.run_row(scenario, run)
    assert row["state"] == "invalid" and row["errors"] == [{"validator": "human", "error": "boom"}]


def test_measures_are_ordered_by_cell_then_repetition_and_written_whole(
    tmp_path: Path, scenario: Scenario
) -> None:
    for run_id, cell, repetition in (("z", "b", 1), ("y", "a", 2), ("x", "a", 1)):
        build_run(
            tmp_path / "many" / "runs" / run_id,
            base={"a.py": "a\n"},
            cell=cell,
            repetition=repetition,
        )
    rows = results.build_measures(scenario, discover([tmp_path / "many"])[0].runs)
    assert [row["id"] for row in rows] == ["x", "y", "z"]
    path = results.write_measures(tmp_path / "many", rows)
    assert json.loads(path.read_text()) == rows


@pytest.mark.parametrize("count", [0, 1, 3])
def test_measures_streamed_are_the_bytes_of_the_whole_list(tmp_path: Path, count: int) -> None:
    """write_measures writes rows as they come, never the list: the file is what dumping
    the list at once would give (indentation, key order, non-ASCII text, nesting)."""
    rows = [
        {
            "id": f"r{i}",
            "cell": "caf\u00e9 \u2603",
            "metrics": {"m": [1, {"deep": None}], "b": True},
            "reasons": {"m": "line one\nline two"},
            "errors": [],
            "pending": [],
        }
        for i in range(count)
    ]
    handed: list[int] = []

    def one_at_a_time():
        for index, row in enumerate(rows):
            handed.append(index)
            yield row

    path = results.write_measures(tmp_path, one_at_a_time())
    assert path.read_bytes() == _atomic.encode(_atomic.dump_json(rows))
    assert handed == list(range(count))


def test_measures_rows_come_in_order_without_reading_a_run_twice(
    tmp_path: Path, scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    for run_id, cell, repetition in (("z", "b", 1), ("y", "a", 2), ("x", "a", 1)):
        build_run(
            tmp_path / "many" / "runs" / run_id,
            base={"a.py": "a\n"},
            cell=cell,
            repetition=repetition,
        )
    runs = discover([tmp_path / "many"])[0].runs
    read: list[str] = []
    real_row = results._read_row
    monkeypatch.setattr(
        results,
        "_read_row",
        lambda s, run, d, shapes: read.append(run.id) or real_row(s, run, d, shapes),
    )
    rows = results.iter_measures(scenario, runs)
    assert read == []  # nothing read before the first row is asked for
    assert next(rows)["id"] == "x" and read == ["x"]
    assert [row["id"] for row in rows] == ["y", "z"] and read == ["x", "y", "z"]


def test_a_replaced_result_goes_to_its_history_through_one_open_of_it(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The history's last line is checked and the replaced result appended through one
    descriptor (a kill between the two writes leaves that line last: not appended twice)."""
    import os

    first = {"metrics": {"m": 1}, "reasons": {}, "state": "valid", "error": None}
    results.write_result(run, "score", first, None)
    history = run.validation_dir / "score.history.jsonl"
    opened: list[str] = []
    real = _atomic.os.open

    def counting(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        opened.append(os.fspath(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(_atomic.os, "open", counting)
    results.write_result(run, "score", {**first, "metrics": {"m": 2}}, None)
    assert opened.count(history.name) == 1
    (line,) = history.read_bytes().splitlines()
    # Killed after the append, before the replacement: the same line is not appended again.
    (run.validation_dir / "score.json").write_bytes(
        _atomic.encode(_atomic.dump_json(results.sign_result(run, "score", first)))
    )
    results.write_result(run, "score", {**first, "metrics": {"m": 3}}, None)
    assert history.read_bytes().splitlines() == [line]


def test_a_stderr_kept_already_is_known_by_its_size_then_its_bytes(tmp_path: Path) -> None:
    """``Folder.holds``: a file of another size differs unread; one of the same size is
    compared byte for byte; an empty one holds an empty stderr; a FIFO is refused."""
    import os

    folder_path = tmp_path / "run" / "validation"
    folder_path.mkdir(parents=True)
    (folder_path / "s.stderr").write_bytes(b"")
    (folder_path / "t.stderr").write_bytes(b"same size")
    os.mkfifo(folder_path / "f.stderr")
    with _atomic.folder(folder_path, root=tmp_path / "run") as folder:
        assert folder.holds("s.stderr", b"")
        assert not folder.holds("s.stderr", b"x")
        assert not folder.holds("absent.stderr", b"")
        assert folder.holds("t.stderr", b"same size")
        assert not folder.holds("t.stderr", b"sane size")
        assert not folder.holds("t.stderr", b"same size!")
        with pytest.raises(_atomic.UnsafePath, match="not a regular file"):
            folder.holds("f.stderr", b"")


def test_the_signed_text_is_the_canonical_text_of_the_signed_part() -> None:
    """sign_result builds the MAC's text around the body's canonical text: it must be the
    text canonical() gives for the whole signed part, for any run and document."""
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from trysquare import _signing

    text = st.text(max_size=12)
    values = st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | text,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
        max_leaves=12,
    )

    class Whose:
        def __init__(self, id: str, cell: str, repetition: int | None) -> None:
            self.id, self.cell, self.repetition = id, cell, repetition

    @settings(max_examples=300, deadline=None)
    @given(text, text, st.none() | st.integers(), text, st.dictionaries(text, values, max_size=5))
    def check(id: str, cell: str, repetition: int | None, name: str, body: dict) -> None:  # type: ignore[type-arg]
        whose = Whose(id, cell, repetition)
        expected = _signing.canonical(results._signed_part(whose, name, body))
        assert results._signed_text(whose, name, _signing.canonical(body)) == expected

    check()


def test_a_history_s_last_line_is_read_back_from_its_end_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last complete line (a torn one after it is not a line) as splitting the whole
    file says it, read from a few kilobytes at the end of a long history."""
    import os

    from hypothesis import given, settings
    from hypothesis import strategies as st

    path = tmp_path / "h.jsonl"

    def by_splitting(data: bytes) -> bytes | None:
        complete = data.split(b"\n")[:-1]
        return complete[-1] if complete else None

    @settings(max_examples=300, deadline=None)
    @given(
        st.lists(st.binary(max_size=9000).map(lambda b: b.replace(b"\n", b"")), max_size=5),
        st.booleans(),
        st.binary(max_size=5000).map(lambda b: b.replace(b"\n", b"")),
    )
    def check(lines: list[bytes], ended: bool, torn: bytes) -> None:
        data = b"\n".join(lines) + (b"\n" if ended else b"") + torn
        path.write_bytes(data)
        fd = os.open(path, os.O_RDONLY)
        try:
            assert _atomic._last_line_of(fd, len(data)) == by_splitting(data)
        finally:
            os.close(fd)

    check()
    long = b"".join(b'{"line": %d}\n' % n for n in range(100_000))
    path.write_bytes(long)
    read: list[int] = []
    real = _atomic.os.pread
    monkeypatch.setattr(_atomic.os, "pread", lambda fd, n, at: read.append(n) or real(fd, n, at))
    with _atomic.folder(tmp_path, root=tmp_path.parent) as folder:
        assert folder.last_line(path.name) == b'{"line": 99999}'
    assert sum(read) <= 4096

"""Planning's records on disk: one nameless file, read back only as written, never left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from trysquare import _spill

pytestmark = pytest.mark.fast


def _own_entries(folder: Path) -> list[str]:
    return sorted(entry.name for entry in folder.iterdir())


@pytest.fixture
def temp(tmp_path: Path) -> Path:
    """An empty folder of the test's own, for TMPDIR (``tmp_path`` holds the test's cache)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    return folder


def test_records_come_back_as_written_and_no_name_is_made(
    temp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr("tempfile.tempdir", None)  # TMPDIR read again
    values = [None, {"run": "r1", "picture": [(1, 2, b"x")]}, "é" * 5000, list(range(100))]
    with _spill.Spill() as spill:
        numbers = [spill.keep(value) for value in values]
        # Nothing in the temporary folder, while the records are being kept.
        assert _own_entries(temp) == []
        assert [spill.load(number) for number in reversed(numbers)] == values[::-1]
    assert _own_entries(temp) == []


def test_a_record_changed_through_the_file_is_not_trusted(
    temp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr("tempfile.tempdir", None)
    with _spill.Spill() as spill:
        number = spill.keep(("a", 1))
        # What a process that reached the file could do: rewrite a record's bytes in place.
        os.pwrite(spill._fd, b"\xff", 0)
        with pytest.raises(_spill.Tampered, match=r"were changed \(record 0\)"):
            spill.load(number)


def test_the_file_has_no_name_without_o_tmpfile_either(
    temp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(os, "O_TMPFILE", raising=False)
    fd = _spill._nameless_file(str(temp))
    try:
        assert _own_entries(temp) == []
        os.write(fd, b"kept")
        assert os.pread(fd, 4, 0) == b"kept"
    finally:
        os.close(fd)


def test_a_validate_killed_outright_leaves_no_records_behind(temp: Path) -> None:
    # SIGKILL: no finally, no atexit. The records go with the last descriptor.
    planning = (
        "import os, signal\n"
        "from trysquare import _spill\n"
        "spill = _spill.Spill()\n"
        "spill.keep({'run': 'r1'})\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    killed = subprocess.run(
        [sys.executable, "-c", planning],
        env={**os.environ, "TMPDIR": str(temp)},
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL
    assert _own_entries(temp) == []

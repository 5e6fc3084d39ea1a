"""The files a context names are digested as they are, read with bare reads sized by the file."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from trysquare import context


@pytest.mark.parametrize(
    "size", [0, 1, 5, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 3 * (1 << 20) + 7]
)
def test_a_file_digest_is_the_sha256_of_its_bytes(tmp_path: Path, size: int) -> None:
    path = tmp_path / "diff.patch"
    data = os.urandom(size)
    path.write_bytes(data)
    assert context._file_digest(path) == hashlib.sha256(data).digest()


def test_a_small_file_is_digested_without_a_file_object_or_a_megabyte_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "response.md"
    path.write_text("done\n")
    asked: list[int] = []
    read = os.read

    def counted(fd: int, length: int) -> bytes:
        asked.append(length)
        return read(fd, length)

    monkeypatch.setattr(os, "read", counted)
    assert context._file_digest(path) == hashlib.sha256(b"done\n").digest()
    # Its size and one more, the end met there: no second read, no megabyte asked for.
    assert asked == [6]


def test_a_missing_file_raises_as_before(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        context._file_digest(tmp_path / "absent")

"""Atomic writes: a temporary file beside the target, then a rename.

An interrupted command never leaves half a file: readers see the old content or
the new one. Dependency-free.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

__all__ = [
    "append_line",
    "dump_json",
    "write_bytes",
    "write_json",
    "write_stream",
    "write_text",
    "write_text_if_changed",
]

# mkstemp creates files 0600; what we write should get the mode any new file gets.
_UMASK = os.umask(0)
os.umask(_UMASK)
_FILE_MODE = 0o666 & ~_UMASK


def write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically, creating its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            os.fchmod(handle.fileno(), _FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_text_if_changed(path: Path, text: str) -> None:
    """Write only when the content differs, so an unchanged file keeps its mtime."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except (OSError, UnicodeDecodeError):
        pass
    write_text(path, text)


def dump_json(value: Any) -> str:
    """The stable JSON trysquare writes: sorted keys, two-space indent, final newline."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def write_json(path: Path, value: Any) -> None:
    write_text(path, dump_json(value))


def append_line(path: Path, value: Any) -> None:
    """Append one JSON line; a single ``write`` of a whole line, so lines never interleave."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(value, sort_keys=True, ensure_ascii=False) + "\n"
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line)


def write_stream(path: Path, fill: Callable[[BinaryIO], object]) -> bool:
    """Replace ``path`` atomically with what ``fill(handle)`` writes, never held in memory.

    Like :func:`write_text_if_changed`: when the result equals the file already
    there (compared in blocks), the old file stays and keeps its mtime. Returns
    whether ``path`` was replaced.
    """
    import filecmp

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            fill(handle)
            os.fchmod(handle.fileno(), _FILE_MODE)
        if path.is_file() and not path.is_symlink() and filecmp.cmp(tmp, path, shallow=False):
            os.unlink(tmp)
            return False
        os.replace(tmp, path)
        return True
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise

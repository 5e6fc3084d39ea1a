"""Showing why a result is invalid where the user looks: its error and its stderr's last lines.

A validator's stderr is kept as ``validation/<name>.stderr`` beside the result
(it is the evidence of a failure). The progress line of an invalid result, the
JUnit XML and ``validate --format json`` all show its last lines through
:func:`stderr_tail`, read without following a symlink the agent may have
planted, and only from the file's end, however large it is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trysquare._shown import shown

__all__ = ["TAIL_LINES", "invalid_lines", "stderr_tail"]

# At most this many of the last stderr lines are shown with an invalid result.
TAIL_LINES = 10
# Read no more than this from the end of a stderr file, and show no line longer
# than LINE_CHARS: a validator that printed megabytes gets a tail, not a flood.
_TAIL_BYTES = 16384
_LINE_CHARS = 500


def stderr_tail(run_dir: Path, name: str, *, lines: int = TAIL_LINES) -> list[str]:
    """The last ``lines`` non-empty lines validator ``name`` printed on stderr for this run.

    Empty when there is no stderr file, it is empty, or it cannot be read safely.
    Lines are raw text (undecodable bytes replaced): callers escape them for
    their output (a terminal, XML, JSON).
    """
    from trysquare import _atomic

    path = Path(run_dir) / "validation" / f"{name}.stderr"
    try:
        fd = _atomic._open_read(path, Path(run_dir))
    except (OSError, ValueError):
        return []
    try:
        size = os.fstat(fd).st_size
        os.lseek(fd, max(0, size - _TAIL_BYTES), os.SEEK_SET)
        data = os.read(fd, _TAIL_BYTES)
    except OSError:
        return []
    finally:
        os.close(fd)
    text = data.decode("utf-8", errors="replace")
    # Lines end at "\n" only: the other characters str.splitlines() breaks at are the
    # validator's text, shown escaped on their line.
    kept = [line.removesuffix("\r") for line in text.split("\n") if line.strip()]
    if size > _TAIL_BYTES and kept:
        kept = kept[1:]  # the first line read may be cut in the middle
    return [_capped(line) for line in kept[-lines:]]


def _capped(line: str) -> str:
    return line if len(line) <= _LINE_CHARS else line[:_LINE_CHARS] + " …"


def invalid_lines(run_dir: Path, name: str, document: Mapping[str, Any]) -> list[str]:
    """What follows an invalid result's progress line: its stderr's last lines, indented.

    Each line is escaped for a terminal (the stderr is the validator's, but what
    it printed may quote the agent's files).
    """
    tail = stderr_tail(run_dir, name)
    if not tail:
        return []
    return [f"    stderr: {shown(line)}" for line in tail]

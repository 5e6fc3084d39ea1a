"""Whether the judge can tell the cells apart from what it is handed.

The context carries no cell name, but a piece leaks the cell when it varies
between cells while staying the same within each one: the prompt, when the
treatment is the prompt. Decided from the runs being scored, piece by piece,
by comparing file contents; said out loud rather than pretended away.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path

from trysquare.runs import Run

__all__ = ["blinding_line", "leaking_pieces"]

RESPONSE_FILE = "response.md"
DIFF_FILE = "diff.patch"


def leaking_pieces(runs: Sequence[Run], pieces: Sequence[str]) -> list[str]:
    """The pieces that identify the cell: one value per cell, not the same value in all."""
    by_cell: dict[str, list[Run]] = {}
    for run in runs:
        by_cell.setdefault(run.cell, []).append(run)
    if len(by_cell) < 2:
        return []
    leaking = []
    for piece in pieces:
        read = _READERS[piece]
        values: set[str] = set()
        for cell_runs in by_cell.values():
            seen = {_digest(read(run)) for run in cell_runs}
            if len(seen) > 1:
                break  # it varies within a cell: it cannot name the cell
            values |= seen
        else:
            if len(values) > 1:
                leaking.append(piece)
    return leaking


def blinding_line(runs: Sequence[Run], pieces: Sequence[str]) -> str:
    cells = len({run.cell for run in runs})
    leaking = leaking_pieces(runs, pieces)
    if not leaking:
        return f"judge: blind over {cells} cell{'s' if cells != 1 else ''} (pieces: {', '.join(pieces)})"
    verb = "varies" if len(leaking) == 1 else "vary"
    return (
        f"! judge is only partially blind: {', '.join(leaking)} {verb} between cells, "
        "so the judge can identify the treatment"
    )


def _digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _read(path: Path | None) -> bytes:
    if path is None:
        return b""
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _prompt(run: Run) -> bytes:
    return _read(run.prompt)


def _response(run: Run) -> bytes:
    # What the context will point at: response.md when written, else the session's last prose.
    path = run.dir / RESPONSE_FILE
    if path.exists() or run.session is None:
        return _read(path if path.exists() else None)
    from trysquare import sessions

    try:
        text = sessions.final_response(run.session, format=run.session_format, repo=run.repo)
    except Exception:  # noqa: BLE001 - an unreadable session is reported when contexts are built
        return b""
    return (text or "").encode("utf-8")


def _diff(run: Run) -> bytes:
    # Computed afresh (diff.patch may be stale or absent before validate); git writes nothing.
    from trysquare import repo
    from trysquare.errors import RepoError

    try:
        return repo.diff_patch(run.repo, run.base_commit).encode("utf-8")
    except RepoError:
        return _read(run.dir / DIFF_FILE)


_READERS: dict[str, Callable[[Run], bytes]] = {"prompt": _prompt, "response": _response, "diff": _diff}

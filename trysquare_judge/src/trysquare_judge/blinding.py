"""Whether the judge can tell the cells apart from what it is handed.

The context carries no cell name, but what is sent leaks the cell when some part
of it varies between cells while staying the same within each one: the prompt,
when the treatment is the prompt; or one file's section of the diff, when each
cell's runs carry the same file (a given file committed after the recorded
base, a harness's injected instructions) while the rest of the diff varies.
Decided from the runs being scored and from what would actually be sent —
each piece whole, and the diff file by file; a run whose piece is over the
judge's byte cap sends nothing and is left out — said out loud rather than
pretended away.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path

from trysquare import api
from trysquare.api import Run

__all__ = ["blinding_line", "leaking_pieces", "leaks"]

RESPONSE_FILE = "response.md"
DIFF_FILE = "diff.patch"


# Pieces the experimenter sets (inputs, not the agent's work): any difference between the
# cells' values is a tell, even one that varies within a cell too.
INPUTS = ("prompt",)


def leaking_pieces(
    runs: Sequence[Run], pieces: Sequence[str], *, max_piece_bytes: int | None = None
) -> list[str]:
    """What identifies the cell (see :func:`leaks`), by name."""
    return list(leaks(runs, pieces, max_piece_bytes=max_piece_bytes))


def leaks(
    runs: Sequence[Run], pieces: Sequence[str], *, max_piece_bytes: int | None = None
) -> dict[str, list[str]]:
    """What identifies the cell, each with the cells it tells apart.

    An input (the prompt) leaks when its values differ between cells in any way: a
    cell whose runs were handed a text no run of another cell was is told apart,
    even when its own runs were not all handed the same one. The agent's work (the
    response, and the diff file by file) leaks when it takes one value per cell, not
    the same in all: a piece leaks whole (``"prompt"``), or one file's section of
    the diff does (``"diff (src/probe.test.js)"``) — absent from a run's diff counts
    as a value too. Runs with a piece over ``max_piece_bytes`` send nothing and are
    left out.
    """
    sent: dict[str, list[dict[str, bytes]]] = {}
    for run in runs:
        texts = {piece: _READERS[piece](run, max_piece_bytes) for piece in pieces}
        if any(
            isinstance(t, _Oversized) or (max_piece_bytes is not None and len(t) > max_piece_bytes)
            for t in texts.values()
        ):
            continue  # unjudged for its size: nothing of it reaches the judge
        sent.setdefault(run.cell, []).append(_parts(texts))
    if len(sent) < 2:
        return {}
    names: list[str] = []
    for per_run in sent.values():
        for parts in per_run:
            names.extend(name for name in parts if name not in names)
    leaking: dict[str, list[str]] = {}
    for name in names:
        by_cell = {
            cell: frozenset(parts.get(name, b"<absent>") for parts in cell_parts)
            for cell, cell_parts in sent.items()
        }
        if name in INPUTS:
            if len(set(by_cell.values())) > 1:
                leaking[name] = _told_apart(by_cell)
        elif all(len(seen) == 1 for seen in by_cell.values()) and len(set(by_cell.values())) > 1:
            # One value per cell (a value varying within a cell cannot name it), not one for all.
            leaking[name] = _told_apart(by_cell)
    whole = [name for name in leaking if name in pieces]
    # A piece that leaks whole is named once, not again file by file.
    kept = whole + [
        name for name in leaking if name not in pieces and name.split(" ")[0] not in whole
    ]
    return {name: leaking[name] for name in kept}


def _told_apart(by_cell: dict[str, frozenset[bytes]]) -> list[str]:
    """The cells whose values are not those of every other cell (all, when each differs)."""
    counts: dict[frozenset[bytes], int] = {}
    for seen in by_cell.values():
        counts[seen] = counts.get(seen, 0) + 1
    common = max(counts.values())
    shared = [seen for seen, count in counts.items() if count == common]
    if len(shared) == 1 and common > 1:
        return sorted(cell for cell, seen in by_cell.items() if seen != shared[0])
    return sorted(by_cell)


def _parts(texts: dict[str, bytes]) -> dict[str, bytes]:
    """The digest of each piece whole, and of each file's section of the diff."""
    parts = {piece: _digest(text) for piece, text in texts.items()}
    if "diff" in texts:
        for path, section in _diff_sections(texts["diff"]).items():
            parts[f"diff ({path})"] = _digest(section)
    return parts


def _diff_sections(patch: bytes) -> dict[str, bytes]:
    """A git patch cut at each ``diff --git a/X b/Y`` line, keyed by the new path."""
    sections: dict[str, list[bytes]] = {}
    current: list[bytes] | None = None
    for line in patch.splitlines(keepends=True):
        if line.startswith(b"diff --git "):
            header = line.rstrip(b"\n")
            marker = header.rfind(b" b/")
            path = header[marker + 3 :] if marker >= 0 else header
            current = sections.setdefault(path.decode("utf-8", "replace").strip('"'), [])
        if current is not None:
            current.append(line)
    return {path: b"".join(lines) for path, lines in sections.items()}


def blinding_line(
    runs: Sequence[Run], pieces: Sequence[str], *, max_piece_bytes: int | None = None
) -> str:
    """The line ``check`` and ``validate`` print: blind, or what identifies the treatment."""
    cells = len({run.cell for run in runs})
    leaking = leaks(runs, pieces, max_piece_bytes=max_piece_bytes)
    if not leaking:
        return f"judge: blind over {cells} cell{'s' if cells != 1 else ''} (pieces: {', '.join(pieces)})"
    verb = "varies" if len(leaking) == 1 else "vary"
    told = "; ".join(f"{name} tells apart {_cells(found)}" for name, found in leaking.items())
    return (
        f"! judge is only partially blind: {', '.join(leaking)} {verb} between cells, "
        f"so the judge can identify the treatment ({told})"
    )


def _cells(cells: Sequence[str], shown: int = 4) -> str:
    named = ", ".join(f"'{cell}'" for cell in cells[:shown])
    more = f" and {len(cells) - shown} more" if len(cells) > shown else ""
    return f"cell{'s' if len(cells) != 1 else ''} {named}{more}"


def _digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


class _Oversized(bytes):
    """A piece over the byte cap, stood for by its size alone: it was never read."""


def _read(path: Path | None, cap: int | None, *, root: Path | None = None) -> bytes:
    """A piece's bytes. With ``root``, a file trysquare writes in the run folder, which the
    agent may have planted before: read through no link and only as a regular file (a
    FIFO there must not hold ``check``). The prompt and response were checked at load."""
    if path is None:
        return b""
    try:
        size = (path.stat() if root is None else path.lstat()).st_size
        if cap is not None and size > cap:
            return _Oversized()  # stat first: a 100 MB file is not read to find out
        return path.read_bytes() if root is None else api.read_bytes(path, root=root)
    except OSError:
        return b""


def _prompt(run: Run, cap: int | None) -> bytes:
    return _read(run.prompt, cap)


def _response(run: Run, cap: int | None) -> bytes:
    # What the context will point at: response.md when written, else the session's last prose.
    path = run.dir / RESPONSE_FILE
    if path.exists() or run.session is None:
        return _read(path if path.exists() else None, cap)
    try:
        text = api.final_response(run.session, format=run.session_format, repo=run.repo)
    except Exception:  # noqa: BLE001 - an unreadable session is reported when contexts are built
        return b""
    # surrogatepass: a lone surrogate in a session's prose must not crash `check`.
    return (text or "").encode("utf-8", "surrogatepass")


class _CappedSink:
    """A write-only sink that keeps at most ``cap + 1`` bytes and only counts the rest.

    A 100 MB diff is streamed through it: never held, and still known to be over the cap.
    """

    def __init__(self, cap: int | None) -> None:
        self.cap = cap
        self.kept = bytearray()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.size += len(data)
        room = len(data) if self.cap is None else self.cap + 1 - len(self.kept)
        if room > 0:
            self.kept += data[:room]
        return len(data)


def _diff(run: Run, cap: int | None) -> bytes:
    # Computed afresh (diff.patch may be stale or absent before validate); git writes
    # nothing, and the patch streams through a capped sink rather than into memory.
    from trysquare.api import RepoError

    sink = _CappedSink(cap)
    try:
        api.write_diff_patch(run.repo, run.base_commit, sink, run.excluded)  # type: ignore[arg-type]
    except RepoError:
        # The last patch trysquare wrote, if any (a link is not its file: not followed).
        return _read(run.dir / DIFF_FILE, cap, root=run.dir)
    if cap is not None and sink.size > cap:
        return _Oversized()
    return bytes(sink.kept)


_READERS: dict[str, Callable[[Run, int | None], bytes]] = {
    "prompt": _prompt,
    "response": _response,
    "diff": _diff,
}

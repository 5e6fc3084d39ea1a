"""The result-file guard: every result file of a validate is written by trysquare alone.

Before the first validator starts, each result file a validate may touch is pictured;
each one trysquare then writes is digested. After the run, a file that changed
otherwise (a validator of one run writing another run's result, where no sandbox
prevents it) is named and made invalid: a forgery's numbers never stay.
The clone itself is :mod:`trysquare.clone_guard`'s.
"""

from __future__ import annotations

import bisect
import os
from array import array
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from trysquare import _atomic
from trysquare._digests import sha256
from trysquare._shown import shown
from trysquare.runs import Run

__all__ = ["ResultWatch", "refuse_forged"]


class ResultWatch:
    """Every result file a validate may touch, as it was before the first validator
    started, and a digest of each one trysquare then wrote.

    After the run, :meth:`forged` names the files that changed otherwise (a validator
    of one run writing another run's result, where no sandbox prevents it). Kept in
    flat arrays, 72 bytes a file and 8 a run, so that 100,000 runs × validators fit: no
    path, no document, no table entry per run is held.
    """

    def __init__(self, runs: Sequence[Run], names: Sequence[str]) -> None:
        from trysquare import results

        self.runs = runs
        self.names = tuple(names)
        # Each run's place found by its folder's text in one sorted array: no table entry
        # (nor index object) per run.
        self._by_folder = array("q", sorted(range(len(runs)), key=self._folder_of))
        self._name_index = {name: index for index, name in enumerate(self.names)}
        self._before = array("q")
        for run in runs:
            for name in self.names:
                self._before.extend(_file_stat(results.result_path(run, name)))
        self._written = bytearray(32 * len(runs) * len(self.names))
        self._was_written = bytearray(len(runs) * len(self.names))
        self._ran = bytearray(len(runs) * len(self.names))

    def _folder_of(self, index: int) -> str:
        return self.runs[index].dir_text

    def _index_of(self, run: Run) -> int | None:
        """``run``'s place in ``runs`` (None: not one of them)."""
        text = run.dir_text
        at = bisect.bisect_left(self._by_folder, text, key=self._folder_of)
        if at < len(self._by_folder) and self._folder_of(self._by_folder[at]) == text:
            return self._by_folder[at]
        return None

    def _slot(self, run: Run, name: str) -> int | None:
        index = self._index_of(run)
        column = self._name_index.get(name)
        return None if index is None or column is None else index * len(self.names) + column

    def ran(self, run: Run, name: str) -> None:
        """A task of ``run`` × ``name`` came back from its executor (recorded or not)."""
        slot = self._slot(run, name)
        if slot is not None:
            self._ran[slot] = 1

    def ran_names(self, run: Run) -> list[str]:
        """The validators whose tasks on ``run`` came back, in scenario order."""
        index = self._index_of(run)
        if index is None:
            return []
        first = index * len(self.names)
        return [name for column, name in enumerate(self.names) if self._ran[first + column]]

    def wrote(
        self, run: Run, name: str, document: Mapping[str, Any], sha: bytes | None = None
    ) -> None:
        """trysquare recorded ``document`` as ``run``'s result of ``name``: the file must hold it
        (whose bytes have sha256 ``sha`` when the writer says so)."""
        slot = self._slot(run, name)
        if slot is None:
            return
        if sha is None:
            from trysquare import results

            if results.SIGNATURE not in document:
                # Written signed (write_result), handed back as it was before (an executor's own).
                document = results.sign_result(run, name, document)
            sha = _document_sha(document)
        self._written[32 * slot : 32 * slot + 32] = sha
        self._was_written[slot] = 1

    def forged(self) -> list[tuple[Run, str]]:
        """Each (run, validator name) whose result file changed during validate other than by
        trysquare's own writes, in the order of their paths."""
        found = []
        for index, run in enumerate(self.runs):
            for column, name in enumerate(self.names):
                slot = index * len(self.names) + column
                path = _result_path(run, name)
                if self._was_written[slot]:
                    try:  # never through a link, never blocked on a FIFO put in its place
                        now = sha256(_atomic.read_bytes(path, root=run.dir)).digest()
                    except OSError:
                        now = b""
                    if now != bytes(self._written[32 * slot : 32 * slot + 32]):
                        found.append((path, run, name))
                elif _file_stat(path) != tuple(self._before[4 * slot : 4 * slot + 4]):
                    found.append((path, run, name))
        return [(run, name) for _, run, name in sorted(found, key=lambda item: item[0])]


def _result_path(run: Run, name: str) -> Path:
    from trysquare import results

    return results.result_path(run, name)


def _file_stat(path: Path) -> tuple[int, int, int, int]:
    """A file's inode, size and times; all -1 when it is absent (or unreadable)."""
    try:
        st = os.lstat(path)
    except OSError:
        return (-1, -1, -1, -1)
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _document_sha(document: Mapping[str, Any]) -> bytes:
    """The digest of the bytes :func:`trysquare.results.write_result` writes for ``document``."""
    return sha256(_atomic.encode(_atomic.dump_json(document))).digest()


def refuse_forged(forged: Iterable[tuple[Run, str]], out: TextIO) -> None:
    """Make each forged result invalid, naming its file (the forged one goes to the history)."""
    from trysquare import results

    for run, name in forged:
        path = results.result_path(run, name)
        problem = (
            f"{shown(str(path))} was changed during validate by something other than trysquare"
        )
        print(f"trysquare: {shown(run.label)}: {problem}", file=out)
        try:
            # What the forged file says is kept only if trysquare signed it (an older result
            # of its own put back): a forgery's numbers never stay, even beside an error.
            document = results.read_result(run, name) or {"metrics": {}, "reasons": {}}
            results.write_result(
                run,
                name,
                {**document, "state": "invalid", "error": problem, "context_digest": None},
                None,
            )
        except (OSError, results.UnreadableResult) as error:
            print(f"trysquare: {shown(run.label)}: {shown(str(error))}", file=out)

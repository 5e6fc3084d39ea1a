"""``measures.json`` rows held small, for a report that holds every run's row.

``trysquare report`` reads every run's row before it draws a verdict, so at 100,000 runs
what one row costs is what the report costs. Built as a dict literal a row took about 680
bytes: the dict of eight keys (272), its ``metrics`` dict (184) and three empty containers
(``reasons``, ``errors``, ``pending``: 176). A held row is still a plain dict, read as fast,
in about a quarter of that:

- its keys are kept once for every row: the row is the ``__dict__`` of a throwaway object,
  which CPython keeps as a key-sharing dict (PEP 412: one table of keys for every instance of
  a class, only the values per row);
- an empty ``reasons``, ``errors`` or ``pending`` is one container shared by every row of
  the report, and so is a ``metrics`` dict whose values are all booleans or ``None`` (the
  same names and values: the same dict).

So a held row's containers may be shared: they are read, never changed (the report's tables
only read them). :func:`plain` copies them, and :class:`PlainRows` hands a plugin each row
as such a copy, built when it is read.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

__all__ = ["PlainRows", "Shapes", "plain"]


class _Row:
    """Never seen: its instances' ``__dict__`` share one table of keys (the rows)."""


class Shapes:
    """What the rows of one report share: the empty containers and the all-boolean metrics."""

    __slots__ = ("_errors", "_metrics", "_pending", "_reasons")

    def __init__(self) -> None:
        self._reasons: dict[str, str] = {}
        self._errors: list[dict[str, str]] = []
        self._pending: list[str] = []
        self._metrics: dict[tuple[tuple[str, Any], ...], dict[str, Any]] = {}

    def row(
        self,
        row_id: Any,
        cell: Any,
        repetition: Any,
        state: str,
        metrics: dict[str, Any],
        reasons: dict[str, str],
        errors: list[dict[str, str]],
        pending: list[str],
    ) -> dict[str, Any]:
        """The row :func:`trysquare.results.run_row` would build, held small."""
        for value in metrics.values():
            if value is not True and value is not False and value is not None:
                break  # 1 == 1.0 == True: only booleans and None are shared
        else:
            metrics = self._metrics.setdefault(tuple(metrics.items()), metrics)
        held = _Row()
        held.id = row_id  # type: ignore[attr-defined]
        held.cell = cell  # type: ignore[attr-defined]
        held.repetition = repetition  # type: ignore[attr-defined]
        held.state = state  # type: ignore[attr-defined]
        held.metrics = metrics  # type: ignore[attr-defined]
        held.reasons = reasons or self._reasons  # type: ignore[attr-defined]
        held.errors = errors or self._errors  # type: ignore[attr-defined]
        held.pending = pending or self._pending  # type: ignore[attr-defined]
        return held.__dict__


def plain(row: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``row`` with containers of its own: what ``run_row`` returns for it."""
    copy = dict(row)
    for key in ("metrics", "reasons"):
        if key in copy:
            copy[key] = dict(copy[key])
    for key in ("errors", "pending"):
        if key in copy:
            copy[key] = list(copy[key])
    return copy


class PlainRows(Sequence[Mapping[str, Any]]):
    """Rows held by a report, handed to a plugin as :func:`plain` copies built when read."""

    __slots__ = ("_rows",)

    def __init__(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self._rows = rows

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return [plain(row) for row in self._rows[index]]
        return plain(self._rows[index])

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return map(plain, self._rows)

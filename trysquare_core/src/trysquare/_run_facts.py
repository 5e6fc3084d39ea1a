"""The facts of one run a fresh context is built from: a record only that building needs.

Kept out of :mod:`trysquare.context`, which every ``validate`` imports: a ``validate
--replay`` (its contexts archived) and a ``report`` never build it. ``trysquare.context``
still offers it by name.
"""

from __future__ import annotations

from pathlib import Path

from trysquare._record import record

__all__ = ["RunFacts"]


@record
class RunFacts:
    """What is true of one run whichever validator looks: computed once."""

    touched: tuple[str, ...]
    files: tuple[str, ...]
    diff: Path
    response: Path | None
    etalon_checkout: Path | None

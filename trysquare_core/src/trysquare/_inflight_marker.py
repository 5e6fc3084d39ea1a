"""A validation that was in flight when trysquare last ended (see :mod:`trysquare._inflight`).

Its own module so that a ``validate`` finding no marker never builds the record's class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from trysquare.runs import Run

__all__ = ["Marker"]


@attrs.frozen
class Marker:
    """A validation that was running when trysquare last ended."""

    run: Run
    name: str
    ended: int  # how many times trysquare ended while this validation ran
    digest: str  # the validator's digest then
    context_digest: str | None  # its context's digest then

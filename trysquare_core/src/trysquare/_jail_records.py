"""The jail's two records a command needs only when it starts a jail (or asks about one).

Kept out of :mod:`trysquare.jail`, which every ``validate`` imports for its policy: a
validate whose validators start no jail never builds them. ``trysquare.jail`` still offers
both by name.
"""

from __future__ import annotations

from trysquare._record import record

__all__ = ["Availability", "JailIds"]


@record
class Availability:
    """Whether the jail can start on this machine, with what, and why not."""

    available: bool
    bwrap: str | None
    version: str
    reason: str  # why not, when not available
    tmpfs_size: bool = False  # this bwrap can cap a tmpfs (--size)
    disable_userns: bool = False  # this bwrap can forbid user namespaces inside (--disable-userns)


@record
class JailIds:
    """The user and group one jail runs as when trysquare runs as root."""

    user: int
    group: int

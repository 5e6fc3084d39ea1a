"""The CPU quota of this process's cgroups (Linux): how many cores' worth of time it may use.

A container started with ``docker run --cpus 2`` on a 32-core host sees 32 cores, and its CPU
affinity names every one of them: only its cgroup's quota says two. Both cgroup versions are
read: v2's ``cpu.max`` and v1's ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``, in this
process's cgroup and in each one above it up to where the hierarchy is mounted. The smallest
quota binds.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator

__all__ = ["cpu_quota"]

_ESCAPED = re.compile(r"\\([0-7]{3})")  # mountinfo writes a space in a path as \040


def cpu_quota(proc: str = "/proc/self") -> int | None:
    """The cores' worth of CPU time this process's cgroups allow, rounded up (a quota of 1.5
    cores is 2); ``None`` where no quota is set or none can be read (not Linux, no cgroup
    mounted). ``proc``: the ``/proc`` folder of the process asked about."""
    try:
        # A path that is not UTF-8 (a mount of somebody's) must not hide every other line.
        with open(os.path.join(proc, "cgroup"), encoding="utf-8", errors="surrogateescape") as file:
            memberships = file.read()
        with open(
            os.path.join(proc, "mountinfo"), encoding="utf-8", errors="surrogateescape"
        ) as file:
            mounts = file.read()
    except OSError:
        return None
    quotas = [
        quota
        for folder, top, version in _cpu_folders(memberships, mounts)
        for quota in _quotas_up(folder, top, version)
    ]
    return max(1, math.ceil(min(quotas))) if quotas else None


def _cpu_folders(memberships: str, mounts: str) -> Iterator[tuple[str, str, int]]:
    """Each cgroup of this process that carries a CPU quota, as its folder, the folder its
    hierarchy is mounted at and the cgroup version (1 or 2)."""
    wanted: dict[int, str] = {}  # version -> this process's cgroup path in that hierarchy
    for line in memberships.splitlines():
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if number == "0" and controllers == "":
            wanted[2] = path
        elif "cpu" in controllers.split(","):
            wanted[1] = path
    for line in mounts.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        dash = fields.index("-")
        if dash < 5 or len(fields) < dash + 4:
            continue
        root, top = _unescape(fields[3]), _unescape(fields[4])
        kind, options = fields[dash + 1], fields[dash + 3].split(",")
        version = 2 if kind == "cgroup2" else 1 if kind == "cgroup" and "cpu" in options else 0
        member = wanted.get(version)
        if member is None or not _within(member, root):
            continue
        inside = member[len(root.rstrip("/")) :].lstrip("/")
        yield os.path.join(top, inside) if inside else top, top, version


def _quotas_up(folder: str, top: str, version: int) -> Iterator[float]:
    """The quota (in cores) of ``folder`` and of each cgroup above it up to ``top``, where set."""
    while True:
        quota = _quota(folder, version)
        if quota is not None:
            yield quota
        if folder == top or not _within(folder, top):
            return
        folder = os.path.dirname(folder)


def _quota(folder: str, version: int) -> float | None:
    """One cgroup's quota in cores, ``None`` where it sets none or it cannot be read."""
    try:
        if version == 2:
            with open(os.path.join(folder, "cpu.max"), encoding="ascii") as file:
                limit, _, period = file.read().strip().partition(" ")
        else:
            with open(os.path.join(folder, "cpu.cfs_quota_us"), encoding="ascii") as file:
                limit = file.read().strip()
            with open(os.path.join(folder, "cpu.cfs_period_us"), encoding="ascii") as file:
                period = file.read().strip()
        if limit == "max":
            return None
        allowed, every = int(limit), int(period or "100000")
        if allowed <= 0 or every <= 0:  # v1 writes -1 for no quota
            return None
        return allowed / every
    except (OSError, ValueError, UnicodeDecodeError, OverflowError):
        return None


def _within(path: str, folder: str) -> bool:
    return folder == "/" or path == folder or path.startswith(folder.rstrip("/") + "/")


def _unescape(field: str) -> str:
    return _ESCAPED.sub(lambda found: chr(int(found.group(1), 8)), field)

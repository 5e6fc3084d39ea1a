"""The ``trysquare`` and ``trysquare.provides`` entry points, scanned once per installation.

Finding them the ordinary way imports :mod:`importlib.metadata` (and with it ``email``,
``zipfile``, ``csv``) and reads every installed distribution's ``entry_points.txt``, then
the ``METADATA`` of each plugin: a large part of the start of a one-run ``validate``.
What the scan found is kept in trysquare's own cache (``$XDG_CACHE_HOME/trysquare``, which the
jail never shows to the agent's code), one file per interpreter and import path, beside a
*stamp*: the import path, the ``*.dist-info``/``*.egg-info`` names in each folder on it, and
the inode, size and modification time of the files of each that the scan's answer depends on.
For a distribution whose ``entry_points.txt`` names trysquare, that is its folder and every
file of it the scan reads (``entry_points.txt`` and ``METADATA``, or an egg's ``PKG-INFO`` and
``requires.txt``); for any other, only its ``entry_points.txt`` (absent or not), since nothing
else of it reaches the answer until that file changes (which the stamp sees). Installing,
removing or upgrading a distribution changes the stamp, and the next start scans again. A
cache file that is unreadable, not ours, of another format or stamped otherwise is never
trusted: it is scanned again and replaced. A stamp holding a time too close to the scan is
not written at all (a change within the file system's clock tick could not be seen).
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from trysquare._digests import sha256

__all__ = ["CACHE_NAME", "FORMAT", "Found", "cache_file", "scan"]

PLUGIN_GROUP = "trysquare"
PROVIDES_GROUP = "trysquare.provides"
FORMAT = 2
CACHE_NAME = "entry-points"
# A stamp is written only when everything in it is older than this: a change made in the same
# tick of a coarse file-system clock as the scan would leave the times as they were.
_SETTLED_SECONDS = 2.0
# The files of a distribution's metadata the scan reads, by the suffix of its folder.
_DIST_FILES = {
    ".dist-info": ("entry_points.txt", "METADATA"),
    ".egg-info": ("entry_points.txt", "PKG-INFO", "requires.txt"),
}
_DIST_SUFFIXES = tuple(_DIST_FILES)


class Found:
    """One entry point of either group, with the facts of its distribution (none for an entry
    point no distribution declares)."""

    __slots__ = ("dist", "group", "name", "requires", "value", "version")

    def __init__(
        self,
        group: str,
        name: str,
        value: str,
        dist: str | None,
        version: str | None,
        requires: tuple[str, ...],
    ) -> None:
        self.group = group
        self.name = name
        self.value = value
        self.dist = dist  # normalized: trysquare-judge
        self.version = version
        self.requires = requires

    def load(self) -> Any:
        """Import what the entry point names (``module`` or ``module:attr.attr``)."""
        import importlib

        module_name, _, attribute = self.value.partition(":")
        target: Any = importlib.import_module(module_name.strip())
        for part in attribute.split("[", 1)[0].strip().split("."):
            if part:
                target = getattr(target, part)
        return target

    def as_list(self) -> list[Any]:
        return [self.group, self.name, self.value, self.dist, self.version, list(self.requires)]


def cache_file() -> str:
    """The cache file of this interpreter and import path, in trysquare's cache
    (:func:`trysquare._cache_folder.cache_root`). The path is in the name: the console script
    (its folder first on the path) and ``python -m trysquare`` (the current folder first) keep
    a file each, rather than replacing one another's at every start."""
    from trysquare._cache_folder import cache_root

    where = "\0".join([sys.prefix, sys.executable, *map(str, sys.path)])
    digest = sha256(where.encode(errors="surrogateescape")).hexdigest()[:16]
    return os.path.join(cache_root(), f"{CACHE_NAME}-{digest}.json")


def scan(*, fresh: bool = False) -> list[Found]:
    """Every entry point of both groups: from the cache when its stamp still holds (unless
    ``fresh``), else from the installed distributions' metadata (and the cache rewritten)."""
    path = cache_file()
    if not fresh:
        cached = _read(path)
        if cached is not None:
            stamp, found = cached
            # Marked as the cache's stamp marks them: a plugin's files all, another's one.
            plugins_there = _plugin_folders(stamp)
            if _stamp(sys.path, lambda folder, name: (folder, name) in plugins_there) == stamp:
                return found
    # Taken before the scan: a change made while it reads is seen at the next start.
    stamp = _stamp(sys.path, _names_trysquare)
    found = _scan_metadata()
    _write(path, stamp, found)
    return found


def _scan_metadata() -> list[Found]:
    from importlib import metadata

    facts: dict[int, tuple[Any, tuple[str | None, str | None, tuple[str, ...]]]] = {}

    def of(entry_point: metadata.EntryPoint) -> tuple[str | None, str | None, tuple[str, ...]]:
        dist = entry_point.dist
        if dist is None:
            return None, None, ()
        known = facts.get(id(dist))
        if known is None:
            meta = dist.metadata  # each read parses the whole file again: read once
            name = _normalize(meta["Name"] or "")
            requires = tuple(meta.get_all("Requires-Dist") or dist.requires or ())  # or egg-info's
            known = (dist, (name, meta["Version"], requires))
            facts[id(dist)] = known  # the distribution is kept: its id stays its own
        return known[1]

    everything = metadata.entry_points()  # one scan of the installed distributions
    found = []
    for group in (PLUGIN_GROUP, PROVIDES_GROUP):
        for entry_point in everything.select(group=group):
            dist, version, requires = of(entry_point)
            found.append(Found(group, entry_point.name, entry_point.value, dist, version, requires))
    return found


def _normalize(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def _stamp(path_entries: Iterable[str], is_plugin: Callable[[str, str], bool]) -> list[Any] | None:
    """What a change to the installed distributions changes; ``None`` when a time in it is
    too recent to be sure of (the cache is then neither trusted nor written). ``is_plugin``
    (the folder on the path, the distribution's folder name) says whose files are all marked.
    """
    entries = [entry for entry in path_entries if isinstance(entry, str)]
    stamp: list[Any] = [entries]
    newest = 0
    for entry in entries:
        folder = entry or "."
        try:
            names = os.listdir(folder)
        except NotADirectoryError:  # a zip archive on the path: its own mark
            stamp.append([folder, _mark(folder), []])
            continue
        except OSError:
            stamp.append([folder, None, []])
            continue
        # The folder's own time is left out: any file made in it (the current folder is on
        # the path under `python -m`) would change it; a distribution's folder is a name here.
        distributions: list[Any] = []
        stamp.append([folder, None, distributions])
        for name in sorted(name for name in names if name.lower().endswith(_DIST_SUFFIXES)):
            dist_folder = f"{folder}{os.sep}{name}"
            if is_plugin(folder, name):
                suffix = ".dist-info" if name.lower().endswith(".dist-info") else ".egg-info"
                marks = [_mark(dist_folder)] + [
                    _mark(f"{dist_folder}{os.sep}{file}") for file in _DIST_FILES[suffix]
                ]
            else:
                marks = [_mark(f"{dist_folder}{os.sep}entry_points.txt")]
            distributions.append([name, marks])
            for mark in marks:
                if mark is not None and mark[3] > newest:
                    newest = mark[3]
    if newest >= (time.time() - _SETTLED_SECONDS) * 1e9:
        return None
    return stamp


def _names_trysquare(folder: str, name: str) -> bool:
    """Whether this distribution's ``entry_points.txt`` mentions trysquare (a group of ours,
    or so it may be): its other files are then part of the scan's answer."""
    try:
        with open(f"{folder}{os.sep}{name}{os.sep}entry_points.txt", "rb") as handle:
            return PLUGIN_GROUP.encode() in handle.read().lower()
    except OSError:
        return False


def _plugin_folders(stamp: Any) -> set[tuple[str, str]]:
    """The (folder, distribution folder) pairs whose files ``stamp`` marks all."""
    found: set[tuple[str, str]] = set()
    try:
        for folder, _, distributions in stamp[1:]:
            for name, marks in distributions:
                if len(marks) > 1:
                    found.add((folder, name))
    except (TypeError, ValueError):
        return set()  # not a stamp of ours: it will not compare equal either
    return found


def _mark(path: str) -> list[Any] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    kind = "d" if stat.S_ISDIR(found.st_mode) else "f"
    return [kind, found.st_ino, found.st_size, found.st_mtime_ns]


def _read(path: str) -> tuple[Any, list[Found]] | None:
    """The cache's stamp and entry points, when the file is ours and well formed."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        # Only a plain file of this user that no one else may write is believed.
        if (
            not stat.S_ISREG(info.st_mode)
            or info.st_uid != os.getuid()
            or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
            or info.st_nlink != 1
        ):
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = json.loads(handle.read())
    except (OSError, ValueError, RecursionError):
        return None
    finally:
        os.close(fd)
    try:
        if data["format"] != FORMAT or not isinstance(data["stamp"], list):
            return None
        return data["stamp"], [_found(item) for item in data["entry_points"]]
    except (KeyError, TypeError, ValueError):
        return None


def _found(item: Any) -> Found:
    group, name, value, dist, version, requires = item
    texts = (group, name, value)
    optional = (dist, version)
    if (
        not all(isinstance(text, str) for text in texts)
        or not all(text is None or isinstance(text, str) for text in optional)
        or not isinstance(requires, list)
        or not all(isinstance(text, str) for text in requires)
        or group not in (PLUGIN_GROUP, PROVIDES_GROUP)
    ):
        raise ValueError("not an entry point")
    return Found(group, name, value, dist, version, tuple(requires))


def _write(path: str, stamp: list[Any] | None, found: list[Found]) -> None:
    """Replace the cache file (best effort: a cache that cannot be written is only slower)."""
    if stamp is None:
        return
    data = {"format": FORMAT, "stamp": stamp, "entry_points": [item.as_list() for item in found]}
    folder = os.path.dirname(path)
    temporary = os.path.join(folder, f".{os.path.basename(path)}.{os.urandom(6).hex()}.tmp")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(json.dumps(data, sort_keys=True).encode())
        os.replace(temporary, path)  # readers see the old file or the new one, never half
    except (OSError, ValueError):
        try:
            os.unlink(temporary)
        except OSError:
            pass
        return
    _prune(folder, keep=os.path.basename(path))


# A cache file not rewritten for this long goes when another is written (one file per import
# path: `python -m trysquare` run from many folders would otherwise leave one for each).
_PRUNE_SECONDS = 30 * 24 * 3600


def _prune(folder: str, *, keep: str) -> None:
    limit = time.time() - _PRUNE_SECONDS
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name == keep or CACHE_NAME not in name or not name.endswith((".json", ".tmp")):
            continue
        if not name.startswith((f"{CACHE_NAME}-", f".{CACHE_NAME}-")):
            continue
        try:
            if os.lstat(os.path.join(folder, name)).st_mtime < limit:
                os.unlink(os.path.join(folder, name))
        except OSError:
            pass

"""The control run at base: do the hidden tests report when the agent has changed nothing?

A run whose hidden tests write no report (or an unreadable one, or one holding no test, or
one missing a listed test) may have been broken by the agent — its source crashes pytest,
its code ends the process before the report is written — or by nobody (the command cannot
run on this machine). The same command on the base tree tells the two apart: when it
reports there, the run's silence is the run's failure; only when it cannot report at base
either is nobody able to judge.

Its outcome depends only on the base tree, the validator (its digest covers the command,
the ids and the hidden files' bytes), the scenario's ``prepare`` and the variables passed
to the suite, so it is kept in trysquare's own cache (``$XDG_CACHE_HOME/trysquare``), never
in a run folder, which is the agent's. A control that reported is kept on disk; one that
could not is remembered by this process only (the next ``validate`` tries again: a
network outage during ``prepare`` must not be remembered for ever).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
from trysquare.api import (
    cache_root as _cache_root,  # the one place trysquare's cache folder is named
)
from trysquare.api import read_bytes, write_json

__all__ = ["Control", "at_base", "control_key"]

_VERSION = 1
FOLDER = ("hidden-tests", "control")


@attrs.frozen
class Control:
    """What the hidden tests reported on the base tree."""

    ids: frozenset[str] | None  # every test id of the report at base; None: no usable report
    problem: str = ""  # why there was none
    cached: bool = False  # read from the cache (nothing ran now)
    transcript: bytes = b""  # the control's own output, when it ran now


def control_key(parts: Mapping[str, Any]) -> str:
    """The digest naming one control run (``parts`` is JSON: tree, validator, prepare...)."""
    text = json.dumps({"version": _VERSION, **parts}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


_MEMO: dict[str, Control] = {}
_LOCKS: dict[str, threading.Lock] = {}
_GUARD = threading.Lock()


def _folder() -> Path:
    return _cache_root().joinpath(*FOLDER)


def at_base(key: str, run: Callable[[], Control]) -> Control:
    """The control named ``key``: from this process, from trysquare's cache, or ``run()``.

    Two runs of one validate sharing a base wait for one control run, not two.
    """
    with _GUARD:
        lock = _LOCKS.setdefault(key, threading.Lock())
    with lock:
        known = _MEMO.get(key)
        if known is not None:
            return attrs.evolve(known, cached=True, transcript=b"")
        stored = _read(key)
        if stored is not None:
            _MEMO[key] = stored
            return stored
        found = run()
        _MEMO[key] = found
        if found.ids is not None:
            _write(key, found.ids)
        return found


def _read(key: str) -> Control | None:
    folder = _folder()
    try:
        document = json.loads(read_bytes(folder / f"{key}.json", root=folder))
    except (OSError, ValueError, RecursionError):
        return None  # absent, unreadable or not ours: run it again
    if not isinstance(document, dict) or document.get("version") != _VERSION:
        return None
    ids = document.get("ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        return None
    return Control(ids=frozenset(ids), cached=True)


def _write(key: str, ids: frozenset[str]) -> None:
    folder = _folder()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_json(folder / f"{key}.json", {"version": _VERSION, "ids": sorted(ids)}, root=folder)
    except OSError:
        pass  # a cache that cannot be written costs a rerun, never a result

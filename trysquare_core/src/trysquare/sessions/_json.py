"""Session lines parsed at msgspec's speed, with :func:`json.loads` deciding what msgspec refuses.

A module of its own, importing nothing of trysquare's: the session records
(``trysquare.sessions``) and the readers (``trysquare.sessions.base``) both parse with it.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

__all__ = ["fast_loads", "loads"]

# Module-level so that the tests can put json.loads in its place and compare.
fast_loads = msgspec.json.Decoder().decode


def loads(line: bytes) -> Any:
    """``json.loads(line)``, at msgspec's speed where the two agree.

    msgspec accepts a subset of what :func:`json.loads` does (no ``NaN``, no lone
    surrogates, no byte-order mark, no numbers out of float range) and decodes it to
    the same values, duplicate keys included (the last wins); whatever it refuses
    goes to :func:`json.loads`, which decides. One boundary differs: both give up
    at the interpreter's recursion limit, msgspec up to three levels deeper (json
    spends frames of its own), and where exactly depends on the caller's stack and
    the Python version either way.
    """
    try:
        return fast_loads(line)
    except Exception:  # noqa: BLE001 - a hostile line: whatever msgspec refuses, json.loads decides
        return json.loads(line)

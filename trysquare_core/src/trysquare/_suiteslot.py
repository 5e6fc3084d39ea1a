"""A validator process's side of the suite cache (see :mod:`trysquare._suitecache`).

Kept to ``os`` and ``json``: ``run.tests()`` asks here first, and a reused outcome
must cost next to nothing — none of the suite's machinery is imported for it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

__all__ = ["REPORT_ENV", "REPORT_FILE", "REUSE_ENV", "report_to_runner", "reused_from_environment"]

# Set by the runner for a validator it starts: the outcome it verified for this clone,
# and where run.tests() says what it did (a file in the validator's archive folder).
REUSE_ENV = "TRYSQUARE_SUITE_REUSE"
REPORT_ENV = "TRYSQUARE_SUITE_REPORT"
REPORT_FILE = "suite-outcome.json"


def reused_from_environment() -> dict[str, Any] | None:
    """The suite outcome the runner offers for reuse, or ``None`` (then the suite runs)."""
    text = os.environ.get(REUSE_ENV)
    if not text:
        return None
    try:
        reused = json.loads(text)
    except ValueError:
        return None
    if not isinstance(reused, dict) or reused.get("value") not in (True, False):
        return None
    if not isinstance(reused.get("reason"), str):
        return None
    return reused


def report_to_runner(document: Mapping[str, Any]) -> None:
    """Tell the runner what ``run.tests()`` did, when it asked (never through a symlink)."""
    target = os.environ.get(REPORT_ENV)
    if not target or os.path.basename(target) != REPORT_FILE:
        return
    temp = f"{target}.{os.getpid()}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(dict(document), handle, sort_keys=True)
        os.replace(temp, target)  # a rename replaces a link itself, never its target
    except OSError:
        try:
            os.unlink(temp)
        except OSError:
            pass  # the outcome is simply not kept

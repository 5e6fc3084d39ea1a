"""The one canonical-JSON digest: what a validator's and a context's digests are made of.

A leaf module (json and :mod:`trysquare._digests` alone) so modes, the judge and the plugin API
share it without importing each other.
"""

from __future__ import annotations

import json
from typing import Any

from trysquare._digests import sha256

__all__ = ["digest"]


def digest(value: Any) -> str:
    """``"sha256:<hex>"`` of ``value`` as canonical JSON (sorted keys, no spaces).

    Two values equal as JSON have the same digest; a ``Path`` counts as its text.

    >>> digest({"b": 1, "a": [1, 2]}) == digest({"a": [1, 2], "b": 1})
    True
    """
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + sha256(canonical.encode("utf-8")).hexdigest()

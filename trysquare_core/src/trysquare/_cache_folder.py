"""trysquare's cache folder (``$XDG_CACHE_HOME/trysquare``), named in this one place.

Its own module, so that what needs only the name (the signing key's file) does not import
the git layer (``git.shadow`` keeps the shadow repositories beneath it).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root"]


def cache_root() -> Path:
    """trysquare's cache folder: ``$XDG_CACHE_HOME/trysquare``, else ``~/.cache/trysquare``."""
    root = os.environ.get("XDG_CACHE_HOME", "")
    # XDG: a relative value is invalid and must be ignored.
    base = Path(root) if root and os.path.isabs(root) else Path.home() / ".cache"
    return base / "trysquare"

"""trysquare: turn finished coding-agent runs into named metrics that can be trusted.

The package root stays cheap to import: ``import trysquare.assay`` pays for it once
per validator run, so nothing here may pull in pluggy, attrs or cattrs eagerly.
"""

from __future__ import annotations

# Not `from typing import TYPE_CHECKING`: importing typing costs every validator start-up.
TYPE_CHECKING = False

from trysquare._version import __version__

if TYPE_CHECKING:
    from typing import Any

    from pluggy import HookimplMarker

    hookimpl: HookimplMarker

__all__ = ["__version__", "hookimpl"]


def __getattr__(name: str) -> Any:
    # Deferred so that validators importing trysquare.assay never load pluggy.
    if name == "hookimpl":
        from trysquare.hookspecs import hookimpl

        return hookimpl
    raise AttributeError(f"module 'trysquare' has no attribute {name!r}")

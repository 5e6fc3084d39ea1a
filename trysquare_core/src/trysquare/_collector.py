"""The cyclic garbage collector of trysquare's own command line, paused while it starts.

A command's start allocates almost only what lives until the process ends: modules,
classes, functions, the parser, the scenario. The collector, triggered every few hundred
new containers, would walk them again and again and free nothing. So the command line
(``trysquare``, ``python -m trysquare``) turns it off before anything is imported and
back on when the command's own work begins: when experiments are loaded (runs and
results are where a long command's garbage comes from) or, for a command that loads
none, before it runs (:func:`trysquare.cli.main`). Never for a caller of
``trysquare.cli.main(argv)``: that process keeps its collector as it was.

Nothing is imported here: this module is loaded before the rest of the command line.
"""

from __future__ import annotations

import gc

__all__ = ["pause", "resume"]

_paused: list[bool] = []  # holds True while this module keeps the collector off


def pause() -> None:
    """Turn the collector off, if it is on (it is turned on again by :func:`resume`)."""
    if gc.isenabled() and not _paused:
        gc.disable()
        _paused.append(True)


def resume() -> None:
    """Turn the collector on again after :func:`pause` (idempotent; nothing if not paused).

    What the start built is frozen first: it is never collected, so no later collection,
    in a command that may run for hours, walks it again either.
    """
    if _paused:
        _paused.clear()
        gc.freeze()
        gc.enable()

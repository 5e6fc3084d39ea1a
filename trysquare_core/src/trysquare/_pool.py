"""How many threads overlap work that mostly waits on the disk or on git."""

from __future__ import annotations

import os


def io_workers() -> int:
    """Threads for I/O-bound fan-out (git reads, stat walks of clones): two per core, at most 8.

    More than 8 buys nothing on one disk and starves the validators' own processes.
    """
    return min(8, 2 * (os.cpu_count() or 1))

"""The ``trysquare`` console script and ``python -m trysquare``."""

from __future__ import annotations


def main() -> int:
    """Run the command line, with the collector paused before the CLI is even imported."""
    from trysquare import _collector

    _collector.pause()
    from trysquare.cli import main as command_line

    return command_line()

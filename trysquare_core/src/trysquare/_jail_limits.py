"""The jail's default limits, the ``[task] limits`` a scenario leaves out: in a module of
their own, so that reading a scenario (``report`` does) does not load the jail for them."""

from __future__ import annotations

__all__ = ["DEFAULT_FILE_SIZE_MIB", "DEFAULT_MEMORY_MIB", "DEFAULT_PROCESSES"]

DEFAULT_PROCESSES = 512
DEFAULT_MEMORY_MIB = 4096
DEFAULT_FILE_SIZE_MIB = 1024

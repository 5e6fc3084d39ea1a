"""A module-level regular expression compiled when it is first used, not when imported.

Compiling a pattern costs about as much as importing a small module; most of the core's
patterns serve one path (a git ref that needs checking, a Markdown cell, a session's
shell words), so a one-run ``validate`` or ``report`` would compile them for nothing.
:class:`LazyPattern` offers the few ``re.Pattern`` methods the core uses, and compiles
on the first call (two threads racing compile it twice: harmless, the same pattern).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import AnyStr, Generic

__all__ = ["LazyPattern"]


class LazyPattern(Generic[AnyStr]):
    """``re.compile(source, flags)``, done on the first match, search or substitution."""

    __slots__ = ("_compiled", "_flags", "_source")

    def __init__(self, source: AnyStr, flags: int = 0) -> None:
        self._source: AnyStr = source
        self._flags = flags
        self._compiled: re.Pattern[AnyStr] | None = None

    @property
    def compiled(self) -> re.Pattern[AnyStr]:
        """The compiled pattern (compiled now if this is the first use)."""
        if self._compiled is None:
            self._compiled = re.compile(self._source, self._flags)
        return self._compiled

    def match(
        self, string: AnyStr, pos: int = 0, endpos: int = sys.maxsize
    ) -> re.Match[AnyStr] | None:
        return self.compiled.match(string, pos, endpos)

    def fullmatch(
        self, string: AnyStr, pos: int = 0, endpos: int = sys.maxsize
    ) -> re.Match[AnyStr] | None:
        return self.compiled.fullmatch(string, pos, endpos)

    def search(
        self, string: AnyStr, pos: int = 0, endpos: int = sys.maxsize
    ) -> re.Match[AnyStr] | None:
        return self.compiled.search(string, pos, endpos)

    def sub(
        self,
        replacement: AnyStr | Callable[[re.Match[AnyStr]], AnyStr],
        string: AnyStr,
        count: int = 0,
    ) -> AnyStr:
        return self.compiled.sub(replacement, string, count)

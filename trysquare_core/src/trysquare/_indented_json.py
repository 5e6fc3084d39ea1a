"""The text ``json.dumps(value, indent=2, sort_keys=True, allow_nan=False)`` writes, byte for
byte, without json's pure-Python encoder.

json's C encoder writes no indentation: given an indent, json runs a generator in pure Python
over every value. trysquare writes every result, context and work record indented, and hashes
an indented context for every digest, so that generator ran several times a run. Here each
string goes through json's own (C) escaper, and each container is one join.

Only what json writes in one way is written here: exact ``dict`` (text keys), ``list``,
``tuple``, ``str``, ``int``, finite ``float``, ``True``/``False``/``None``. Anything else (a
subclass, a key that is not text, NaN, a type json would refuse, a cycle, a nesting deeper
than the stack) gives ``None``, and the caller hands the value to json's encoder, which writes
it or raises as it always did. Dependency-free.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any

__all__ = ["indented"]


class _Unsure(Exception):
    """A value this module does not write: json's encoder decides."""


def indented(value: Any, *, ascii_only: bool) -> str | None:
    """``value`` as json's indented, key-sorted text (no final newline), or ``None`` when
    json's encoder must write it (see the module's docstring)."""
    escape = encode_basestring_ascii if ascii_only else encode_basestring
    try:
        return _text(value, "\n", escape)
    except (_Unsure, RecursionError):
        return None


def _text(value: Any, newline: str, escape: Callable[[str], str]) -> str:
    kind = type(value)
    if kind is str:
        return escape(value)
    if kind is dict:
        if not value:
            return "{}"
        inner = newline + "  "
        for key in value:
            if type(key) is not str:
                raise _Unsure
        # json sorts the items; distinct text keys sort the same alone.
        parts = [
            escape(key) + ": " + (escape(item) if type(item) is str else _text(item, inner, escape))
            for key in sorted(value)
            for item in (value[key],)
        ]
        return "{" + inner + ("," + inner).join(parts) + newline + "}"
    if kind is list or kind is tuple:
        if not value:
            return "[]"
        inner = newline + "  "
        # Strings and whole numbers (a picture's entries) without a call each.
        items = [
            escape(v)
            if type(v) is str
            else int.__repr__(v)
            if type(v) is int
            else _text(v, inner, escape)
            for v in value
        ]
        return "[" + inner + ("," + inner).join(items) + newline + "]"
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if kind is int:
        return int.__repr__(value)
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    raise _Unsure

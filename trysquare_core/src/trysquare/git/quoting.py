"""git's C-style quoting of a path (``"a\tb"``), both ways.

The patch's headers and an ``objects/info/alternates`` line quote a name holding a
control character, a quote, a backslash or (``core.quotepath=off`` aside) a byte above
0x7f; these two functions are git's rules, byte for byte.
"""

from __future__ import annotations

_NAMED_ESCAPES = {
    0x07: b"\\a", 0x08: b"\\b", 0x09: b"\\t", 0x0A: b"\\n", 0x0B: b"\\v",
    0x0C: b"\\f", 0x0D: b"\\r", 0x22: b'\\"', 0x5C: b"\\\\",
}  # fmt: skip


_UNESCAPES = {value[1]: key for key, value in _NAMED_ESCAPES.items()}


def _quote(name: bytes) -> bytes:
    """git's C-style quoting of a path label, as with ``core.quotepath=off``."""
    if not any(c < 0x20 or c in (0x22, 0x5C, 0x7F) for c in name):
        return name
    out = bytearray(b'"')
    for c in name:
        if c in _NAMED_ESCAPES:
            out += _NAMED_ESCAPES[c]
        elif c < 0x20 or c == 0x7F:
            out += b"\\%03o" % c
        else:
            out.append(c)
    out += b'"'
    return bytes(out)


def _unquote(text: bytes, start: int) -> bytes:
    """The C-quoted string opening at ``text[start]`` (a double quote), unescaped."""
    out = bytearray()
    i = start + 1
    while i < len(text):
        c = text[i]
        if c == 0x22:
            return bytes(out)
        if c == 0x5C:
            nxt = text[i + 1]
            if 0x30 <= nxt <= 0x37:
                out.append(int(text[i + 1 : i + 4], 8))
                i += 4
                continue
            out.append(_UNESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    raise ValueError("unterminated quoted path")

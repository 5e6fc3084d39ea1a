"""A plain TOML document read with string methods, or :class:`NotPlain`.

Importing :mod:`tomllib` compiles its patterns and imports :mod:`datetime` and
:mod:`string`: on the start of a one-run ``validate`` or ``report``, which reads a scenario
of a few lines and a ``run.toml`` of a dozen, that was more than reading them. The files
trysquare writes and its examples show are plain, and are read here:

- each line is blank, a comment (``#`` first), a header ``[name]`` or ``[[name]]``, or
  ``key = value``, where a name or key is bare (ASCII letters, digits, ``_``, ``-``);
- a value is ``true``, ``false``, a whole number written as Python and TOML both write it
  (``0``, ``12``, ``-3``: no sign ``+``, no ``_``, no leading zero, at most 18 digits), a string in double
  quotes with no quote or backslash inside, or an array of such strings (on one line, or
  one item or more a line as ``tomli_w`` writes it; no comment inside);
- nothing is defined twice (a key in its table, a ``[name]`` table), no ``[[name]]`` meets
  a key or table of that name, and the text holds no backslash, no carriage return and no
  control character but the line feed.

Anything else (a float, a date, an escape, a comment after a value, a dotted or quoted
key, an inline table, a tab) raises :class:`NotPlain`, and :mod:`tomllib` reads the text
or refuses it. A plain text gives here exactly the tables, lists, strings, numbers and
booleans :mod:`tomllib` gives (``tests/security/test_plain_toml_hostile.py`` holds the two
to the same answers); this module never refuses a text itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["NotPlain", "loads"]


class NotPlain(Exception):
    """This text is not plain: :mod:`tomllib` reads (or refuses) it."""


_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_DIGITS = frozenset("0123456789")
# Every ASCII control character but the line feed (a tab is TOML's but not plain), and the
# backslash (an escape): any of them anywhere, and the text is tomllib's.
_NOT_PLAIN = frozenset(chr(code) for code in (*range(0x20), 0x7F) if code != 0x0A) | {"\\"}


def loads(text: str) -> dict[str, Any]:
    """The document ``text`` as :func:`tomllib.loads` gives it, or :class:`NotPlain`."""
    if not _NOT_PLAIN.isdisjoint(text):
        raise NotPlain
    document: dict[str, Any] = {}
    table = document
    arrays_of_tables: set[str] = set()  # names made by [[name]]: each header adds one
    lines = iter(text.split("\n"))
    for raw_line in lines:
        line = raw_line.strip(" ")
        if not line or line[0] == "#":
            continue
        if line[0] == "[":
            if line[:2] == "[[":
                name = _bare(line[2:-2]) if line[-2:] == "]]" else _refuse()
                if name not in document:
                    document[name] = []
                    arrays_of_tables.add(name)
                elif name not in arrays_of_tables:
                    raise NotPlain
                table = {}
                document[name].append(table)
            else:
                name = _bare(line[1:-1]) if line[-1] == "]" else _refuse()
                if name in document:
                    raise NotPlain
                table = document[name] = {}
            continue
        key, equals, value = line.partition("=")
        key = _bare(key.rstrip(" "))
        if not equals or key in table:
            raise NotPlain
        table[key] = _value(value.lstrip(" "), lines)
    return document


def _refuse() -> str:
    raise NotPlain


def _bare(name: str) -> str:
    if not name or not _BARE.issuperset(name):
        raise NotPlain
    return name


def _value(text: str, lines: Iterator[str]) -> Any:
    if text == "true":
        return True
    if text == "false":
        return False
    first = text[:1]
    if first == '"':
        return _string(text)
    if first == "[":
        return _strings(text, lines)
    digits = text[1:] if first == "-" else text
    # At most 18 digits: within TOML's 64 bits, and far from Python's limit on int("...").
    if 0 < len(digits) <= 18 and _DIGITS.issuperset(digits) and (digits[0] != "0" or text == "0"):
        return int(text)
    raise NotPlain


def _string(text: str) -> str:
    """A whole ``"..."``, no quote inside (a backslash is already refused)."""
    if len(text) < 2 or text[-1] != '"' or '"' in text[1:-1]:
        raise NotPlain
    return text[1:-1]


def _strings(first: str, lines: Iterator[str]) -> list[str]:
    """An array of plain strings from ``[`` on: on one line (``[]``, ``["a", "b"]``) or on
    those after it (as ``tomli_w`` writes one), a comma after the last item or not. Each
    string ends on its own line; anything but a string, a comma or the ``]`` is not plain."""
    items: list[str] = []
    after_item = False
    rest = first[1:].strip(" ")
    while True:
        if not rest:
            following = next(lines, None)
            if following is None:  # the text ends inside the array
                raise NotPlain
            rest = following.strip(" ")
            continue
        if rest[0] == "]":
            if rest != "]":
                raise NotPlain
            return items
        if after_item:
            if rest[0] != ",":
                raise NotPlain
            after_item = False
            rest = rest[1:].lstrip(" ")
            continue
        end = rest.find('"', 1) if rest[0] == '"' else -1
        if end < 0:
            raise NotPlain
        items.append(rest[1:end])
        after_item = True
        rest = rest[end + 1 :].lstrip(" ")

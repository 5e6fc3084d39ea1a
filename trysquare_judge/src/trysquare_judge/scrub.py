"""Keeping keys out of everything the judge writes, whatever their encoding.

A server may echo the request headers (the key raw, or base64 inside a Basic
``Authorization``), an error body may quote a URL (the key URL-encoded), a JSON
body carries it escaped (a key holding ``"`` or ``\\``), and a judge may repeat
it in its reasons. :func:`scrub` removes every such form from a string, and
:func:`scrub_value` from every string inside a JSON-like value (keys included),
before the transcript, the reasons or an error reach a file or a terminal.

It also makes text safe to write: a lone surrogate (``"Done \\ud83d"``, which a
JSON reply may legally carry) cannot be encoded as UTF-8, so it is written as
its escape (``\\ud83d``) instead of failing the write and losing a paid verdict.
"""

from __future__ import annotations

import base64
import json
import os
import re
import urllib.parse
from collections.abc import Iterable
from typing import Any

__all__ = ["MASK", "key_forms", "keys_from_environment", "safe_text", "scrub", "scrub_value"]

MASK = "***"
# A base64 fragment shorter than this could match by chance in ordinary text.
_MIN_BASE64 = 8


def key_forms(key: str) -> list[str]:
    """Every spelling of ``key`` the scrub looks for, longest first.

    Raw; JSON-escaped (once and twice, ASCII-only or not); URL-encoded (``%20``
    and ``+`` styles); hex; and base64 (standard and URL-safe) at each of the
    three alignments the key can have inside a longer base64 text, such as
    ``Basic base64(user:key)``.
    """
    if not key:
        return []
    forms = {key}
    for ascii_only in (True, False):
        once = json.dumps(key, ensure_ascii=ascii_only)[1:-1]
        forms.add(once)
        forms.add(json.dumps(once, ensure_ascii=ascii_only)[1:-1])
    forms.add(urllib.parse.quote(key, safe=""))
    forms.add(urllib.parse.quote_plus(key, safe=""))
    data = key.encode("utf-8", "surrogatepass")
    forms.add(data.hex())
    forms.add(data.hex().upper())
    for offset in range(3):
        # The characters that depend on the key's bytes alone, whatever surrounds it.
        encoded = base64.b64encode(b"\0" * offset + data).decode("ascii")
        start = -(-8 * offset // 6)
        end = (8 * (offset + len(data))) // 6
        fragment = encoded[start:end]
        if len(fragment) >= _MIN_BASE64 or (offset == 0 and fragment):
            forms.add(fragment)
            forms.add(fragment.replace("+", "-").replace("/", "_"))
    return sorted((form for form in forms if form), key=len, reverse=True)


def _pattern(keys: Iterable[str]) -> re.Pattern[str] | None:
    forms = sorted({form for key in keys for form in key_forms(key)}, key=len, reverse=True)
    if not forms:
        return None
    return re.compile("|".join(re.escape(form) for form in forms))


def safe_text(text: str) -> str:
    """``text`` with any lone surrogate written as its escape, so UTF-8 can hold it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def scrub(text: str, keys: Iterable[str | None]) -> str:
    """``text`` without any form of any of ``keys`` (each replaced by ``***``), safe to write."""
    pattern = _pattern(key for key in keys if key)
    text = text if pattern is None else pattern.sub(MASK, text)
    return safe_text(text)


def scrub_value(value: Any, keys: Iterable[str | None]) -> Any:
    """``value`` (JSON-like) with :func:`scrub` applied to every string in it, keys of maps too."""
    present = [key for key in keys if key]
    pattern = _pattern(present)
    if _nothing_to_scrub(value, present, pattern):
        return value

    def clean(item: Any) -> Any:
        if isinstance(item, str):
            return safe_text(item if pattern is None else pattern.sub(MASK, item))
        if isinstance(item, dict):
            return {clean(k): clean(v) for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [clean(v) for v in item]
        return item

    return clean(value)


def _nothing_to_scrub(value: Any, keys: list[str], pattern: re.Pattern[str] | None) -> bool:
    """Whether ``value`` holds no form of any key and no lone surrogate, found in its JSON text
    at once instead of string by string (a transcript holds thousands of strings).

    Sound only for key forms JSON does not escape (no ``"``, ``\\`` or control character):
    such a form inside any string of ``value`` appears as is in the JSON text. A key with
    other forms, or a value that is not JSON, is walked string by string.
    """
    if pattern is not None and any(
        json.dumps(form, ensure_ascii=False)[1:-1] != form
        for key in keys
        for form in key_forms(key)
    ):
        return False
    try:
        text = json.dumps(value, ensure_ascii=False)
        text.encode("utf-8")  # a lone surrogate cannot be written
    except (TypeError, ValueError):  # not JSON (a tuple key...), or a surrogate
        return False
    return pattern is None or pattern.search(text) is None


def keys_from_environment(names: Iterable[str | None]) -> list[str]:
    """The values of the variables ``names`` that are set: the keys to scrub."""
    return [os.environ[name] for name in names if name and os.environ.get(name)]

"""trysquare's signing key, and the MACs made with it: one key, one place.

Everything trysquare keeps inside a run folder and later trusts — a validator's
result and each line of its history, a suite outcome it may reuse, the marker of a
validation in flight — lies where the measured agent could have written. Each such
record therefore carries an HMAC-SHA256 made with a key that lives in trysquare's own
cache, outside every run: ``$XDG_CACHE_HOME/trysquare/suite.key`` (the file is made
once, 0600, by the first trysquare that needs it; it kept the name it had when only
the suite cache used it, so that what a machine signed before stays valid). A record
whose MAC does not verify with this machine's key was not written by trysquare here:
it is never reused, never reported as a measurement, and is named.

What a MAC covers is canonical JSON (sorted keys, no spaces, ASCII escapes), so the
same value signs the same whatever order or indentation a file holds it in.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from trysquare import _atomic
from trysquare._digests import Hmac, compare_digest, sha256

__all__ = [
    "canonical",
    "fingerprint",
    "key_file",
    "mac",
    "mac_text",
    "names_the_key",
    "scrub",
    "scrub_bytes",
    "secret",
    "verifies",
]

KEY_FILE_NAME = "suite.key"

_KEYS: dict[Path, bytes] = {}
_SECRETS: dict[tuple[str | None, str | None], bytes] = {}
# Per cache location (what names the key file): an HMAC primed with the key (copied for each
# MAC) and the key's fingerprint. A report checks one MAC per result: 10,000s of them.
_PRIMED: dict[tuple[str | None, str | None], tuple[Hmac, str]] = {}


def key_file() -> Path:
    """Where this machine's (this user's) signing key is kept: trysquare's cache."""
    from trysquare._cache_folder import cache_root  # the one place it is named

    return cache_root() / KEY_FILE_NAME


def secret() -> bytes:
    """This machine's signing key, made once (0600) in trysquare's cache, never in a run folder."""
    # Known by what names the key file (as _primed does): every result written scrubs with
    # the key, and building the key file's path each time cost more than the scrub.
    where = (os.environ.get("XDG_CACHE_HOME"), os.environ.get("HOME"))
    known = _SECRETS.get(where)
    if known is not None:
        return known
    path = key_file()
    found = _KEYS.get(path)
    if found is None:
        path.parent.mkdir(parents=True, exist_ok=True)
        found = _atomic.create_once(path, os.urandom(32).hex().encode("ascii"), root=path.parent)
        if len(found) < 32:
            raise OSError(f"{path}: trysquare's signing key is too short; delete it for another")
        _KEYS[path] = found
    _SECRETS[where] = found
    return found


def canonical(value: Any) -> str:
    """``value`` as canonical JSON: what a MAC is computed over.

    >>> canonical({"b": [1, "\\u00e9"], "a": None})
    '{"a":null,"b":[1,"\\\\u00e9"]}'
    """
    return _CANONICAL.encode(value)


# Built once (json.dumps builds one per call for these arguments): a MAC per result written.
_CANONICAL = json.JSONEncoder(
    sort_keys=True, ensure_ascii=True, separators=(",", ":"), allow_nan=False
)


def _primed() -> tuple[Hmac, str]:
    where = (os.environ.get("XDG_CACHE_HOME"), os.environ.get("HOME"))  # what key_file() reads
    found = _PRIMED.get(where)
    if found is None:
        key = secret()
        name = sha256(b"trysquare key fingerprint\0" + key).hexdigest()[:16]
        found = _PRIMED[where] = (Hmac(key), name)
    return found


def mac_text(text: str) -> str:
    """The hex HMAC-SHA256 of ``text`` (ASCII) with this machine's key."""
    primed = _primed()[0].copy()
    primed.update(text.encode("ascii"))
    return primed.hexdigest()


def mac(value: Any) -> str:
    """The hex HMAC-SHA256 of ``value`` as :func:`canonical` JSON with this machine's key."""
    return mac_text(canonical(value))


def fingerprint() -> str:
    """A short public name of this machine's key (it tells a record signed elsewhere from
    one edited here; nothing about the key can be learnt from it)."""
    return _primed()[1]


def verifies(expected: object, value: Any) -> bool:
    """Whether ``expected`` is the MAC of ``value`` (compared in constant time); ``False`` for
    anything that is not a MAC or a value no MAC can cover (NaN, a key that is not text)."""
    if not isinstance(expected, str) or not expected.isascii():
        return False
    try:
        computed = mac(value)
    except (TypeError, ValueError, RecursionError):
        return False
    return compare_digest(expected, computed)


SCRUBBED = "***"


def scrub(value: Any) -> Any:
    """``value`` with every occurrence of the key's text replaced by ``***`` (in strings, keys
    included, at any depth): what code that could read the key printed never lands in a
    record trysquare keeps or shows.

    >>> scrub({"reason": "ok"})
    {'reason': 'ok'}
    """
    key = secret().decode("ascii")

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return item.replace(key, SCRUBBED) if key in item else item
        if isinstance(item, dict):
            return {walk(k): walk(v) for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [walk(v) for v in item]
        return item

    return walk(value)


def names_the_key(text: str) -> bool:
    """Whether ``text`` holds the key's text (a value's :func:`canonical` JSON holds it
    wherever one of its strings does: the key is hex, never escaped)."""
    return secret().decode("ascii") in text


def scrub_bytes(data: bytes) -> bytes:
    """``data`` with the key's text replaced by ``***``."""
    key = secret()
    return data.replace(key, SCRUBBED.encode("ascii")) if key in data else data

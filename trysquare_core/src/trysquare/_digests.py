"""SHA-256 (SHA-1) and HMAC-SHA256 that load OpenSSL only when a large input asks for its speed.

:mod:`hashlib` and :mod:`hmac` load OpenSSL's ``libcrypto`` when imported: on the start of a
one-run ``validate`` or ``report``, whose inputs (a context's text, a result, a run's diff
of a few lines) are small, that loading cost more than all their hashing. The interpreter
also has SHA-256 and SHA-1 of its own (``_sha2``, ``_sha256`` before 3.12, ``_sha1``), slower per
byte but loaded with nothing. :class:`Sha256` (and :class:`Sha1`) holds what it is given until 64 KiB, then hands it all
to OpenSSL's (a gigabyte diff is hashed at OpenSSL's speed); either way the digest is
SHA-256's, byte for byte. :class:`Hmac` is RFC 2104's HMAC over it (keyed inner and outer
hashes), byte for byte what ``hmac.new(key, digestmod=hashlib.sha256)`` gives.
"""

from __future__ import annotations

import importlib
import sys
from _operator import _compare_digest
from collections.abc import Callable
from typing import Any, Self

__all__ = ["Hmac", "Sha1", "Sha256", "compare_digest", "sha1", "sha256"]

# Past this many bytes a hasher hands over to OpenSSL (which outruns the interpreter's own
# SHA-256 several times over on large inputs); below it, nothing loads OpenSSL.
_HAND_OVER_BYTES = 64 * 1024
_BLOCK_BYTES = 64  # SHA-256's block: an HMAC key is padded (or hashed) to it


def _interpreter_hash(modules: tuple[str, ...], name: str) -> Callable[..., Any] | None:
    for module in modules:
        try:
            found: Callable[..., Any] = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        return found
    return None  # an interpreter built without it: OpenSSL's from the first byte


def _openssl(name: str, data: bytes | bytearray = b"") -> Any:
    import hashlib

    return hashlib.new(name, data)


class _Hasher:
    """A hasher with ``hashlib``'s methods (``update``, ``digest``, ``hexdigest``, ``copy``):
    the interpreter's own up to 64 KiB, OpenSSL's beyond."""

    __slots__ = ("_held", "_openssl")

    name: str
    _own: Callable[..., Any] | None

    def __init__(self, data: bytes | bytearray | memoryview = b"") -> None:
        self._held = bytearray()
        self._openssl: Any = None if self._own is not None else _openssl(self.name)
        if data:
            self.update(data)

    def update(self, data: bytes | bytearray | memoryview) -> None:
        if self._openssl is not None:
            self._openssl.update(data)
            return
        self._held += data
        if len(self._held) > _HAND_OVER_BYTES:
            self._openssl = _openssl(self.name, self._held)
            self._held = bytearray()

    def digest(self) -> bytes:
        if self._openssl is not None:
            found: bytes = self._openssl.digest()
            return found
        assert self._own is not None  # else OpenSSL's from the first byte
        own: bytes = self._own(self._held).digest()
        return own

    def hexdigest(self) -> str:
        return self.digest().hex()

    def copy(self) -> Self:
        twin = self.__class__()
        if self._openssl is not None:
            twin._openssl = self._openssl.copy()
        else:
            twin._held = bytearray(self._held)
        return twin


class Sha256(_Hasher):
    """``hashlib.sha256``'s hasher."""

    __slots__ = ()
    digest_size = 32
    block_size = _BLOCK_BYTES
    name = "sha256"
    # A C function: no method binding, so it is called as it is.
    # Its module's name by version: a name that is not there costs a search of the whole path.
    _own = _interpreter_hash(("_sha2",) if sys.version_info >= (3, 12) else ("_sha256",), "sha256")


class Sha1(_Hasher):
    """``hashlib.sha1``'s hasher: git's object ids (a repository's loose objects, read
    without git)."""

    __slots__ = ()
    digest_size = 20
    block_size = _BLOCK_BYTES
    name = "sha1"
    _own = _interpreter_hash(("_sha1",), "sha1")


def sha256(data: bytes | bytearray | memoryview = b"") -> Sha256:
    """``hashlib.sha256(data)``, without loading OpenSSL for a small input."""
    return Sha256(data)


def sha1(data: bytes | bytearray | memoryview = b"") -> Sha1:
    """``hashlib.sha1(data)``, without loading OpenSSL for a small input."""
    return Sha1(data)


class Hmac:
    """HMAC-SHA256 (RFC 2104): ``hmac.new(key, digestmod=hashlib.sha256)``'s methods and
    digests."""

    __slots__ = ("_inner", "_outer")

    digest_size = 32
    block_size = _BLOCK_BYTES
    name = "hmac-sha256"

    def __init__(self, key: bytes, message: bytes = b"") -> None:
        if len(key) > _BLOCK_BYTES:
            key = Sha256(key).digest()
        padded = key.ljust(_BLOCK_BYTES, b"\0")
        self._inner = Sha256(bytes(byte ^ 0x36 for byte in padded))
        self._outer = Sha256(bytes(byte ^ 0x5C for byte in padded))
        if message:
            self._inner.update(message)

    def update(self, message: bytes | bytearray | memoryview) -> None:
        self._inner.update(message)

    def digest(self) -> bytes:
        outer = self._outer.copy()
        outer.update(self._inner.digest())
        return outer.digest()

    def hexdigest(self) -> str:
        return self.digest().hex()

    def copy(self) -> Self:
        twin = self.__class__.__new__(self.__class__)
        twin._inner = self._inner.copy()
        twin._outer = self._outer.copy()
        return twin


def compare_digest(a: str, b: str) -> bool:
    """``hmac.compare_digest`` for text: constant time in the length of ``b`` (the same C
    function ``hmac`` falls back to without OpenSSL)."""
    return _compare_digest(a, b)

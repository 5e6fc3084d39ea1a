"""SHA-256 (SHA-1) and HMAC-SHA256 that load OpenSSL only once there is much to hash.

:mod:`hashlib` and :mod:`hmac` load OpenSSL's ``libcrypto`` when imported: on the start of a
one-run ``validate`` or ``report``, whose inputs (a context's text, a result, a run's diff
of a few lines) are small, that loading cost more than all their hashing. The interpreter
also has SHA-256 and SHA-1 of its own (``_sha2``, ``_sha256`` before 3.12, ``_sha1``),
several times slower per byte but loaded with nothing. So a hasher of :func:`sha256` (or
:func:`sha1`) starts on the interpreter's own and holds what it is given; past 64 KiB in
one hasher, or 256 KiB in the whole process, OpenSSL is loaded and takes over, and every
hasher made after that is OpenSSL's own (``hashlib``'s): a process with much to hash pays
the loading once and hashes at OpenSSL's speed. Either way the digest is the algorithm's,
byte for byte. :class:`Hmac` is RFC 2104's HMAC over it (keyed inner and outer hashes), byte
for byte what ``hmac.new(key, digestmod=hashlib.sha256)`` gives, and a primed one hands its
copies to ``hmac`` itself once OpenSSL is loaded.
"""

from __future__ import annotations

import importlib
import sys
from _operator import _compare_digest
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, Self

if TYPE_CHECKING:

    class Hasher(Protocol):
        """What :func:`sha256` and :func:`sha1` return: ``hashlib``'s hasher, or one of ours."""

        def update(self, data: bytes | bytearray | memoryview, /) -> None: ...
        def digest(self) -> bytes: ...
        def hexdigest(self) -> str: ...
        def copy(self) -> Hasher: ...


__all__ = ["Hmac", "Sha1", "Sha256", "compare_digest", "sha1", "sha256"]

# Past this many bytes a hasher hands over to OpenSSL (which outruns the interpreter's own
# SHA-256 several times over on large inputs); below it, nothing loads OpenSSL.
_HAND_OVER_BYTES = 64 * 1024
# Past this many bytes hashed by the interpreter's own in this process, OpenSSL is loaded for
# good: what it costs to load is soon repaid by its speed. A count shared by threads without
# a lock: one lost addition only moves the moment a little.
_PROCESS_BUDGET_BYTES = 256 * 1024
_hashed_here = [0]


def _openssl_here() -> bool:
    """Whether OpenSSL's hashes are loaded in this process (by us or anyone)."""
    return "_hashlib" in sys.modules


_BLOCK_BYTES = 64  # SHA-256's block: an HMAC key is padded (or hashed) to it


def _interpreter_hash(modules: tuple[str, ...], name: str) -> Callable[..., Any] | None:
    for module in modules:
        try:
            found: Callable[..., Any] = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        return found
    return None  # an interpreter built without it: OpenSSL's from the first byte


def _openssl(name: str, data: bytes | bytearray | memoryview = b"") -> Any:
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
        ours = self._own is not None and not _openssl_here()
        self._openssl: Any = None if ours else _openssl(self.name)
        if data:
            self.update(data)

    def update(self, data: bytes | bytearray | memoryview) -> None:
        if self._openssl is not None:
            self._openssl.update(data)
            return
        before = len(self._held)
        self._held += data
        _hashed_here[0] += len(self._held) - before
        if len(self._held) > _HAND_OVER_BYTES or _hashed_here[0] > _PROCESS_BUDGET_BYTES:
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
        twin = self.__class__.__new__(self.__class__)  # as it is, whatever is loaded since
        twin._openssl = None if self._openssl is None else self._openssl.copy()
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


def sha256(data: bytes | bytearray | memoryview = b"") -> Hasher:
    """``hashlib.sha256(data)``, without loading OpenSSL while there is little to hash."""
    if _openssl_here():
        found: Hasher = _openssl("sha256", data)
        return found
    return Sha256(data)


def sha1(data: bytes | bytearray | memoryview = b"") -> Hasher:
    """``hashlib.sha1(data)``, without loading OpenSSL while there is little to hash."""
    if _openssl_here():
        found: Hasher = _openssl("sha1", data)
        return found
    return Sha1(data)


class Hmac:
    """HMAC-SHA256 (RFC 2104): ``hmac.new(key, digestmod=hashlib.sha256)``'s methods and
    digests."""

    __slots__ = ("_inner", "_key", "_outer", "_primed")

    digest_size = 32
    block_size = _BLOCK_BYTES
    name = "hmac-sha256"

    def __init__(self, key: bytes, message: bytes = b"") -> None:
        self._key: bytes | None = key
        self._primed: Any = None  # hmac's own, primed with the key alone: see copy()
        if len(key) > _BLOCK_BYTES:
            key = Sha256(key).digest()
        padded = key.ljust(_BLOCK_BYTES, b"\0")
        self._inner = Sha256(bytes(byte ^ 0x36 for byte in padded))
        self._outer = Sha256(bytes(byte ^ 0x5C for byte in padded))
        if message:
            self.update(message)

    def update(self, message: bytes | bytearray | memoryview) -> None:
        if message:
            self._key = None  # no longer primed with the key alone
        self._inner.update(message)

    def digest(self) -> bytes:
        outer = self._outer.copy()
        outer.update(self._inner.digest())
        return outer.digest()

    def hexdigest(self) -> str:
        return self.digest().hex()

    def copy(self) -> Any:
        """A copy; once OpenSSL is loaded, a copy of a key-only HMAC (a primed one, copied for
        each message) is ``hmac``'s own, which is faster."""
        if self._key is not None and (self._primed is not None or _openssl_here()):
            if self._primed is None:
                import hashlib
                import hmac

                self._primed = hmac.new(self._key, digestmod=hashlib.sha256)
            return self._primed.copy()
        twin = self.__class__.__new__(self.__class__)
        twin._key, twin._primed = self._key, None
        twin._inner = self._inner.copy()
        twin._outer = self._outer.copy()
        return twin


def compare_digest(a: str, b: str) -> bool:
    """``hmac.compare_digest`` for text: constant time in the length of ``b`` (the same C
    function ``hmac`` falls back to without OpenSSL)."""
    return _compare_digest(a, b)

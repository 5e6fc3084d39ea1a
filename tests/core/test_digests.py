"""SHA-256, SHA-1 and HMAC-SHA256 without OpenSSL for small inputs: hashlib's and hmac's bytes."""

from __future__ import annotations

import hashlib
import hmac
import os
import subprocess
import sys

import pytest
from trysquare import _digests, _signing

pytestmark = pytest.mark.fast


@pytest.fixture(autouse=True)
def _no_openssl_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a process that has not loaded OpenSSL (pytest has): the interpreter's hashes."""
    monkeypatch.setattr(_digests, "_openssl_here", lambda: False)
    monkeypatch.setattr(_digests, "_hashed_here", [0])


EDGE = _digests._HAND_OVER_BYTES
SIZES = [0, 1, 55, 56, 63, 64, 65, 1000, EDGE - 1, EDGE, EDGE + 1, 3 * EDGE + 7]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize(
    ("ours", "theirs"), [(_digests.sha256, hashlib.sha256), (_digests.sha1, hashlib.sha1)]
)
def test_a_digest_is_hashlibs_whole_or_in_pieces_across_the_hand_over(
    size: int, ours: type, theirs: type
) -> None:
    data = os.urandom(size)
    assert ours(data).digest() == theirs(data).digest()
    for piece in (1, 7, 4096, EDGE - 3):
        hasher = ours()
        halfway = None
        for start in range(0, size, piece):
            hasher.update(memoryview(data)[start : start + piece])
            if halfway is None and start >= size // 2:
                halfway = (hasher.copy(), start + piece)
        assert hasher.hexdigest() == theirs(data).hexdigest()
        if halfway is not None:
            copy, done = halfway
            assert copy.digest() == theirs(data[:done]).digest()  # a copy goes its own way
            copy.update(b"more")
            assert copy.digest() == theirs(data[:done] + b"more").digest()
            assert hasher.digest() == theirs(data).digest()


@pytest.mark.parametrize("key_size", [0, 1, 32, 63, 64, 65, 200])
@pytest.mark.parametrize("size", [0, 1, 64, 1000, EDGE + 1])
def test_an_hmac_is_hmacs(key_size: int, size: int) -> None:
    key, message = os.urandom(key_size), os.urandom(size)
    expected = hmac.new(key, message, hashlib.sha256)
    assert _digests.Hmac(key, message).digest() == expected.digest()
    primed = _digests.Hmac(key)
    copy = primed.copy()
    copy.update(message)
    assert copy.hexdigest() == expected.hexdigest()
    assert primed.hexdigest() == hmac.new(key, b"", hashlib.sha256).hexdigest()  # untouched


def test_a_result_signed_before_verifies_and_one_edited_does_not() -> None:
    value = {"metrics": {"changed": True}, "reasons": {}}
    before = hmac.new(_signing.secret(), _signing.canonical(value).encode(), hashlib.sha256)
    assert _signing.mac(value) == before.hexdigest()
    assert _signing.verifies(before.hexdigest(), value)
    assert not _signing.verifies(before.hexdigest(), {**value, "metrics": {"changed": False}})
    signed = before.hexdigest()
    forged = signed[:-1] + ("1" if signed[-1] == "0" else "0")
    assert not _signing.verifies(forged, value)


def test_a_hasher_is_the_interpreters_until_it_has_much_to_hash() -> None:
    small = _digests.sha256(b"x")
    assert isinstance(small, _digests.Sha256) and small._openssl is None
    assert _digests.sha256(bytes(EDGE + 1))._openssl is not None  # type: ignore[attr-defined]


def test_a_hasher_made_before_openssl_loads_keeps_its_bytes_when_copied_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    early = _digests.sha256(b"abc")
    monkeypatch.setattr(_digests, "_openssl_here", lambda: True)
    copy = early.copy()
    copy.update(b"d")
    assert copy.digest() == hashlib.sha256(b"abcd").digest()
    assert early.digest() == hashlib.sha256(b"abc").digest()


def test_a_primed_hmac_copies_into_hmacs_own_once_openssl_is_loaded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = os.urandom(80)
    primed = _digests.Hmac(key)
    before = primed.copy()
    assert isinstance(before, _digests.Hmac)
    monkeypatch.setattr(_digests, "_openssl_here", lambda: True)
    after = primed.copy()
    assert isinstance(after, hmac.HMAC)
    for copy in (before, after):
        copy.update(b"message")
        assert copy.hexdigest() == hmac.new(key, b"message", hashlib.sha256).hexdigest()
    fed = _digests.Hmac(key, b"part")  # not primed with the key alone: stays ours
    assert isinstance(fed.copy(), _digests.Hmac)
    assert fed.copy().digest() == hmac.new(key, b"part", hashlib.sha256).digest()


def test_small_inputs_load_no_openssl_and_a_large_one_does() -> None:
    probe = (
        "import sys\n"
        "from trysquare import _digests\n"
        "_digests.sha256(b'x' * 1000).hexdigest(); _digests.sha1(b'x').digest()\n"
        "_digests.Hmac(b'k' * 64, b'm').hexdigest()\n"
        "print('_hashlib' in sys.modules, 'hmac' in sys.modules)\n"
        "for _ in range(5):\n"
        "    _digests.sha256(bytes(_digests._HAND_OVER_BYTES)).digest()\n"  # each small
        "print('_hashlib' in sys.modules)\n"  # but together past the process's budget
        "print(type(_digests.sha256(b'x')).__module__)\n"  # hashlib's own from now on
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False", "True", "_hashlib"]

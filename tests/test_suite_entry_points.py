"""The suite's own shortcut (tests/conftest.py): a test's cache starts with the session's scan
of the installed entry points, which trysquare then reads instead of every distribution."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from trysquare import _entry_points

from tests import conftest

pytestmark = pytest.mark.fast


def _never_read_the_distributions() -> list[_entry_points.Found]:
    raise AssertionError("the installed distributions were read, not the session's scan")


def test_a_tests_cache_holds_the_sessions_scan_and_trysquare_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if _entry_points._stamp(sys.path, _entry_points._names_trysquare) is None:
        pytest.skip("a distribution was installed seconds ago: trysquare would not stamp a scan")
    name = Path(_entry_points.cache_file()).name
    monkeypatch.setattr(conftest, "_SCANNED_FOR_SHARING", set())  # as a worker's first test
    cache = tmp_path / "fresh-cache"
    conftest.share_entry_point_scan(cache)
    copy = cache / "trysquare" / name
    assert copy.is_file() and copy.stat().st_nlink == 1  # a copy: a second name is not believed
    assert copy.stat().st_mode & 0o777 == 0o600
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.setattr(_entry_points, "_scan_metadata", _never_read_the_distributions)
    assert {found.name for found in _entry_points.scan()} >= {"trysquare-script"}


def test_a_path_the_session_never_scanned_gets_no_copy_and_is_scanned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "path", [*sys.path, str(tmp_path / "site")])
    monkeypatch.setattr(conftest, "_SCANNED_FOR_SHARING", {Path(_entry_points.cache_file()).name})
    cache = tmp_path / "fresh-cache"
    conftest.share_entry_point_scan(cache)
    assert not (cache / "trysquare").exists() or not os.listdir(cache / "trysquare")

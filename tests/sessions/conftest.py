"""Fixtures of the session-reader tests (builders live in ``sessionlogs``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from sessionlogs import WriteLog, jsonl
from trysquare.sessions import SessionFormat
from trysquare.sessions.builtin import builtin_formats


@pytest.fixture
def formats() -> dict[str, SessionFormat]:
    return builtin_formats()


@pytest.fixture
def write_log(tmp_path: Path) -> WriteLog:
    def write(entries: Iterable[Mapping[str, Any] | str], name: str = "session.jsonl") -> Path:
        return jsonl(tmp_path / name, entries)

    return write

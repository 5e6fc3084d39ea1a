"""The suite's own start (tests/first_collection.py): on a fresh checkout one xdist worker
collects first and alone, the others after it; once a collection has finished, nobody waits."""

from __future__ import annotations

import fcntl
import threading
from pathlib import Path

import pytest

from tests import first_collection

pytestmark = pytest.mark.fast


def _collector(home: Path, inside: threading.Event, leave: threading.Event) -> threading.Thread:
    def collect() -> None:
        with first_collection.collecting(home):
            inside.set()
            leave.wait(timeout=30)

    thread = threading.Thread(target=collect, daemon=True)
    thread.start()
    return thread


def test_the_second_collector_of_a_fresh_checkout_waits_for_the_first(tmp_path: Path) -> None:
    first_in, first_out = threading.Event(), threading.Event()
    first = _collector(tmp_path, first_in, first_out)
    assert first_in.wait(timeout=30)
    second_in, second_out = threading.Event(), threading.Event()
    second = _collector(tmp_path, second_in, second_out)
    # Still collecting alone: the second is held at the lock (the lock is what is asserted;
    # the short wait only gives a wrong implementation time to let it in).
    assert not second_in.wait(timeout=0.3)
    assert not (tmp_path / first_collection.MARK_NAME).exists()
    first_out.set()
    first.join(timeout=30)
    assert (tmp_path / first_collection.MARK_NAME).exists()
    assert second_in.wait(timeout=30)
    # The second holds nothing now: a third collects beside it.
    third_in, third_out = threading.Event(), threading.Event()
    third = _collector(tmp_path, third_in, third_out)
    assert third_in.wait(timeout=30)
    second_out.set()
    third_out.set()
    second.join(timeout=30)
    third.join(timeout=30)


def test_once_a_collection_has_finished_nobody_waits(tmp_path: Path) -> None:
    (tmp_path / first_collection.MARK_NAME).touch()
    with open(tmp_path / (first_collection.MARK_NAME + ".lock"), "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # whoever holds it, a finished collection is not waited on
        inside, leave = threading.Event(), threading.Event()
        collector = _collector(tmp_path, inside, leave)
        assert inside.wait(timeout=30)
        leave.set()
        collector.join(timeout=30)


def test_a_collection_that_fails_leaves_no_mark_and_lets_the_next_in(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), first_collection.collecting(tmp_path):
        raise RuntimeError("a module that does not import")
    assert not (tmp_path / first_collection.MARK_NAME).exists()
    with first_collection.collecting(tmp_path):  # not left locked: this would hang
        pass
    assert (tmp_path / first_collection.MARK_NAME).exists()


def test_without_bytecode_there_is_nothing_to_wait_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(first_collection.sys, "dont_write_bytecode", True)
    assert first_collection.bytecode_home() is None
    with first_collection.collecting(None):
        pass


def test_what_was_imported_before_bytecode_was_on_is_compiled_once_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util
    import sys
    import types

    from tests import conftest

    source = tmp_path / "src" / "imported_early.py"
    source.parent.mkdir()
    source.write_text("VALUE = 1\n", encoding="utf-8")
    early = types.ModuleType("imported_early")
    early.__file__ = str(source)
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "pycache"))
    cached = Path(importlib.util.cache_from_source(str(source)))
    assert cached.is_relative_to(tmp_path / "pycache") and not cached.exists()
    conftest._compile_what_is_imported([early])
    assert cached.is_file()

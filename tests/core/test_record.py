"""``trysquare._record``: records whose shared methods answer as attrs' generated ones."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from trysquare import modes, run_records, scenario
from trysquare._record import mutable_record, record


def _classes(frozen: Callable[..., Any], define: Callable[..., Any]) -> dict[str, Any]:
    @frozen(kw_only=True)
    class Keyed:
        x: int
        table: dict[str, int] = attrs.field(factory=dict, hash=False)
        label: str = attrs.field(default="q", repr=lambda value: f"<{value}>")
        ignored: int = attrs.field(default=0, eq=False)
        later: int = attrs.field(init=False, default=3)

    @frozen
    class Pair:
        first: object
        second: float = 0.0

    @frozen
    class Empty:
        pass

    @frozen
    class OwnRepr:
        value: int

        def __repr__(self) -> str:
            return "mine"

    @define
    class Mutable:
        items: object
        count: int = 0

    return {"Keyed": Keyed, "Pair": Pair, "Empty": Empty, "OwnRepr": OwnRepr, "Mutable": Mutable}


def _behaviour(frozen: Callable[..., Any], define: Callable[..., Any]) -> list[object]:
    c = _classes(frozen, define)
    keyed = c["Keyed"](x=1, table={"k": 1})
    other = c["Keyed"](x=1, table={"k": 1}, ignored=5)
    looped = c["Mutable"]([])
    looped.items.append(looped)
    itself = c["Mutable"](None)
    itself.items = itself
    seen: list[object] = [
        repr(keyed),
        repr(c["Pair"](keyed, 1.5)),
        repr(c["Pair"](c["Pair"](1))),
        repr(c["Empty"]()),
        repr(c["OwnRepr"](1)),
        repr(looped),
        repr(itself),
        keyed == other,
        keyed != other,
        c["Keyed"](x=2) == keyed,
        keyed == 3,
        keyed != 3,
        keyed.__eq__(3),
        hash(keyed) == hash(other),
        c["Pair"](1) == c["Pair"](1),
        c["Pair"](1) != c["Pair"](2),
        c["Pair"](math.nan) == c["Pair"](math.nan),
        {c["Pair"](1, 2.0): "found"}[c["Pair"](1, 2.0)],
        c["Empty"]() == c["Empty"](),
        hash(c["Empty"]()) == hash(c["Empty"]()),
        c["OwnRepr"](1) == c["OwnRepr"](1),
        c["Mutable"]([1]) == c["Mutable"]([1]),
        c["Mutable"]([1]) == c["Mutable"]([2]),
        c["Mutable"].__hash__,
    ]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        keyed.x = 2
    return seen


def test_a_record_compares_hashes_and_shows_as_attrs_would() -> None:
    assert _behaviour(record, mutable_record) == _behaviour(attrs.frozen, attrs.define)


def test_the_shared_methods_are_what_a_record_gets() -> None:
    # The point of the module: attrs compiles no __eq__/__hash__/__repr__ for these.
    from trysquare_script import mode as script_mode  # a mode built on trysquare.api.record

    for cls in (
        modes.Outcome,
        modes.ValidationTask,
        scenario.Scenario,
        run_records.Experiment,
        script_mode.ScriptValidation,
        script_mode._ScriptTable,
    ):
        assert cls.__eq__.__module__ == "trysquare._record", cls
        assert cls.__hash__.__module__ == "trysquare._record", cls
        assert cls.__repr__.__module__ == "trysquare._record", cls
    # A record's own repr (Run hides its home) stays, and its comparison is the shared one.
    assert run_records.Run.__repr__.__module__ == "trysquare.run_records"
    assert run_records.Run.__eq__.__module__ == "trysquare._record"
    assert run_records.Run.__hash__.__module__ == "trysquare._record"


def test_a_record_of_a_record_subclassed_by_attrs_gets_attrs_methods() -> None:
    @attrs.frozen(kw_only=True)
    class Mine(modes.Validation):
        extra: int = 0

    first = Mine(mode="m", metrics=("a",), extra=1)
    assert first == Mine(mode="m", metrics=("a",), extra=1)
    assert first != Mine(mode="m", metrics=("a",), extra=2)
    assert repr(first) == "Mine(mode='m', metrics=('a',), name='', extra=1)"

"""Field types resolved for the plain path: exactly ``typing.get_type_hints``'s, compiled once."""

from __future__ import annotations

import importlib
import pkgutil
import typing
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Literal

import attrs
import pytest
import trysquare
from trysquare import _plain_structure

import trysquare_script

pytestmark = pytest.mark.fast

Colour = Literal["red", "blue"]


@attrs.frozen
class _Paint:
    colour: Colour
    coats: int
    names: tuple[str, ...]
    mixes: Mapping[str, float] | None
    kind: ClassVar[str] = "paint"


@attrs.frozen
class _Gloss(_Paint):
    shine: float | None = None


@attrs.frozen
class _Hidden:
    later: Later  # noqa: F821 - a name only a type checker sees


def _records() -> Iterator[type]:
    for package in (trysquare, trysquare_script):
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if ".testing" in info.name or info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            for value in list(vars(module).values()):
                if isinstance(value, type) and attrs.has(value) and value.__module__ == info.name:
                    yield value


def test_every_record_of_trysquare_resolves_as_typing_resolves_it() -> None:
    simple = 0
    for record in [*_records(), _Paint, _Gloss]:
        hints = _plain_structure._simple_hints(record)
        if hints is None:
            continue
        simple += 1
        expected = typing.get_type_hints(record, include_extras=True)
        assert hints == expected, record
        assert [type(hint) for hint in hints.values()] == [type(e) for e in expected.values()]
    assert simple > 40  # the scenario's, the run's and the modes' records among them


def test_a_resolved_record_gets_the_types_attrs_would_give_it() -> None:
    for record in (_Paint, _Gloss):
        _plain_structure._resolve_types(record)
        assert record.__attrs_types_resolved__ is record
        assert {field.name: field.type for field in attrs.fields(record)} == {
            name: hint
            for name, hint in typing.get_type_hints(record, include_extras=True).items()
            if name != "kind"
        }


def test_a_name_typing_cannot_find_is_left_to_attrs_and_never_plain() -> None:
    assert _plain_structure._simple_hints(_Hidden) is None
    with pytest.raises(NameError):
        _plain_structure._resolve_types(_Hidden)
    with pytest.raises(_plain_structure.NotPlain):
        _plain_structure.structure({"later": 1}, _Hidden)


def test_an_annotation_met_again_is_not_compiled_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_plain_structure, "_compiled", {})
    compiled: list[str] = []

    def counting(text: str, *rest: Any) -> Any:
        compiled.append(text)
        return compile(text, *rest)

    # typing compiles each annotation of each class it resolves (its ForwardRef): not here
    monkeypatch.setattr(typing, "compile", counting, raising=False)
    monkeypatch.setattr(_plain_structure, "compile", counting, raising=False)
    # Built here, so that no other test has resolved them yet.
    paint = attrs.frozen(type("Paint", (), {"__annotations__": dict(_Paint.__annotations__)}))
    gloss = attrs.frozen(type("Gloss", (paint,), {"__annotations__": {"shine": "float | None"}}))
    for record in (paint, gloss):
        _plain_structure._resolve_types(record)
    assert attrs.fields(gloss).shine.type == float | None
    assert sorted(compiled) == [
        "ClassVar[str]",
        "Mapping[str, float] | None",
        "float | None",
        "tuple[str, ...]",
    ]

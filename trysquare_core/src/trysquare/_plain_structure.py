"""A plain table made into its attrs record without cattrs, or :class:`NotPlain`.

Plain: every key names a field (one that ``__init__`` takes under its own name), every
required field is there, and every value is already of its field's type as
:mod:`trysquare._convert`'s strict hooks take it (``str``, a whole number, a number, a
boolean, a path as a string, a list for ``tuple[...]``/``list[...]``, a table of string
keys for ``dict[str, ...]``, ``None`` for an optional field, anything for ``Any``). Such a
table gives here exactly the record cattrs would build; anything else (a type this module
does not know, one a mode added a hook for, a missing or unknown key, a value of another
type, a record's own validator refusing) raises :class:`NotPlain`, and cattrs structures
it or says what is wrong. This module never refuses a table itself: it only spares a
plain one cattrs' import and generated code.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

__all__ = ["NotPlain", "give_up_on", "structure"]

_Build = Callable[[Any], Any]


class NotPlain(Exception):
    """This value is not plain for this type: cattrs structures (or refuses) it."""


# Types a mode registered its own hook for: cattrs' business, subclasses included.
_given_up: list[Any] = []
# Each type's build function, made on first use (a type is hashable: ``tuple[str, ...]`` too).
_builds: dict[Any, _Build] = {}


def give_up_on(kind: Any) -> None:
    """Leave ``kind`` (and records holding it) to cattrs from now on."""
    _given_up.append(kind)
    _builds.clear()


def structure(data: Any, kind: Any) -> Any:
    """``data`` as a ``kind``, or :class:`NotPlain`."""
    try:
        return _build_of(kind)(data)
    except NotPlain:
        raise
    except Exception as error:  # a validator's refusal, a deep table: cattrs words it
        raise NotPlain from error


def _build_of(kind: Any) -> _Build:
    build = _builds.get(kind)
    if build is None:
        build = _builds[kind] = _make_build(kind)
    return build


def _not_plain(_: Any) -> Any:
    raise NotPlain


def _as_is(value: Any) -> Any:
    return value


def _a_str(value: Any) -> str:
    if not isinstance(value, str):
        raise NotPlain
    return value


def _an_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise NotPlain
    return value


def _a_float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise NotPlain
    return float(value)


def _a_bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise NotPlain
    return value


def _a_path(value: Any) -> Path:
    return Path(_a_str(value))


_SIMPLE: dict[Any, _Build] = {
    Any: _as_is,
    str: _a_str,
    int: _an_int,
    float: _a_float,
    bool: _a_bool,
    Path: _a_path,
}


def _make_build(kind: Any) -> _Build:
    if any(kind == given or _is_subclass(kind, given) for given in _given_up):
        return _not_plain
    simple = _SIMPLE.get(kind)
    if simple is not None:
        return simple
    if isinstance(kind, type) and attrs.has(kind):
        return _record_build(kind)
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        return _optional_build(args)
    if origin in (tuple, list):
        return _sequence_build(origin, args)
    if origin is dict and len(args) == 2 and args[0] is str:
        return _table_build(args[1])
    return _not_plain


def _is_subclass(kind: Any, given: Any) -> bool:
    return isinstance(kind, type) and isinstance(given, type) and issubclass(kind, given)


def _record_build(kind: type) -> _Build:
    try:
        attrs.resolve_types(kind)  # what cattrs does first, with the same outcome
    except Exception:  # noqa: BLE001 - a name only a type checker sees: cattrs' business
        return _not_plain
    fields: list[tuple[str, Any, bool]] = []
    for field in attrs.fields(kind):
        if not field.init:
            continue
        if field.alias != field.name or field.converter is not None or field.type is None:
            return _not_plain
        fields.append((field.name, field.type, field.default is attrs.NOTHING))
    known = frozenset(name for name, _, _ in fields)
    # Each field's build, found at the first call (a record may hold itself): not per table.
    steps: list[tuple[str, _Build, bool]] = []

    def build(value: Any) -> Any:
        if not isinstance(value, dict) or not known.issuperset(value):
            raise NotPlain
        if not steps:
            # One assignment of a finished list: two threads at once only both find the same.
            steps[:] = [
                (name, _build_of(field_kind), required) for name, field_kind, required in fields
            ]
        given: dict[str, Any] = {}
        for name, build_field, required in steps:
            if name in value:
                given[name] = build_field(value[name])
            elif required:
                raise NotPlain
        return kind(**given)

    return build


def _optional_build(args: tuple[Any, ...]) -> _Build:
    if len(args) != 2 or type(None) not in args:
        return _not_plain
    inner = args[0] if args[1] is type(None) else args[1]

    def build(value: Any) -> Any:
        return None if value is None else _build_of(inner)(value)

    return build


def _sequence_build(origin: type, args: tuple[Any, ...]) -> _Build:
    # As trysquare._convert's sequence hook: a TOML array (never a string), item by item.
    fixed = origin is tuple and not (len(args) == 2 and args[1] is Ellipsis)
    if not fixed and not args:
        return _not_plain

    def build(value: Any) -> Any:
        if not isinstance(value, (list, tuple)) or (fixed and len(value) != len(args)):
            raise NotPlain
        if fixed:
            return origin(_build_of(item_kind)(item) for item, item_kind in zip(value, args))
        item_build = _build_of(args[0])
        return origin(item_build(item) for item in value)

    return build


def _table_build(value_kind: Any) -> _Build:
    def build(value: Any) -> Any:
        if not isinstance(value, dict):
            raise NotPlain
        value_build = _build_of(value_kind)
        return {_a_str(key): value_build(item) for key, item in value.items()}

    return build

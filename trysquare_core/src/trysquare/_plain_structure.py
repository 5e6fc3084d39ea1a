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

import builtins
import sys
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
        _resolve_types(kind)  # what cattrs does first, with the same outcome
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


# ``typing.get_type_hints`` compiles each string annotation again for every class (a
# ForwardRef each), which was the larger part of structuring a one-run ``validate``'s first
# records. The same few strings recur: each is compiled once here.
_compiled: dict[str, types.CodeType] = {}
_NOT_SIMPLE = object()
_LITERAL_VALUES = (str, int, bool, type(None))


def _resolve_types(kind: type) -> None:
    """``attrs.resolve_types(kind)``: each field's ``type`` made what ``typing.get_type_hints``
    makes it. Annotations that are names, builtin generics and unions of them are evaluated
    here, in the order ``get_type_hints`` looks names up; a class with any other annotation
    (or one that cannot be evaluated) is left to ``attrs.resolve_types`` whole, so its outcome
    (an error included) is always that of ``typing``."""
    if getattr(kind, "__attrs_types_resolved__", None) == kind:
        return
    hints = _simple_hints(kind)
    if hints is None:
        attrs.resolve_types(kind)
        return
    for field in attrs.fields(kind):
        if field.name in hints:
            object.__setattr__(field, "type", hints[field.name])  # as attrs does: frozen
    kind.__attrs_types_resolved__ = kind  # type: ignore[attr-defined]


def _simple_hints(kind: type) -> dict[str, Any] | None:
    """What ``get_type_hints(kind, include_extras=True)`` returns, when every annotation of
    ``kind`` and its bases is simple; else ``None``."""
    hints: dict[str, Any] = {}
    for base in reversed(kind.__mro__):
        annotations = base.__dict__.get("__annotations__", {})  # noqa: RUF063 - as typing reads it
        if not isinstance(annotations, dict):
            return None
        if not annotations:
            continue
        module = getattr(sys.modules.get(base.__module__), "__dict__", {})
        for name, annotation in annotations.items():
            value = (
                _evaluated(annotation, base, module) if isinstance(annotation, str) else annotation
            )
            if value is _NOT_SIMPLE or not _is_simple(value):
                return None
            hints[name] = value
    return hints


def _evaluated(text: str, base: type, module: dict[str, Any]) -> Any:
    """``text`` evaluated as ``get_type_hints`` evaluates a class's string annotation: the
    module's names first, then the class's own, then the builtins."""
    try:
        if text.isidentifier():
            for names in (module, base.__dict__, vars(builtins)):
                if text in names:
                    return names[text]
            return _NOT_SIMPLE
        code = _compiled.get(text)
        if code is None:
            code = _compiled[text] = compile(text, "<string>", "eval")
        return eval(code, dict(vars(base)), module)
    except Exception:  # noqa: BLE001 - typing says what is wrong with it
        return _NOT_SIMPLE


def _is_simple(value: Any) -> bool:
    """A class, ``Any``, a generic alias of a class (``Callable``'s excepted), a union, a
    ``ClassVar`` of simple values, or a ``Literal`` of plain values: ``typing``'s checks accept
    it and its evaluation gives it back (or an equal alias)."""
    if value is Any:
        return True
    if type(value) is types.GenericAlias:  # not collections.abc.Callable's own kind
        args = value.__args__
        if not isinstance(value.__origin__, type) or getattr(value, "__unpacked__", False):
            return False
        if value.__origin__ is tuple and args[-1:] == (Ellipsis,):
            args = args[:-1]
        return all(_is_simple(arg) for arg in args)
    if type(value) is types.UnionType:
        return all(_is_simple(arg) for arg in value.__args__)
    origin = typing.get_origin(value)
    if origin is typing.ClassVar:
        return all(_is_simple(arg) for arg in typing.get_args(value))
    if origin is typing.Literal:
        return all(type(arg) in _LITERAL_VALUES for arg in typing.get_args(value))
    if origin is not None:
        return False
    return isinstance(value, type) and value not in (typing.Generic, typing.Protocol)

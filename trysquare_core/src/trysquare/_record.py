"""``record`` and ``mutable_record``: ``attrs.frozen`` and ``attrs.define`` with shared methods.

For every class it builds, attrs writes ``__eq__``, ``__hash__`` and ``__repr__`` out as
Python source and compiles them; on the start of a one-run ``validate`` or ``report``,
which builds some thirty records, that compiling was the larger part of building them.
A class decorated here is built by attrs without them and gets shared functions instead,
which read the field names kept on the class and answer as attrs' own would: ``==``
compares the fields attrs would compare, in order, between instances of the very same
class; a frozen record's hash is consistent with it (a mutable one is unhashable, as
attrs makes it); ``repr`` reads ``Name(field=value, ...)``, ``...`` for an object
already being shown, and a class's own ``__repr__`` stays.

For mypy (and its attrs plugin) they *are* ``attrs.frozen`` and ``attrs.define``. A
class writing its own ``__eq__``/``__ne__``/``__hash__``, or an option touching the
methods (``eq``, ``order``, ``repr``, ``hash``, ``unsafe_hash``, ``cache_hash``), is
left to attrs whole.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

__all__ = ["mutable_record", "record"]

_METHOD_OPTIONS = frozenset({"eq", "order", "repr", "hash", "unsafe_hash", "cache_hash"})
_OWN_METHODS = frozenset({"__eq__", "__ne__", "__hash__", "__repr__"})

# Shared by every record: attrs keeps its own, so a cycle through both kinds still ends.
_showing = threading.local()


def _record_eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    equal: Any = True
    # As attrs' generated ``a == a2 and b == b2``: the first false comparison is the answer.
    for name, key in self.__class__.__record_compared__:
        if key is None:
            equal = getattr(self, name) == getattr(other, name)
        else:
            equal = key(getattr(self, name)) == key(getattr(other, name))
        if not equal:
            return equal
    return equal


def _record_hash(self: Any) -> int:
    cls = self.__class__
    return hash((cls.__record_hash_seed__, cls.__record_hashed__(self)))


def _record_repr(self: Any) -> str:
    try:
        showing: set[int] = _showing.ids
    except AttributeError:
        showing = _showing.ids = {id(self)}
    else:
        if id(self) in showing:
            return "..."
        showing.add(id(self))
    try:
        parts = []
        for name, show, initialised in self.__class__.__record_shown__:
            value = getattr(self, name) if initialised else getattr(self, name, attrs.NOTHING)
            parts.append(f"{name}={show(value)}")
        return f"{self.__class__.__qualname__.rsplit('>.', 1)[-1]}({', '.join(parts)})"
    finally:
        showing.remove(id(self))


def _eq_key(field: attrs.Attribute[Any]) -> Callable[[Any], Any] | None:
    key: Callable[[Any], Any] | None = getattr(field, "eq_key", None)  # not in attrs' stubs
    return key


def _hashed_values(fields: tuple[attrs.Attribute[Any], ...]) -> Callable[[Any], Any]:
    """One function giving the values a record's hash is made of (a C getter where it can)."""
    names = tuple(field.name for field in fields)
    if any(_eq_key(field) is not None for field in fields):
        keyed = tuple((field.name, _eq_key(field)) for field in fields)
        return lambda value: tuple(
            key(getattr(value, name)) if key else getattr(value, name) for name, key in keyed
        )
    if not names:
        return lambda _: ()
    return operator.attrgetter(*names)


def _record_maker(make: Callable[..., Any], *, hashable: bool) -> Callable[..., Any]:
    """``make`` (``attrs.frozen`` or ``attrs.define``) with the shared methods put in."""

    def decorate(maybe_cls: type | None = None, /, **options: Any) -> Any:
        """The attrs decorator (its options too), with the comparison, hash and repr every
        record shares put in instead of attrs' code written and compiled for this class."""

        def build(cls: type) -> type:
            own = cls.__dict__.keys()
            if options.keys() & _METHOD_OPTIONS or own & {"__eq__", "__ne__", "__hash__"}:
                built_by_attrs: type = make(cls, **options)
                return built_by_attrs
            built: type = make(cls, eq=False, repr=False, **options)
            fields = attrs.fields(built)
            shared: dict[str, Any] = {
                "__record_compared__": tuple(
                    (field.name, _eq_key(field)) for field in fields if field.eq
                ),
                "__eq__": _record_eq,
                # attrs makes a mutable class that compares by value unhashable
                "__hash__": None,
            }
            if hashable:
                hashed = tuple(
                    field
                    for field in fields
                    if field.hash is True or (field.hash is None and field.eq is True)
                )
                shared["__record_hashed__"] = staticmethod(_hashed_values(hashed))
                shared["__record_hash_seed__"] = hash((built.__module__, built.__qualname__))
                shared["__hash__"] = _record_hash
            if "__repr__" not in own:  # a class's own repr stays, as attrs would leave it
                shared["__record_shown__"] = tuple(
                    (field.name, repr if field.repr is True else field.repr, field.init)
                    for field in fields
                    if field.repr is not False
                )
                shared["__repr__"] = _record_repr
            for name, value in shared.items():
                setattr(built, name, value)
            return built

        return build if maybe_cls is None else build(maybe_cls)

    return decorate


if TYPE_CHECKING:
    from attrs import define as mutable_record
    from attrs import frozen as record
else:
    record = _record_maker(attrs.frozen, hashable=True)
    mutable_record = _record_maker(attrs.define, hashable=False)

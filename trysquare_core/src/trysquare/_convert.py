"""The one converter that turns TOML tables into trysquare's attrs records.

Strict: unknown keys are refused (with a close-match suggestion), and ``str``,
``int``, ``float`` and ``bool`` are never coerced (cattrs would turn ``1`` into
``"1"``). A cattrs error tree is turned into ``file: key.path: message`` lines.

cattrs is imported, and its structure functions generated, only when a table is not
plain: :mod:`trysquare._plain_structure` first builds the record from a table whose every
key is known and every value already of its field's type (what a one-run ``validate`` or
``report`` reads), and gives up on anything else, which cattrs then structures or refuses
with the lines above. Every refusal, and every answer, is cattrs' own. Likewise a plain TOML
text is read by :mod:`trysquare._plain_toml`, and any other by :mod:`tomllib` (imported then).
"""

from __future__ import annotations

import functools
import os
import re
import stat
import typing
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from trysquare import _plain_structure, _plain_toml
from trysquare.errors import ScenarioError, TrysquareError

if TYPE_CHECKING:
    import cattrs

T = TypeVar("T")

# Hooks a mode added for its own types, in order: given to cattrs when it is built, and
# making the plain path give up on those types.
_added_hooks: list[tuple[Any, Callable[[Any, Any], Any]]] = []


@functools.cache
def _cattrs() -> cattrs.Converter:
    """The one cattrs converter, built on first use (a table that is not plain)."""
    import cattrs

    converter = cattrs.Converter(forbid_extra_keys=True)
    converter.register_structure_hook(str, _strict_str)
    converter.register_structure_hook(int, _strict_int)
    converter.register_structure_hook(float, _strict_float)
    converter.register_structure_hook(bool, _strict_bool)
    converter.register_structure_hook(Path, _strict_path)
    converter.register_structure_hook_factory(_is_sequence, _sequence_hook)
    for kind, hook in _added_hooks:
        converter.register_structure_hook(kind, hook)
    return converter


def _strict_str(value: Any, _: type) -> str:
    if not isinstance(value, str):
        raise ValueError(f"must be a string, not {_describe(value)}")
    return value


def _strict_int(value: Any, _: type) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"must be a whole number, not {_describe(value)}")
    return value


def _strict_float(value: Any, _: type) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"must be a number, not {_describe(value)}")
    return float(value)


def _strict_bool(value: Any, _: type) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false, not {_describe(value)}")
    return value


def _strict_path(value: Any, _: type) -> Path:
    return Path(_strict_str(value, str))


def _describe(value: Any) -> str:
    kinds = {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a table",
    }
    return kinds.get(type(value), type(value).__name__)


def _is_sequence(kind: Any) -> bool:
    return typing.get_origin(kind) in (tuple, list)


def _sequence_hook(kind: Any) -> Any:
    """TOML arrays only (a string is not a list of characters), items checked one by one."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    fixed = origin is tuple and not (len(args) == 2 and args[1] is Ellipsis)

    from cattrs.errors import IterableValidationError, IterableValidationNote

    converter = _cattrs()

    def hook(value: Any, _: Any) -> Any:
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"must be a list, not {_describe(value)}")
        if fixed and len(value) != len(args):
            raise ValueError(f"must be a list of {len(args)} items, not {len(value)}")
        items, errors = [], []
        for index, item in enumerate(value):
            item_kind = args[index] if fixed else (args[0] if args else Any)
            try:
                items.append(converter.structure(item, item_kind))
            except Exception as error:  # noqa: BLE001 - gathered into one cattrs error
                note = IterableValidationNote(
                    f"Structuring {kind} @ index {index}", index, item_kind
                )
                error.__notes__ = [*getattr(error, "__notes__", []), note]
                errors.append(error)
        if errors:
            raise IterableValidationError(f"While structuring {kind}", errors, kind)
        return origin(items)

    return hook


def register_structure_hook(kind: Any, hook: Any) -> None:
    """Let a mode add a strict check for one of its own types."""
    _added_hooks.append((kind, hook))
    _plain_structure.give_up_on(kind)
    if _cattrs.cache_info().currsize:
        _cattrs().register_structure_hook(kind, hook)


def kind_of(mode: int) -> str:
    """What a file that is not a regular one is, in words ("a FIFO", "a folder", ...)."""
    return _KINDS.get(stat.S_IFMT(mode), "a device")


_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a folder"}


def read_toml(
    path: Path, *, error: type[TrysquareError], label: str | None = None
) -> dict[str, Any]:
    """Parse a TOML file, or raise ``error`` with one sentence starting with ``label``."""
    label = label or str(path)
    try:
        # Opened without waiting: a FIFO put in a file's place (a run.toml in an agent's
        # reach) would block every command on its first read, for ever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise error(f"{label}: no such file") from None
    except OSError as os_error:
        raise error(f"{label}: cannot be read ({os_error.strerror})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise error(f"{label}: is {kind_of(mode)}, not a file")
        with open(fd, "rb", closefd=False) as handle:
            content = handle.read()
    except OSError as os_error:
        raise error(f"{label}: cannot be read ({os_error.strerror})") from None
    finally:
        os.close(fd)
    try:
        return _plain_toml.loads(content.decode())
    except (_plain_toml.NotPlain, UnicodeDecodeError):
        pass  # tomllib reads it, or says what is wrong
    import tomllib

    try:
        return tomllib.loads(content.decode())
    except tomllib.TOMLDecodeError as decode_error:
        raise error(f"{label}: not valid TOML ({decode_error})") from None
    except UnicodeDecodeError as undecodable:
        raise error(f"{label}: not valid TOML (not UTF-8: byte {undecodable.start})") from None
    except RecursionError:
        raise error(f"{label}: not valid TOML (nested too deeply to read)") from None


def structure(
    data: Mapping[str, Any], cls: type[T], *, file: Path, path: str = "", label: str | None = None
) -> T:
    """Structure ``data`` into ``cls`` or raise one :class:`ScenarioError` naming the key.

    Each line starts with ``label`` (default: the file's name).
    """
    label = label or file.name
    try:
        return _plain_structure.structure(data, cls)
    except _plain_structure.NotPlain:
        pass  # cattrs structures it, or says what is wrong
    from cattrs.errors import ClassValidationError, IterableValidationError

    try:
        return _cattrs().structure(data, cls)
    except (ClassValidationError, IterableValidationError) as error:
        lines = _without_explained(list(_error_lines(error, path, cls)))
        raise ScenarioError("\n".join(f"{label}: {line}" for line in lines)) from None
    except (ValueError, TypeError, KeyError) as error:
        where = f"{path}: " if path else ""
        raise ScenarioError(f"{label}: {where}{error}") from None


def _without_explained(lines: list[str]) -> list[str]:
    """Drop "required key is missing" where a misspelt key already says which one."""
    explained = set()
    for line in lines:
        match = re.match(r"(.*?)([^.\]]+): unknown key \(did you mean '([^']+)'\?\)$", line)
        if match:
            explained.add(f"{match.group(1)}{match.group(3)}: required key is missing")
    return [line for line in lines if line not in explained] or lines


def unstructure(value: Any) -> Any:
    return _cattrs().unstructure(value)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _error_lines(error: BaseException, path: str, cls: Any) -> Iterator[str]:
    from cattrs.errors import (
        ClassValidationError,
        ForbiddenExtraKeysError,
        IterableValidationError,
    )

    if isinstance(error, (ClassValidationError, IterableValidationError)):
        with_notes, without_notes = error.group_exceptions()
        for inner, note in with_notes:
            name = getattr(note, "name", None)
            index = getattr(note, "index", None)
            if name is not None:
                inner_path = _join(path, name)
                if isinstance(inner, KeyError):
                    yield f"{inner_path}: required key is missing"
                    continue
                yield from _error_lines(inner, inner_path, getattr(note, "type", None))
            elif index is not None:
                yield from _error_lines(inner, f"{path}[{index + 1}]", getattr(note, "type", None))
            else:
                yield from _error_lines(inner, path, None)
        for inner in without_notes:
            yield from _error_lines(inner, path, cls)
        return
    if isinstance(error, ForbiddenExtraKeysError):
        known = [field.name for field in attrs.fields(error.cl)] if attrs.has(error.cl) else []
        for key in sorted(error.extra_fields):
            yield f"{_join(path, key)}: unknown key{_suggest(key, known)}"
        return
    yield f"{path}: {error}" if path else str(error)


def _suggest(key: str, known: list[str]) -> str:
    import difflib  # only a refusal needs it: not imported on every start

    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""

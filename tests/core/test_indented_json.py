"""The indented JSON trysquare writes is json's text, byte for byte, without json's
pure-Python encoder (what every result, context, work record and context digest uses)."""

from __future__ import annotations

import enum
import json
import math
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from trysquare import _atomic
from trysquare import context as contexts


class _Number(enum.IntEnum):
    ONE = 1


class _Text(str):
    pass


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    # Lone surrogates (a file name that is not UTF-8) and every escape json knows.
    | st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=8)
    | st.sampled_from([_Number.ONE, _Text("sub"), math.nan, -0.0, 1e300, 10**40])
)
_KEYS = st.text(max_size=6) | st.sampled_from([1, 2.5, True, None, _Text("k")])
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(_KEYS, inner, max_size=4)
        | st.dictionaries(st.text(max_size=4), inner, max_size=3).map(OrderedDict)
    ),
    max_leaves=12,
)


def _json_said(value: Any) -> str | type[BaseException]:
    """What json itself writes for trysquare's arguments (as dump_json did), or what it raises."""
    try:
        text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError) as error:
        return type(error)
    return text + "\n"


def _dumped(value: Any) -> str | type[BaseException]:
    try:
        return _atomic.dump_json(value)
    except (TypeError, ValueError) as error:
        return type(error)


@settings(max_examples=400, deadline=None)
@given(_VALUES)
def test_dump_json_writes_what_json_writes(value: Any) -> None:
    assert _dumped(value) == _json_said(value)


def test_dump_json_cycles_and_deep_nesting_behave_as_json() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    assert _dumped(cycle) is ValueError  # json: "Circular reference detected"
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(RecursionError):
        _atomic.dump_json(deep)


def _count_pure_python_dumps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    import json.encoder

    calls = [0]
    made = json.encoder._make_iterencode

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return made(*args, **kwargs)

    monkeypatch.setattr(json.encoder, "_make_iterencode", counted)
    return calls


def test_results_contexts_and_digests_skip_json_pure_python_encoder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _count_pure_python_dumps(monkeypatch)
    result = {
        "context_digest": "sha256:00",
        "duration": 0.05,
        "error": None,
        "metrics": {"changed": True, "score": 0.5, "count": 3},
        "reasons": {},
        "state": "valid",
        "validator": {"digest": "sha256:11", "mode": "script", "name": "script"},
    }
    context = {
        "repo": "/x/runs/r1/repo",
        "touched": ["a.py", "caf\udce9.py"],
        "files": {"a.py": {"status": "M"}},
        "diff": None,
        "declared": ["changed"],
    }
    text = contexts.dump_context(context)
    _atomic.dump_json(result)
    contexts.context_digest(text, context, root=__import__("pathlib").Path("/x/runs/r1"))
    assert calls[0] == 0
    # What is not sure to be json's own text is still json's: one pure-Python dump.
    _atomic.dump_json({1: "a key that is not text"})
    assert calls[0] == 1

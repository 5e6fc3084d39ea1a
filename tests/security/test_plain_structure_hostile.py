"""A ``run.toml`` (and a scenario) mangled every way: the plain path never decides alone.

``trysquare._plain_structure`` builds a record from a plain table without cattrs. A run's
``run.toml`` is the agent's to write, so every table here (each key given each kind of
value, each key dropped, an unknown key at each level) must come out of
``_convert.structure`` exactly as out of cattrs alone: the same record (compared by its
``repr``, so a tuple is not a list and ``1.0`` is not ``1``) or the same refusal, word for
word. A plain path accepting what cattrs refuses would let a hostile value through.
"""

from __future__ import annotations

import copy
import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from trysquare import _convert, _plain_structure, runs, scenario
from trysquare.errors import ScenarioError

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = (
    "trysquare._plain_structure",
    "trysquare._convert",
    "trysquare.scenario",
    "trysquare.runs",
)

ODD_VALUES: list[Any] = [
    True,
    0,
    7,
    1.5,
    "",
    "text",
    [],
    ["a"],
    ["a", "b"],
    [1],
    [["a", "b"]],
    [["a"]],
    {},
    {"tag": "v1"},
    {"x": 1},
    None,
    datetime.date(2024, 1, 2),
]

RUN_TABLE: dict[str, Any] = {
    "cell": "c0",
    "repetition": 1,
    "prompt": "prompt.md",
    "id": "r1",
    "repo": "repo",
    "base": "HEAD",
    "session": "s.jsonl",
    "session_format": "claude",
    "trace": "t.json",
    "model": "m",
    "given": ["a.py"],
    "etalon": {"tag": "v1", "checkout": "main"},
    "excluded": ["b.py"],
}

SCENARIO_TABLE: dict[str, Any] = {
    "task": {
        "test_command": "pytest",
        "prepare": ["make"],
        "artefacts": ["out"],
        "pass_env": ["HOME"],
        "network": False,
        "isolation": "preferred",
        "limits": {"memory_mib": 512},
        "readable": ["/opt"],
        "repo": "r",
    },
    "validation": [{"mode": "script", "command": "x.sh", "metrics": ["m"]}],
    "verdict": {
        "reference": "c0",
        "criteria": ["m"],
        "validity": ["m"],
        "agreement": [["a", "b"]],
        "stopping": "fixed",
    },
    "scenario": {"name": "s", "description": "d"},
    "axes": {"model": ["a"]},
}


def _mangled(table: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """``table`` itself, then each key (at every level) dropped, given each odd value, and
    an unknown key beside it."""
    yield table
    for key, value in table.items():
        without = dict(table)
        del without[key]
        yield without
        for odd in ODD_VALUES:
            yield {**table, key: odd}
        if isinstance(value, dict):
            for inner in _mangled(value):
                yield {**table, key: inner}
        if isinstance(value, list) and value and isinstance(value[0], dict):
            for inner in _mangled(value[0]):
                yield {**table, key: [inner]}
    yield {**table, "metircs": 1}


def _outcome(data: dict[str, Any], kind: type) -> str:
    try:
        return "record " + repr(_convert.structure(copy.deepcopy(data), kind, file=Path("x.toml")))
    except ScenarioError as error:
        return "refused " + error.message


@pytest.mark.parametrize(
    ("kind", "table"), [(runs._RunFile, RUN_TABLE), (scenario._ScenarioFile, SCENARIO_TABLE)]
)
def test_every_mangled_table_comes_out_as_cattrs_alone_makes_it(
    kind: type, table: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    tables = list(_mangled(table))
    assert len(tables) > 250
    by_both = [_outcome(data, kind) for data in tables]
    plain = 0
    for data in tables:
        try:
            _plain_structure.structure(copy.deepcopy(data), kind)
            plain += 1
        except _plain_structure.NotPlain:
            pass

    def never_plain(data: Any, kind: Any) -> Any:
        raise _plain_structure.NotPlain

    monkeypatch.setattr(_plain_structure, "structure", never_plain)
    by_cattrs = [_outcome(data, kind) for data in tables]
    assert by_both == by_cattrs
    # Both answers occur: the plain path took the plain tables, cattrs refused the others.
    assert plain > 10
    assert sum(outcome.startswith("refused ") for outcome in by_cattrs) > 100

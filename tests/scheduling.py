"""The suite's xdist work units, longest first, from the seconds each test took when measured.

pytest-xdist (``--dist loadgroup``) hands its workers units of work in the order it reads
them: one xdist group, or one test. Read in collection order, the suite ended on a unit of
tens of seconds (a pip install in a fresh venv, collected near the end) that one worker ran
alone while the others had finished. Started first, a long unit overlaps the short ones and
the workers end together: the longest-processing-time-first rule.

``tests/durations.json`` holds the tests measured at a second or more (wall time of set-up,
call and tear-down, the xdist group left out of the id). A test missing there counts as
short, so a new test costs nothing but its place in the order. Measure again after the suite
changed much:

    uv run pytest --durations=0 -q | uv run python -m tests.scheduling > tests/durations.json
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

DURATIONS = Path(__file__).with_name("durations.json")
# What a test missing from DURATIONS counts for: most tests take a tenth of a second.
UNMEASURED_SECONDS = 0.1
# Kept in DURATIONS: shorter tests change the order of little but the short tail.
KEPT_FROM_SECONDS = 1.0


def plain_id(nodeid: str) -> str:
    """``nodeid`` without the ``@group`` pytest-xdist adds to it (a parameter may hold ``@``)."""
    if nodeid.rfind("@") > nodeid.rfind("]"):
        return nodeid.rsplit("@", 1)[0]
    return nodeid


def load_durations(path: Path = DURATIONS) -> dict[str, float]:
    """The measured seconds by test id; none when the file is absent or unreadable (the
    order then stays the collection's: slower, never wrong)."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {k: float(v) for k, v in found.items() if isinstance(v, int | float)}


def unit_of(item: pytest.Item) -> str:
    """The unit pytest-xdist's loadgroup scheduling puts ``item`` in: its group, or itself."""
    group = item.get_closest_marker("xdist_group")
    if group is not None and group.args:
        return str(group.args[0])
    return item.nodeid


def longest_first(items: Sequence[pytest.Item], durations: dict[str, float]) -> list[pytest.Item]:
    """``items`` with their units in decreasing expected seconds.

    A unit's tests keep their order and stay together: a group's shared fixture is set up
    once and torn down after its last user, as in collection order. Equal units keep the
    collection's order.
    """
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(unit_of(item), []).append(item)

    def expected(unit: list[pytest.Item]) -> float:
        return sum(durations.get(plain_id(i.nodeid), UNMEASURED_SECONDS) for i in unit)

    ordered = sorted(units.values(), key=expected, reverse=True)  # sorted() is stable
    return [item for unit in ordered for item in unit]


_DURATION_LINE = re.compile(r"^(\d+(?:\.\d+)?)s (?:setup|call|teardown) +(\S.*?)\s*$")


def durations_from_report(lines: Iterable[str]) -> dict[str, float]:
    """The seconds of each test at least ``KEPT_FROM_SECONDS`` long, from pytest's
    ``--durations=0`` report (set-up, call and tear-down added up), sorted by id."""
    seconds: dict[str, float] = {}
    for line in lines:
        match = _DURATION_LINE.match(line)
        if match:
            test = plain_id(match.group(2))
            seconds[test] = seconds.get(test, 0.0) + float(match.group(1))
    return {k: round(v, 1) for k, v in sorted(seconds.items()) if v >= KEPT_FROM_SECONDS}


def main() -> None:
    """Read a ``--durations=0`` report on stdin, print ``tests/durations.json``'s text."""
    print(json.dumps(durations_from_report(sys.stdin), indent=1, sort_keys=True))


if __name__ == "__main__":
    main()

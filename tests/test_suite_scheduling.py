"""The suite's own scheduling (tests/scheduling.py): the longest xdist units go out first."""

from __future__ import annotations

import os
from pathlib import Path
from typing import cast

import pytest

from tests import scheduling

pytestmark = pytest.mark.fast


class _Item:
    """What :func:`scheduling.longest_first` reads of a collected test: its id and group."""

    def __init__(self, nodeid: str, group: str | None = None) -> None:
        self.nodeid = nodeid
        self.group = group

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        if name != "xdist_group" or self.group is None:
            return None
        return pytest.mark.xdist_group(self.group).mark

    def __repr__(self) -> str:
        return self.nodeid


def _ids(items: list[pytest.Item]) -> list[str]:
    return [item.nodeid for item in items]


def test_units_go_out_longest_first_and_a_groups_tests_stay_together_in_order() -> None:
    items = [
        _Item("a.py::short"),
        _Item("b.py::one", "venv"),
        _Item("a.py::long"),
        _Item("c.py::unmeasured"),
        _Item("b.py::two", "venv"),
        _Item("c.py::also_unmeasured"),
    ]
    durations = {"a.py::short": 1.0, "a.py::long": 9.0, "b.py::one": 5.0, "b.py::two": 5.0}
    ordered = scheduling.longest_first(cast(list[pytest.Item], items), durations)
    assert _ids(ordered) == [
        "b.py::one",  # the group: 10 s in all
        "b.py::two",
        "a.py::long",
        "a.py::short",
        "c.py::unmeasured",  # unmeasured and equal: in collection order
        "c.py::also_unmeasured",
    ]


def test_without_measurements_the_collection_order_stays(tmp_path: Path) -> None:
    items = cast(list[pytest.Item], [_Item("a.py::x"), _Item("b.py::y", "g"), _Item("c.py::z")])
    assert scheduling.load_durations(tmp_path / "absent.json") == {}
    (tmp_path / "broken.json").write_text("[1, 2", encoding="utf-8")
    assert scheduling.load_durations(tmp_path / "broken.json") == {}
    assert scheduling.longest_first(items, {}) == items


def test_the_measurements_are_read_from_pytests_durations_report() -> None:
    report = """\
============================= slowest durations ==============================
12.50s call     tests/test_install.py::test_plain_pip
3.00s setup    tests/x.py::test_shared[a@b]@tests/x.py::venv
0.40s call     tests/x.py::test_shared[a@b]@tests/x.py::venv
0.10s teardown tests/x.py::test_shared[a@b]@tests/x.py::venv
0.90s call     tests/y.py::test_quick
(1200 durations < 0.005s hidden.  Use -vv to show these durations.)
"""
    assert scheduling.durations_from_report(report.splitlines()) == {
        "tests/test_install.py::test_plain_pip": 12.5,
        "tests/x.py::test_shared[a@b]": 3.5,  # its phases added, its group left out
    }


def test_every_measured_test_is_in_a_file_of_the_suite() -> None:
    durations = scheduling.load_durations()
    assert len(durations) > 20, "tests/durations.json is missing or nearly empty"
    root = Path(__file__).resolve().parents[1]
    gone = sorted({t.split("::")[0] for t in durations if not (root / t.split("::")[0]).is_file()})
    assert not gone, f"tests/durations.json names files that are gone: {gone}; measure again"


def test_this_session_hands_its_units_out_longest_first(request: pytest.FixtureRequest) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # no workers: the order stays the collection's (the folder loops read it)
    items = request.session.items
    durations = scheduling.load_durations()
    expected: dict[str, float] = {}
    order: list[str] = []
    for item in items:
        unit = scheduling.unit_of(item)
        if unit not in expected:
            order.append(unit)
            expected[unit] = 0.0
        else:
            assert order[-1] == unit, f"{unit}'s tests are apart"
        expected[unit] += durations.get(
            scheduling.plain_id(item.nodeid), scheduling.UNMEASURED_SECONDS
        )
    seconds = [expected[unit] for unit in order]
    assert seconds == sorted(seconds, reverse=True), "the units are not longest first"
    assert request.config.getoption("loadscopereorder") is False  # xdist keeps this order

"""The suite's own set-up: the users of a shared fixture run on one xdist worker."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="module")
def shared() -> str:
    return "built once"


def test_a_module_fixture_puts_its_users_in_one_xdist_group(
    shared: str, request: pytest.FixtureRequest
) -> None:
    group = request.node.get_closest_marker("xdist_group")
    assert group is not None and group.args == ("tests/test_suite_grouping.py",)
    if not (os.environ.get("PYTEST_XDIST_WORKER") and request.config.getvalue("loadgroup")):
        return  # no workers: nothing to spread
    # pytest-xdist schedules by the group it read into the node id: a group added after it
    # read them was ignored, and each worker built the browser and the venvs again.
    assert request.node.nodeid.endswith("@tests/test_suite_grouping.py")

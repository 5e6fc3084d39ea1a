"""Metric and Unjudged: the values a validator can give."""

from __future__ import annotations

import pytest
import trysquare.assay
from trysquare.assay import Metric, Unjudged

pytestmark = pytest.mark.fast  # the inner loop: `uv run pytest -m fast -n 0`


def test_the_module_exports_exactly_four_names() -> None:
    assert sorted(trysquare.assay.__all__) == ["Assay", "Metric", "Unjudged", "validator"]


def test_a_metric_holds_a_value_and_a_reason() -> None:
    metric = Metric(False, "also touched README.md")
    assert (metric.value, metric.reason) == (False, "also touched README.md")
    assert Metric(True).reason == ""
    assert Metric(True).judged


@pytest.mark.parametrize("reason", ["", "   "])
def test_unjudged_needs_a_reason(reason: str) -> None:
    with pytest.raises(ValueError, match="reason"):
        Metric.unjudged(reason)
    with pytest.raises(ValueError, match="reason"):
        Unjudged(reason)


def test_a_value_of_none_needs_a_reason() -> None:
    with pytest.raises(ValueError, match=r"Metric\.unjudged"):
        Metric(None)
    assert Metric(None, "why").judged is False


def test_unjudged_is_none_with_its_reason() -> None:
    metric = Metric.unjudged("no probe was given to this cell")
    assert metric.value is None
    assert metric.reason == "no probe was given to this cell"
    assert not metric.judged
    assert repr(metric) == "Metric.unjudged('no probe was given to this cell')"


def test_a_reason_is_a_string() -> None:
    with pytest.raises(TypeError):
        Metric(True, None)  # type: ignore[arg-type]


def test_truth_of_a_judged_metric_is_its_value() -> None:
    assert Metric(True)
    assert not Metric(False, "failed")
    assert not Metric(0)


def test_truth_of_an_unjudged_metric_is_refused_not_false() -> None:
    # Folding "could not judge" into False is the error trysquare exists to refuse.
    with pytest.raises(Unjudged, match="the suite ran no tests"):
        bool(Metric.unjudged("the suite ran no tests"))


def test_metrics_compare_by_value_and_reason() -> None:
    assert Metric(True) == Metric(True)
    assert Metric(True) != Metric(True, "x")
    assert Metric(frozenset({"a"})) == Metric(frozenset({"a"}))
    assert len({Metric(True), Metric(True), Metric(False, "x")}) == 2


def test_a_metric_does_not_nest_or_defer() -> None:
    with pytest.raises(TypeError):
        Metric(Metric(True))
    with pytest.raises(TypeError):
        Metric(lambda: True)


def test_unjudged_carries_its_reason() -> None:
    error = Unjudged("this run has no session log")
    assert error.reason == "this run has no session log"
    assert str(error) == "this run has no session log"

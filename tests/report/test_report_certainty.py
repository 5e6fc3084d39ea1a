"""Runs needed, the anytime-valid confidence sequence and Holm's correction (issue 33).

On hand-made rows and answers computed by hand; the simulated error rates are in
``tests/report/test_report_simulation.py``.
"""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

import pytest
from trysquare.report import Layout, build_report, certainty, render, stats

pytestmark = pytest.mark.fast  # the inner loop: `uv run pytest -m fast -n 0`


def cell_rows(cell: str, true: int, n: int, metric: str = "ok") -> list[dict[str, Any]]:
    return [
        {
            "id": f"{cell}-{i}",
            "cell": cell,
            "repetition": i,
            "state": "valid",
            "metrics": {metric: i < true},
            "reasons": {},
            "errors": [],
            "pending": [],
        }
        for i in range(n)
    ]


def layout(**kwargs: Any) -> Layout:
    return Layout(name="demo", metrics=("ok",), reference="ref", **kwargs)


def gap_rows(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["cell"]: row for row in report["gaps"]["rows"]}


# -- the statistics ------------------------------------------------------------------------


def test_runs_needed_is_the_normal_formula_for_the_report_interval() -> None:
    # 0.5 against 0.7, 80% power at 5%: (1.96 + 0.8416)^2 * (0.25 + 0.21) / 0.04 = 90.3.
    assert certainty.runs_needed((0.7, 0.5)) == 91
    assert certainty.runs_needed((0.5, 0.7)) == 91
    assert certainty.runs_needed((0.5, 0.5)) is None  # an observed gap of zero: not reachable
    # Holm's strictest step over 30 gaps asks for more; the anytime sequence asks for more still.
    assert certainty.runs_needed((0.7, 0.5), alpha=0.05 / 30) > 91
    assert certainty.runs_needed((0.7, 0.5), stopping="anytime") > 91
    # A side that already holds more keeps them: only the other side is brought up.
    assert certainty.runs_needed((0.9, 0.5), have=(60, 5)) < certainty.runs_needed((0.9, 0.5)) == 17


def test_the_anytime_sequence_with_equal_runs_is_the_count_difference_plus_minus_the_boundary() -> (
    None
):
    radius = certainty.boundary(200 / 4)
    interval = certainty.anytime_gap((70, 100), (50, 100))
    assert interval.estimate == pytest.approx(0.2)
    assert interval.low == pytest.approx((20 - radius) / 100)
    assert interval.high == pytest.approx((20 + radius) / 100)
    # Wider than the fixed-sample interval at the same runs: the price of looking at will.
    fixed = stats.proportion_gap(
        (70, 100),
        (50, 100),
        cell_counts=stats.resampled_counts(70, 100, stats.rng_for("a")),
        reference_counts=stats.resampled_counts(50, 100, stats.rng_for("b")),
    )
    assert fixed.established and not interval.excludes_zero
    assert interval.high - interval.low > fixed.interval.high - fixed.interval.low


def test_the_anytime_p_value_is_below_alpha_exactly_when_the_sequence_excludes_zero() -> None:
    for cell in [(a, b) for b in (5, 20, 60) for a in range(0, b + 1, max(1, b // 10))]:
        for reference in ((0, 5), (3, 20), (30, 60), (12, 40)):
            excluded = certainty.anytime_gap(cell, reference).excludes_zero
            assert excluded == (certainty.anytime_p_value(cell, reference) < 0.05), (
                cell,
                reference,
            )


def test_the_bootstrap_p_value_agrees_with_the_percentile_interval() -> None:
    for x, rx in ((18, 4), (14, 8), (12, 10), (3, 10), (20, 19)):
        gap = stats.proportion_gap(
            (x, 20),
            (rx, 20),
            cell_counts=stats.resampled_counts(x, 20, stats.rng_for("c", str(x))),
            reference_counts=stats.resampled_counts(rx, 20, stats.rng_for("r", str(rx))),
        )
        assert gap.established == (gap.p_value < 0.05), (x, rx, gap)


def test_fisher_s_exact_test_gives_the_textbook_p_values() -> None:
    # 3/3 against 0/3: of the C(6, 3) = 20 tables with three trues, the two as extreme.
    assert certainty.fisher_p_value((3, 3), (0, 3)) == pytest.approx(0.1)
    assert certainty.fisher_p_value((0, 5), (0, 5)) == 1.0
    assert certainty.fisher_p_value((17, 20), (10, 20)) == pytest.approx(0.0407, abs=1e-4)


def test_holm_rejects_step_down() -> None:
    # m = 4: 0.01 < 0.05/4, then 0.03 is not below 0.05/3: it and everything after stay.
    assert certainty.holm([0.01, 0.04, 0.03, 0.5]) == [True, False, False, False]
    assert certainty.holm([0.001, 0.01, 0.02]) == [True, True, True]
    assert certainty.holm([]) == []


def test_the_mixture_is_tuned_where_its_boundary_is_smallest() -> None:
    rho, v, alpha = certainty.mixture_rho(), certainty.ANYTIME_TARGET / 2, 0.05

    def radius(r: float) -> float:
        return math.sqrt((v + r) * math.log((v + r) / (r * alpha * alpha)))

    assert radius(rho) <= min(radius(rho * 0.8), radius(rho * 1.25))


def test_a_budget_goes_where_it_raises_certainty() -> None:
    gaps = [
        {"cell": "a", "reference": "ref", "rates": (0.7, 0.5)},
        {"cell": "b", "reference": "ref", "rates": (0.9, 0.5)},
    ]
    given = certainty.allocate(gaps, {"a": 10, "b": 10, "ref": 10}, 100)
    assert sum(given.values()) == 100
    assert given["ref"] > given["b"]  # the reference takes part in both gaps
    assert certainty.allocate([], {"a": 1}, 10) == {"a": 0}


# -- in the report -------------------------------------------------------------------------


def test_an_open_gap_says_its_runs_needed_in_every_format() -> None:
    rows = (
        cell_rows("ref", 2, 6)
        + cell_rows("a", 4, 6)
        + cell_rows("b", 2, 6)
        + cell_rows("c", 20, 20)
    )
    report = build_report(layout(), rows)
    by_cell = gap_rows(report)
    assert by_cell["a"]["runs_needed"] == {
        "per_cell": 32,
        "have": 6,
        "reference_has": 6,
        "why": None,
    }
    assert by_cell["b"]["runs_needed"]["per_cell"] is None
    assert by_cell["b"]["runs_needed"]["why"] == "not reachable: the observed gap is zero"
    assert by_cell["c"]["state"] == "established" and by_cell["c"]["runs_needed"] is None
    gaps = report["gaps"]
    assert (gaps["stopping"], gaps["correction"], gaps["tested"], gaps["power"]) == (
        "fixed",
        "none",
        3,
        0.8,
    )

    markdown = render(report, "md")
    assert "- **a** · `ok`: ≈ 32 runs per cell (you have 6)" in markdown
    assert "- **b** · `ok`: not reachable: the observed gap is zero" in markdown
    assert "**c**" not in markdown.split("Runs needed:")[1]  # established: nothing more
    assert markdown.count("Runs needed:") == 1  # the method, stated once
    assert "Procedure: fixed-sample." in markdown and "voids its 5% error" in markdown
    assert "3 gap(s) tested, no correction" in markdown

    data = json.loads(render(report, "json"))
    assert data["gaps"]["rows"][0]["runs_needed"]["per_cell"] == 32
    table = list(csv.DictReader(io.StringIO(render(report, "csv"))))
    needed = {row["cell"]: row for row in table if row["table"] == "runs needed"}
    assert needed["a"]["estimate"] == "32" and needed["a"]["n"] == "6"
    assert needed["b"]["state"] == "not reachable" and needed["b"]["estimate"] == ""
    procedure = {row["metric"]: row for row in table if row["table"] == "procedure"}
    assert procedure["stopping"]["state"] == "fixed"
    assert (procedure["correction"]["state"], procedure["correction"]["n"]) == ("none", "3")


def test_anytime_stopping_draws_the_confidence_sequence_and_says_so() -> None:
    rows = cell_rows("ref", 50, 100) + cell_rows("a", 70, 100)
    fixed = gap_rows(build_report(layout(), rows))["a"]
    anytime_report = build_report(layout(stopping="anytime"), rows)
    anytime = gap_rows(anytime_report)["a"]
    assert fixed["state"] == "established"  # at one planned look, 0.7 vs 0.5 at 100 runs is
    assert anytime["state"] == "inconclusive"  # a peeker's sequence is wider
    sequence = certainty.anytime_gap((70, 100), (50, 100))
    assert (anytime["low"], anytime["high"]) == (round(sequence.low, 6), round(sequence.high, 6))
    assert anytime["runs_needed"]["per_cell"] == certainty.runs_needed(
        (0.7, 0.5), stopping="anytime"
    )
    markdown = render(anytime_report, "md")
    assert "Procedure: anytime-valid." in markdown and "voids" not in markdown
    assert "95% anytime-valid confidence sequence. `established` when it excludes zero." in markdown
    assert "resamples" not in markdown


def test_holm_keeps_a_gap_its_interval_alone_would_establish_inconclusive() -> None:
    # Ten cells against one reference: one clear gap, one borderline, eight null.
    rows = cell_rows("ref", 10, 20) + cell_rows("clear", 20, 20) + cell_rows("edge", 17, 20)
    for index in range(8):
        rows += cell_rows(f"null{index}", 10, 20)
    none = gap_rows(build_report(layout(), rows))
    holm_report = build_report(layout(correction="holm"), rows)
    holm = gap_rows(holm_report)
    assert none["edge"]["state"] == "established" and holm["edge"]["state"] == "inconclusive"
    assert "Holm's correction over 10 gaps does not" in holm["edge"]["why"]
    # Holm ranks fixed-sample gaps by Fisher's exact test.
    assert holm["edge"]["p_value"] == round(certainty.fisher_p_value((17, 20), (10, 20)), 6)
    assert holm["clear"]["state"] == "established"
    # Its runs needed are for Holm's strictest step: more than without the correction.
    assert holm["edge"]["runs_needed"]["per_cell"] == certainty.runs_needed(
        (0.85, 0.5), have=(20, 20), alpha=0.05 / 10
    )
    markdown = render(holm_report, "md")
    assert "10 gap(s) tested, with Holm's correction" in markdown
    assert "`established` when it excludes zero and Holm's correction agrees." in markdown


def test_an_open_gap_never_needs_fewer_runs_than_it_has() -> None:
    # 5/6 against 1/6: the bootstrap interval excludes zero, Fisher's test (p = 0.08) does not
    # let Holm agree, and the normal approximation alone would say 6 runs are plenty.
    rows = cell_rows("ref", 1, 6) + cell_rows("a", 5, 6)
    row = gap_rows(build_report(layout(correction="holm"), rows))["a"]
    assert row["state"] == "inconclusive"
    assert certainty.runs_needed((5 / 6, 1 / 6), have=(6, 6)) <= 6
    assert row["runs_needed"]["per_cell"] == 7

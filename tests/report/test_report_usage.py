"""Issue 15.3: what paid validators spent, totalled per validator and cell, in every format."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from trysquare.report.render import render
from trysquare.report.tables import Layout, build_report
from trysquare.results import usage_of

LAYOUT = Layout(name="s", metrics=("ok", "good"), owners={"ok": "judge", "good": "second"})


def spent(
    requests: Any, tokens_in: Any, tokens_out: Any, price: tuple[Any, Any] = (None, None)
) -> dict:
    return {
        "requests": requests,
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "cached_tokens": None,
        "provider": "p",
        "model": "m",
        "price_input": price[0],
        "price_output": price[1],
    }


def row(run: str, cell: str, usage: dict[str, dict], state: str = "valid") -> dict:
    return {
        "id": run,
        "cell": cell,
        "repetition": 1,
        "state": state,
        "metrics": {"ok": True, "good": False} if state == "valid" else {},
        "reasons": {},
        "errors": [],
        "pending": [],
        "usage": usage,
    }


ROWS = [
    row("a1", "a", {"judge": spent(1, 1_000_000, 100_000, (1.0, 4.0)), "second": spent(2, 10, 5)}),
    row("a2", "a", {"judge": spent(3, 2_000_000, 0, (1.0, 4.0))}, state="invalid"),
    row("b1", "b", {"judge": spent(1, None, None, (1.0, 4.0)), "second": spent(0, 0, 0)}),
]


def test_totals_per_validator_and_cell_then_every_validator() -> None:
    usage = build_report(LAYOUT, ROWS)["usage"]
    keyed = {(u["validator"], u["cell"]): u for u in usage}
    assert list(keyed) == [
        ("judge", "a"),
        ("judge", "b"),
        ("judge", None),
        ("second", "a"),
        ("second", "b"),
        ("second", None),
        (None, "a"),
        (None, "b"),
        (None, None),
    ]
    judge_a = keyed[("judge", "a")]
    # The invalid run's requests and tokens were paid for: they count.
    assert (judge_a["results"], judge_a["requests"], judge_a["input_tokens"]) == (2, 4, 3_000_000)
    assert judge_a["cost_usd"] == pytest.approx(1.0 + 0.4 + 2.0) and judge_a["unpriced"] == {}
    # Priced, but the provider reported no tokens: no cost can be said, and it says why.
    assert keyed[("judge", "b")]["cost_usd"] is None
    assert keyed[("judge", "b")]["unpriced"] == {"tokens not reported": 1}
    assert keyed[("judge", "b")]["input_tokens"] is None  # unknown, not 0
    assert keyed[("second", "a")]["cost_usd"] is None
    assert keyed[("second", "a")]["unpriced"] == {"no price declared": 1}
    assert keyed[("second", "b")]["cost_usd"] == 0  # it sent nothing
    total = keyed[(None, None)]
    assert total["requests"] == 7 and total["results"] == 5
    assert total["cost_usd"] == pytest.approx(3.4) and total["unpriced"] == {
        "no price declared": 1,
        "tokens not reported": 1,
    }


def test_every_format_shows_the_cost_or_says_no_price_was_declared() -> None:
    report = build_report(LAYOUT, ROWS)
    markdown = render(report, "md")
    assert "### Usage and cost" in markdown
    assert "| judge | a | 2 | 4 | 3,000,000 | not reported | 100,000 | $3.40 |" in markdown
    assert "| second | a | 1 | 2 | 10 | not reported | 5 | no price declared |" in markdown
    assert "$3.40 + 1 result(s): no price declared; 1 result(s): tokens not reported" in markdown
    assert json.loads(render(report, "json"))["usage"][0]["cost_usd"] == pytest.approx(3.4)
    table = [r for r in csv.DictReader(io.StringIO(render(report, "csv"))) if r["table"] == "usage"]
    cost = {(r["validator"], r["cell"]): r for r in table if r["metric"] == "cost_usd"}
    assert (
        cost[("second", "a")]["estimate"] == ""
        and cost[("second", "a")]["state"] == "no price declared"
    )
    assert float(cost[("judge", "a")]["estimate"]) == pytest.approx(3.4)
    tokens = {(r["validator"], r["cell"]): r for r in table if r["metric"] == "input_tokens"}
    assert tokens[("judge", "b")]["state"] == "not reported"


def test_no_usage_recorded_means_no_usage_section() -> None:
    rows = [{**r, "usage": {}} for r in ROWS]
    report = build_report(LAYOUT, rows)
    assert report["usage"] == [] and "Usage and cost" not in render(report, "md")


@pytest.mark.parametrize(
    "planted",
    [
        {
            "requests": "<b>9</b>",
            "input_tokens": -1,
            "output_tokens": 1.5,
            "price_input": float("nan"),
            "price_output": True,
            "provider": ["x"],
        },
        {"requests": 10**3, "input_tokens": True, "price_input": "1", "price_output": float("inf")},
    ],
)
def test_a_usage_value_of_the_wrong_kind_reads_as_unknown(planted: dict[str, Any]) -> None:
    clean = usage_of({"usage": planted})
    assert clean is not None
    for key, value in clean.items():
        assert value is None or (type(value) in (int, float) and value >= 0), (key, value)
    assert usage_of({"usage": "lots"}) is None and usage_of({}) is None

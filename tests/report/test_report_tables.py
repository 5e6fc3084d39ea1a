"""The report built from hand-made ``measures.json`` rows, where every answer is known."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

import pytest
from trysquare.report import Layout, build_report, render
from trysquare.report.tables import cell_order, declared_cells

pytestmark = pytest.mark.fast  # the inner loop: `uv run pytest -m fast -n 0`


def row(
    run_id: str,
    cell: str,
    metrics: dict[str, Any],
    *,
    state: str = "valid",
    errors: Sequence[dict[str, str]] = (),
    pending: Sequence[str] = (),
    stale: Sequence[str] = (),
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "id": run_id,
        "cell": cell,
        "repetition": 1,
        "state": state,
        "metrics": metrics,
        "reasons": {},
        "errors": list(errors),
        "pending": list(pending),
    }
    if stale:
        result["stale"] = list(stale)
    return result


def cell_rows(
    cell: str, true: int, n: int, metric: str = "ok", **extra: Any
) -> list[dict[str, Any]]:
    return [row(f"{cell}-{i}", cell, {metric: i < true, **extra}) for i in range(n)]


def layout(**kwargs: Any) -> Layout:
    kwargs.setdefault("metrics", ("ok",))
    return Layout(name="demo", **kwargs)


def gaps_by(report: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["cell"], r["criterion"]): r for r in report["gaps"]["rows"]}


def cell_of(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in report["cells"] if c["cell"] == name)


def test_ten_of_ten_against_none_is_established_five_against_six_is_not() -> None:
    rows = cell_rows("ref", 0, 10) + cell_rows("all", 10, 10)
    report = build_report(layout(reference="ref"), rows)
    assert gaps_by(report)[("all", "ok")]["state"] == "established"
    assert gaps_by(report)[("all", "ok")]["gap"] == 1.0

    rows = cell_rows("six", 6, 10) + cell_rows("five", 5, 10)
    report = build_report(layout(reference="six"), rows)
    five = gaps_by(report)[("five", "ok")]
    assert five["state"] == "inconclusive"
    assert five["gap"] == pytest.approx(-0.1)
    assert five["low"] < 0 < five["high"]
    assert five["cell_score"] == {"true": 5, "n": 10}
    assert five["reference_score"] == {"true": 6, "n": 10}


def test_gap_table_has_one_row_per_cell_and_criterion_naming_cell_and_state() -> None:
    rows = []
    for cell, (a, b) in {"ref": (0, 5), "one": (10, 5), "two": (5, 5)}.items():
        rows += [row(f"{cell}-{i}", cell, {"a": i < a, "b": i < b}) for i in range(10)]
    report = build_report(layout(metrics=("a", "b"), reference="ref"), rows)
    got = [(r["cell"], r["criterion"], r["state"]) for r in report["gaps"]["rows"]]
    assert got == [
        ("one", "a", "established"),
        ("two", "a", "established"),
        ("one", "b", "inconclusive"),
        ("two", "b", "inconclusive"),
    ]
    md = render(report, "md")
    assert "| one | a | 10/10 | 0/10 | +1.000 [+1.000, +1.000] | established |" in md
    assert "| two | b | 5/10 | 5/10 |" in md


def test_no_reference_no_gap_table() -> None:
    report = build_report(layout(), cell_rows("x", 3, 4))
    assert report["gaps"] is None
    assert "Gaps" not in render(report, "md")


def test_an_unjudged_metric_shrinks_only_its_own_denominator() -> None:
    rows = [
        row("r1", "c", {"a": True, "b": True}),
        row("r2", "c", {"a": None, "b": True}),  # a unjudged
        row("r3", "c", {"a": False, "b": False}),
    ]
    report = build_report(layout(metrics=("a", "b")), rows)
    assert cell_of(report, "c")["scores"] == {
        "a": {"true": 1, "n": 2, "unjudged": 1, "pending": 0},
        "b": {"true": 2, "n": 3, "unjudged": 0, "pending": 0},
    }
    assert report["publishable"]
    assert "| c | 3 | 1/2 \u00b7 1 unjudged | 2/3 |" in render(report, "md")


def test_an_invalid_run_leaves_every_denominator_and_blocks_its_cell_only() -> None:
    bad = row(
        "bad",
        "rule",
        {"a": True},
        state="invalid",
        errors=[{"validator": "script", "error": "exited with status 3\nTraceback..."}],
    )
    rows = (
        cell_rows("ref", 1, 4, "a") + cell_rows("rule", 4, 4, "a") + cell_rows("other", 4, 4, "a")
    )
    rows.append(bad)
    report = build_report(layout(metrics=("a",), reference="ref"), rows)
    rule, other = cell_of(report, "rule"), cell_of(report, "other")
    assert rule["scores"]["a"] == {
        "true": 4,
        "n": 4,
        "unjudged": 0,
        "pending": 0,
    }  # the invalid run's True is not counted
    assert (rule["runs"], rule["invalid"]) == (5, 1)
    assert not rule["publishable"]
    assert rule["why_not"] == [{"run": "bad", "reason": "invalid: script: exited with status 3"}]
    assert other["publishable"] and cell_of(report, "ref")["publishable"]
    assert not report["publishable"]
    states = {cell: r["state"] for (cell, _), r in gaps_by(report).items()}
    assert states["rule"] == "not publishable"
    assert states["other"] != "not publishable"
    assert gaps_by(report)[("rule", "a")]["gap"] is None  # no verdict at all
    md = render(report, "md")
    assert "| rule (not publishable) | 5 (1 invalid) | 4/4 |" in md
    assert "- **rule**: 1 invalid run(s)" in md
    assert (
        "- **rule**\n  - run `bad` (#1): invalid, first error: script: exited with status 3" in md
    )


def test_an_unpublishable_reference_withholds_every_verdict() -> None:
    rows = cell_rows("ref", 0, 5) + cell_rows("x", 5, 5)
    rows.append(
        row("broken", "ref", {}, state="invalid", errors=[{"validator": "v", "error": "boom"}])
    )
    report = build_report(layout(reference="ref"), rows)
    assert [r["state"] for r in report["gaps"]["rows"]] == ["not publishable"]
    assert cell_of(report, "x")["publishable"]


def test_only_runs_passing_validity_count_for_a_verdict() -> None:
    # ref: 10 runs, delivered in all, ok in none.
    rows = [row(f"ref-{i}", "ref", {"ok": False, "delivered": True}) for i in range(10)]
    # cell: ok in 10 runs, but 7 of them did not deliver (one unjudged): 3/3 counted.
    rows += [
        row(f"c-{i}", "c", {"ok": True, "delivered": i < 3 if i != 9 else None}) for i in range(10)
    ]
    report = build_report(
        layout(
            metrics=("ok", "delivered"), reference="ref", criteria=("ok",), validity=("delivered",)
        ),
        rows,
    )
    gap = gaps_by(report)[("c", "ok")]
    assert gap["cell_score"] == {"true": 3, "n": 3}
    assert gap["reference_score"] == {"true": 0, "n": 10}
    # The score table still counts every run that judged it.
    assert cell_of(report, "c")["scores"]["ok"] == {
        "true": 10,
        "n": 10,
        "unjudged": 0,
        "pending": 0,
    }
    assert "runs where `delivered` is true" in render(report, "md")


def test_a_pending_form_value_on_a_criterion_blocks_publication() -> None:
    rows = cell_rows("ref", 2, 4) + cell_rows("c", 3, 4)
    rows.append(row("late", "c", {}, state="pending", pending=["ok"]))
    report = build_report(layout(reference="ref", criteria=("ok",)), rows)
    c = cell_of(report, "c")
    assert not c["publishable"]
    assert c["why_not"][0]["run"] == "late" and "ok" in c["why_not"][0]["reason"]
    assert gaps_by(report)[("c", "ok")]["state"] == "not publishable"


def test_a_pending_value_on_a_metric_no_verdict_rests_on_does_not_block() -> None:
    rows = [row(f"r{i}", "c", {"ok": True}, state="pending", pending=["note"]) for i in range(3)]
    report = build_report(layout(metrics=("ok", "note"), reference="c", criteria=("ok",)), rows)
    assert report["publishable"]
    assert cell_of(report, "c")["pending"] == {"note": 3}
    assert cell_of(report, "c")["scores"]["note"] == {
        "true": 0,
        "n": 0,
        "unjudged": 0,
        "pending": 3,
    }
    assert "`note` in 3 run(s)" in render(report, "md")


def test_a_pending_validity_metric_blocks_too() -> None:
    rows = [row("r1", "c", {"ok": True}, state="pending", pending=["delivered"])]
    report = build_report(
        layout(metrics=("ok", "delivered"), criteria=("ok",), validity=("delivered",)), rows
    )
    assert not report["publishable"]


def test_criteria_default_to_every_boolean_metric() -> None:
    rows = [
        row(f"{cell}-{i}", cell, {"a": True, "b": False, "t": 1.5, "files": ["x"]})
        for cell in ("ref", "c")
        for i in range(3)
    ]
    report = build_report(layout(metrics=("a", "b", "t", "files"), reference="ref"), rows)
    assert report["gaps"]["criteria"] == ["a", "b"]
    assert report["metrics"] == {
        "boolean": ["a", "b"],
        "number": ["t"],
        "diagnostic": [{"metric": "files", "kind": "list"}],
    }


def test_a_named_criterion_that_is_not_boolean_is_noted_not_drawn() -> None:
    rows = [row(f"{cell}-{i}", cell, {"t": i}) for cell in ("ref", "c") for i in range(3)]
    report = build_report(layout(metrics=("t",), reference="ref", criteria=("t",)), rows)
    assert report["gaps"]["rows"] == []
    assert any("'t' is not boolean" in note for note in report["notes"])


def test_a_reference_without_runs_means_no_verdict_and_exit_one() -> None:
    report = build_report(layout(reference="nobody"), cell_rows("c", 1, 2))
    assert not report["publishable"]
    assert report["gaps"]["rows"] == []
    assert "reference cell 'nobody' has no run" in render(report, "md")


def test_numbers_get_a_median_and_interval_lists_and_strings_are_diagnostics() -> None:
    rows = [
        row(f"r{i}", "c", {"seconds": float(i), "calls": i * 2, "touched": ["a.py"], "note": "hi"})
        for i in range(1, 10)
    ]
    report = build_report(layout(metrics=("seconds", "calls", "touched", "note")), rows)
    numbers = cell_of(report, "c")["numbers"]
    assert numbers["seconds"]["median"] == 5 and numbers["seconds"]["n"] == 9
    assert numbers["seconds"]["low"] < 5 < numbers["seconds"]["high"]
    assert numbers["calls"]["median"] == 10
    assert "touched" not in cell_of(report, "c")["scores"]
    md = render(report, "md")
    assert (
        "Diagnostics, recorded per run and never aggregated: `touched` (list), `note` (string)."
        in md
    )
    assert "| c | 5 [" in md


def test_mixed_types_are_a_diagnostic() -> None:
    rows = [row("r1", "c", {"m": True}), row("r2", "c", {"m": 3})]
    report = build_report(layout(metrics=("m",)), rows)
    assert report["metrics"]["diagnostic"] == [{"metric": "m", "kind": "mixed: boolean, number"}]


def test_stale_results_are_flagged_by_run() -> None:
    rows = cell_rows("c", 1, 2)
    rows.append(row("old", "c", {"ok": True}, stale=["script"]))
    report = build_report(layout(), rows)
    assert cell_of(report, "c")["stale"] == [{"run": "old", "validators": ["script"]}]
    assert report["publishable"]  # flagged, not blocking
    assert "run `old`: script" in render(report, "md")


def test_agreement_over_rows() -> None:
    rows = (
        [row(f"a{i}", "c", {"j": True, "h": True}) for i in range(20)]
        + [row(f"b{i}", "c", {"j": True, "h": False}) for i in range(5)]
        + [row(f"d{i}", "d", {"j": False, "h": True}) for i in range(10)]
        + [row(f"e{i}", "d", {"j": False, "h": False}) for i in range(15)]
        + [row("x", "d", {"j": True, "h": None})]  # not both booleans: not counted
        + [row("y", "d", {"j": True, "h": True}, state="invalid")]  # invalid: not counted
    )
    report = build_report(layout(metrics=("j", "h"), agreement=(("j", "h"),)), rows)
    (pair,) = report["agreement"]
    assert (pair["n"], pair["raw"], pair["kappa"]) == (50, 0.7, 0.4)  # see the stats test's table
    assert "| `j` vs `h` | 50 | 0.700 | 0.400 |" in render(report, "md")


def test_same_input_gives_byte_identical_output() -> None:
    rows = cell_rows("ref", 3, 9) + cell_rows("a", 6, 9) + cell_rows("b", 5, 8)
    make = lambda: build_report(layout(reference="ref"), [dict(r) for r in rows])
    for fmt in ("md", "json", "csv"):
        assert render(make(), fmt) == render(make(), fmt)
    # Adding a cell does not move another cell's interval: seeds are per cell.
    more = build_report(layout(reference="ref"), rows + cell_rows("z", 1, 9))
    assert gaps_by(more)[("a", "ok")] == gaps_by(make())[("a", "ok")]


def test_json_and_csv_carry_the_same_numbers() -> None:
    rows = cell_rows("ref", 0, 10) + cell_rows("all", 10, 10)
    report = build_report(layout(reference="ref"), rows)
    parsed = json.loads(render(report, "json"))
    assert parsed["gaps"]["rows"][0]["state"] == "established"
    table = list(csv.DictReader(io.StringIO(render(report, "csv"))))
    gap = next(r for r in table if r["table"] == "gap")
    assert (gap["cell"], gap["metric"], gap["estimate"], gap["state"]) == (
        "all",
        "ok",
        "1.0",
        "established",
    )
    # "procedure": which procedure holds and how many gaps were tested (issue 33); no gap is open.
    assert {r["table"] for r in table} == {"score", "gap", "procedure"}


def test_markdown_stays_small_for_a_ci_summary() -> None:
    rows = []
    for c in range(20):
        rows += [
            row(
                f"c{c}-{i}",
                f"cell {c}",
                {"ok": True},
                state="invalid",
                errors=[{"validator": "script", "error": "x" * 5000}],
            )
            for i in range(200)
        ]
    md = render(build_report(layout(), rows), "md")
    assert len(md.encode()) < 64 * 1024
    assert "… and 190 more" in md


def test_cell_names_cannot_break_the_markdown_table() -> None:
    report = build_report(layout(), cell_rows("a | b", 1, 1))
    assert "| a \\| b | 1 | 1/1 |" in render(report, "md")


@pytest.mark.parametrize(
    ("axes", "variants", "expected"),
    [
        (
            {"rule": ["nothing", "rule"], "effort": ["off", "high"]},
            None,
            ["nothing / off", "nothing / high", "rule / off", "rule / high"],
        ),
        ({"rule": {"nothing": {}, "rule": {}}}, None, ["nothing", "rule"]),
        (None, {"rule": {}, "nothing": {}}, ["rule", "nothing"]),
        (None, ["b", "a"], ["b", "a"]),
        (None, [{"name": "b"}, {"name": "a"}], ["b", "a"]),
        ({"x": ["1"]}, ["v"], ["v"]),  # [variants] wins
        (None, None, []),
    ],
)
def test_declared_cells(axes: Any, variants: Any, expected: list[str]) -> None:
    assert declared_cells(axes, variants) == expected


def test_cell_order_declared_first_then_first_appearance() -> None:
    assert cell_order(["b", "a", "gone"], ["z", "a", "y", "b", "z"]) == ["b", "a", "z", "y"]
    assert cell_order([], ["z", "a", "z"]) == ["z", "a"]
    rows = cell_rows("zeta", 1, 1) + cell_rows("alpha", 1, 1)
    report = build_report(layout(declared_cells=("alpha",)), rows, appearance=["zeta", "alpha"])
    assert [c["cell"] for c in report["cells"]] == ["alpha", "zeta"]
    report = build_report(layout(), rows, appearance=["zeta", "alpha"])
    assert [c["cell"] for c in report["cells"]] == ["zeta", "alpha"]


def test_skipped_run_folders_are_noted_and_fail_the_report() -> None:
    report = build_report(layout(), cell_rows("c", 1, 1), skipped=["/x/runs/r9: bad run.toml"])
    assert not report["publishable"]
    assert "/x/runs/r9" in render(report, "md")

"""``trysquare plan``: how many more runs each cell needs, for the harness that makes them.

A pure function of the report (:func:`build_plan`), so the plan and the report's
"runs needed" lines cannot disagree: a cell needs what its most demanding open gap
needs (the reference takes part in every gap), less the runs it holds. With a budget,
:func:`trysquare.report.certainty.allocate` spreads it instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from trysquare._shown import json_text, shown
from trysquare.report import certainty, stats

__all__ = ["build_plan", "render_plan"]

PLAN_FORMATS = ("table", "json", "toml")


def build_plan(report: Mapping[str, Any], *, budget: int | None = None) -> dict[str, Any]:
    """More runs per cell from the report's gap table (``report["gaps"]`` must not be None)."""
    gaps = report["gaps"]
    assert gaps is not None
    reference = gaps["reference"]
    counted = {cell["cell"]: cell["runs"] - cell["invalid"] for cell in report["cells"]}
    more = dict.fromkeys(counted, 0)
    because: dict[str, dict[str, Any]] = {}
    unreachable, undecided, open_gaps = [], [], []
    have = dict(counted)
    for row in gaps["rows"]:
        if row.get("gap") is None:
            undecided.append(
                {"cell": row["cell"], "criterion": row["criterion"], "state": row["state"]}
            )
            continue
        needed = row.get("runs_needed")
        if not needed:
            continue  # established
        if needed["per_cell"] is None:
            unreachable.append(
                {"cell": row["cell"], "criterion": row["criterion"], "why": needed["why"]}
            )
            continue
        cell_score, reference_score = row["cell_score"], row["reference_score"]
        have[row["cell"]] = cell_score["n"]
        have[reference] = max(have.get(reference, 0), reference_score["n"])
        open_gaps.append(
            {
                "cell": row["cell"],
                "reference": reference,
                "rates": (
                    cell_score["true"] / cell_score["n"],
                    reference_score["true"] / reference_score["n"],
                ),
            }
        )
        for side, n in ((row["cell"], cell_score["n"]), (reference, reference_score["n"])):
            extra = max(0, needed["per_cell"] - n)
            if side not in because or extra > more[side]:
                more[side] = max(more[side], extra)
                because[side] = {
                    "cell": row["cell"],
                    "criterion": row["criterion"],
                    "runs_per_cell": needed["per_cell"],
                }
    alpha = 1 - stats.CONFIDENCE
    if gaps.get("correction") == "holm":
        alpha /= max(1, gaps.get("tested") or 1)  # the strictest step, as the report's runs needed
    plan: dict[str, Any] = {
        "scenario": report["scenario"],
        "reference": reference,
        "stopping": gaps.get("stopping", "fixed"),
        "correction": gaps.get("correction", "none"),
        "tested": gaps.get("tested", 0),
        "power": gaps.get("power", certainty.POWER),
        "budget": budget,
        "cells": [
            {
                "cell": cell,
                "reference": cell == reference,
                "have": have[cell],
                "more": more[cell],
                "because": because.get(cell),
            }
            for cell in counted
        ],
        "unreachable": unreachable,
        "undecided": undecided,
    }
    if budget is not None:
        stopping = plan["stopping"]
        given = certainty.allocate(open_gaps, have, budget, stopping=stopping, alpha=alpha)

        def expected(extra: Mapping[str, int]) -> float:
            return sum(
                certainty.power_of(
                    g["rates"],
                    (
                        have[g["cell"]] + extra.get(g["cell"], 0),
                        have[reference] + extra.get(reference, 0),
                    ),
                    stopping=stopping,
                    alpha=alpha,
                )
                for g in open_gaps
            )

        for entry in plan["cells"]:
            entry["budget"] = given.get(entry["cell"], 0)
        plan["expected_established"] = {
            "now": round(expected({}), 3),
            "with_budget": round(expected(given), 3),
            "open_gaps": len(open_gaps),
        }
    return plan


def _toml_string(text: str) -> str:
    """``text`` as a TOML basic string: quotes, backslashes and control characters escaped."""
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def render_plan(plan: Mapping[str, Any], fmt: str) -> str:
    if fmt == "json":
        from trysquare.ci import SCHEMA_VERSION

        data = {**plan, "schema_version": SCHEMA_VERSION}
        return json_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False)) + "\n"
    key = "budget" if plan["budget"] is not None else "more"
    if fmt == "toml":
        what = (
            f"a budget of {plan['budget']} runs spread where they buy most certainty"
            if key == "budget"
            else f"more repetitions per cell for a probability of {plan['power']:.0%} of "
            "establishing each open gap"
        )
        lines = [
            f"# trysquare plan: {what}",
            f"# ({plan['stopping']} procedure, correction {plan['correction']})",
            "[more]",
        ]
        lines += [f"{_toml_string(entry['cell'])} = {entry[key]}" for entry in plan["cells"]]
        return "\n".join(lines) + "\n"
    return _table(plan)


def _table(plan: Mapping[str, Any]) -> str:
    procedure = "anytime-valid" if plan["stopping"] == "anytime" else "fixed-sample"
    correction = "Holm's correction" if plan["correction"] == "holm" else "no correction"
    lines = [
        (
            f"plan for {shown(plan['scenario'])}: more runs per cell for a probability of "
            f"{plan['power']:.0%} of establishing each open gap against "
            f"{shown(plan['reference'])} ({procedure} procedure, {correction}, "
            f"{plan['tested']} gap(s) tested)"
        ),
    ]
    header = ["cell", "counted", "more"]
    budgeted = plan["budget"] is not None
    if budgeted:
        header.append(f"of the budget ({plan['budget']})")
    header.append("for")
    rows = []
    for entry in plan["cells"]:
        label = shown(entry["cell"]) + (" (reference)" if entry["reference"] else "")
        why = entry["because"]
        reason = (
            f"{shown(why['cell'])} \u00b7 {why['criterion']}: "
            f"\u2248 {why['runs_per_cell']:,} per cell"
            if why
            else "\u2013"
        )
        row = [label, str(entry["have"]), str(entry["more"])]
        if budgeted:
            row.append(str(entry["budget"]))
        rows.append([*row, reason])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        lines.append(
            "  ".join(value.ljust(width) for value, width in zip(r, widths, strict=True)).rstrip()
        )
    for item in plan["unreachable"]:
        lines.append(f"{shown(item['cell'])} \u00b7 {item['criterion']}: {item['why']}")
    for item in plan["undecided"]:
        lines.append(
            f"{shown(item['cell'])} \u00b7 {item['criterion']}: {item['state']}, no gap drawn"
        )
    if budgeted:
        expected = plan["expected_established"]
        lines.append(
            f"expected open gaps established: {expected['now']:.2f} of {expected['open_gaps']} "
            "now, "
            f"{expected['with_budget']:.2f} with the budget (if the observed rates held)"
        )
    if not any(entry["more"] for entry in plan["cells"]) and not budgeted:
        lines.append("no more runs needed: every gap that more runs could establish already is")
    return "\n".join(lines) + "\n"

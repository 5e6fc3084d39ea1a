"""From ``measures.json`` rows to the report: one JSON-ready dict, renderers aside.

Everything here is a pure function of a :class:`Layout` (what the scenario says
about metrics, cells and the verdict) and the rows, so it is tested on hand-made
rows and benchmarked without touching a disk.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from trysquare._record import record
from trysquare.report import certainty, stats
from trysquare.report.usage import usage_table

__all__ = ["Layout", "build_report", "cell_order", "declared_cells", "run_details"]

Row = Mapping[str, Any]


@record
class Layout:
    """What the report needs from the scenario, in a form a test can write by hand."""

    name: str
    metrics: tuple[str, ...]  # every declared metric, in declaration order
    reference: str | None = None
    criteria: tuple[str, ...] | None = None  # None: every boolean metric
    validity: tuple[str, ...] = ()
    agreement: tuple[tuple[str, str], ...] = ()
    declared_cells: tuple[str, ...] = ()  # from [axes]/[variants]; () when none
    owners: Mapping[str, str] = attrs.field(factory=dict)  # metric -> the validator declaring it
    stopping: str = "fixed"  # [verdict] stopping: "fixed" (one look) or "anytime"
    correction: str = "none"  # [verdict] correction: "none" or "holm"

    @classmethod
    def from_scenario(cls, scenario: Any) -> Layout:
        verdict = scenario.verdict
        return cls(
            name=scenario.name,
            metrics=tuple(m for v in scenario.validations for m in v.metrics),
            reference=verdict.reference,
            criteria=None if verdict.criteria is None else tuple(verdict.criteria),
            validity=tuple(verdict.validity),
            agreement=tuple(tuple(pair) for pair in verdict.agreement),
            declared_cells=tuple(declared_cells(scenario.axes, scenario.variants)),
            owners={m: v.name for v in scenario.validations for m in v.metrics},
            stopping=getattr(verdict, "stopping", "fixed"),
            correction=getattr(verdict, "correction", "none"),
        )


# -- cell order -------------------------------------------------------------------------


def _names(values: Any) -> list[str]:
    """The names an axis or ``[variants]`` declares, in order.

    A table's keys (``[variants.rule]``), a list of strings, or a list of tables
    each carrying ``name`` (``[[variants]] name = "rule"``); a lone scalar is one name.
    """
    if isinstance(values, Mapping):
        return [str(key) for key in values]
    if isinstance(values, list):
        names = []
        for value in values:
            if isinstance(value, Mapping):
                if "name" in value:
                    names.append(str(value["name"]))
            else:
                names.append(str(value))
        return names
    return [] if values is None else [str(values)]


def declared_cells(axes: Any, variants: Any) -> list[str]:
    """Cell names in the order ``[variants]`` or ``[axes]`` declares them.

    ``[variants]`` names whole cells. ``[axes]`` maps each axis to its values; a
    cell is one value per axis, joined with `` / `` (``"rule / high"``), the first
    axis varying slowest. ``[variants]`` wins when both are present.
    """
    named = _names(variants)
    if named:
        return named
    if not isinstance(axes, Mapping) or not axes:
        return []
    cells = [""]
    for values in axes.values():
        cells = [f"{c} / {v}" if c else v for c in cells for v in _names(values)]
    return [cell for cell in cells if cell]


def cell_order(declared: Sequence[str], appearance: Iterable[str]) -> list[str]:
    """Declared cells first (those that have runs), then the rest by first appearance."""
    seen = list(dict.fromkeys(appearance))
    present = set(seen)
    ordered = [cell for cell in dict.fromkeys(declared) if cell in present]
    placed = set(ordered)
    return ordered + [cell for cell in seen if cell not in placed]


# -- metric kinds -----------------------------------------------------------------------


_KINDS = {
    bool: "boolean",
    int: "number",
    float: "number",
    str: "string",
    list: "list",
    dict: "object",
}


def metric_kinds(metrics: Sequence[str], rows: Sequence[Row]) -> dict[str, str]:
    """``boolean``, ``number`` or a diagnostic kind, from the values recorded.

    A metric nobody has given a value yet counts as boolean (the contract's
    default: a judge's and a form's metrics are booleans), so it shows as ``0/0``
    rather than disappearing.
    """
    kinds: dict[str, str] = {}
    for metric in metrics:
        # Exact types, not isinstance: a bool is an int to isinstance, and this
        # runs over every value of every run.
        types = {type(row["metrics"].get(metric)) for row in rows}
        types.discard(type(None))
        seen = {_KINDS.get(kind, kind.__name__) for kind in types}
        if float in types and not all(
            math.isfinite(row["metrics"][metric])
            for row in rows
            if type(row["metrics"].get(metric)) is float
        ):
            seen.discard("number")
            seen.add("non-finite number")
        if not seen:
            kinds[metric] = "boolean"
        elif len(seen) == 1:
            kinds[metric] = seen.pop()
        else:
            kinds[metric] = "mixed: " + ", ".join(sorted(seen))
    return kinds


# -- the report -------------------------------------------------------------------------


def _first_line(text: str, limit: int = 200) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else "no error recorded"
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _blocking(row: Row, rests_on: Sequence[str]) -> list[str]:
    """Why this run blocks its cell's publication (empty: it does not)."""
    if row["state"] == "invalid":
        return [
            f"invalid: {error.get('validator') or 'run.toml'}: {_first_line(str(error.get('error')))}"
            for error in row.get("errors") or [{"validator": "?", "error": ""}]
        ]
    pending = [m for m in row.get("pending") or () if m in rests_on]
    if pending:
        return [f"pending: {', '.join(pending)} has no value yet (a verdict rests on it)"]
    return []


def _unmeasured(rows: Sequence[Row], criteria: Sequence[str]) -> list[dict[str, Any]]:
    """A cell's criteria that none of its counted runs could judge: nothing a verdict
    rests on was measured there, whatever its x/n reads (``0/0 · 3 unjudged``).

    Each is one reason with no run (``run``: ``None``): the cell, not a run, blocks.
    """
    found = []
    for metric in criteria:
        values = [row for row in rows if metric in row["metrics"]]
        if values and all(row["metrics"][metric] is None for row in values):
            said = [(row.get("reasons") or {}).get(metric) for row in values]
            first = next((reason for reason in said if reason), "")
            why = f" (first reason: {_first_line(first)})" if first else ""
            found.append(
                {
                    "run": None,
                    "reason": f"unmeasured: no run has a judged value of {metric}, a criterion a "
                    f"verdict rests on ({len(values)} unjudged){why}",
                }
            )
    return found


def _unknown(rows: Sequence[Row], metric: str) -> dict[str, int]:
    """How many of ``rows`` could not judge ``metric`` (recorded ``null``) or have no value yet.

    Shown beside every ``x/n``: a metric unjudged everywhere must not read as a
    pending one, nor either of them as a small sample.
    """
    unjudged = sum(1 for row in rows if metric in row["metrics"] and row["metrics"][metric] is None)
    pending = sum(1 for row in rows if metric in (row.get("pending") or ()))
    return {"unjudged": unjudged, "pending": pending}


def _score(rows: Sequence[Row], metric: str) -> dict[str, int]:
    judged = [row["metrics"].get(metric) for row in rows]
    judged = [value for value in judged if isinstance(value, bool)]
    return {"true": sum(judged), "n": len(judged)}


def _number(rows: Sequence[Row], metric: str) -> dict[str, Any]:
    values = [row["metrics"].get(metric) for row in rows]
    values = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not values:
        return {"median": None, "low": None, "high": None, "n": 0, **_unknown(rows, metric)}
    interval = stats.median_interval(values)
    return {
        "median": stats.rounded(interval.estimate),
        "low": stats.rounded(interval.low),
        "high": stats.rounded(interval.high),
        "n": len(values),
        **_unknown(rows, metric),
    }


def run_details(layout: Layout, rows: Sequence[Row], order: Sequence[str]) -> list[dict[str, Any]]:
    """Each run with an invalid result or an unjudged or pending metric, and why.

    One entry per such run, cells in report order: its ``errors`` (validator and
    error, the first one named first), its ``unjudged`` metrics (metric,
    validator, reason) and its ``pending`` ones (metric, validator).
    """
    rank = {cell: index for index, cell in enumerate(order)}
    details = []

    def position(r: Row) -> tuple[int, int, str]:
        repetition = r["repetition"] if isinstance(r.get("repetition"), int) else -1
        return rank.get(r["cell"], len(rank)), repetition, str(r["id"])

    for row in sorted(rows, key=position):
        reasons = row.get("reasons") or {}
        unjudged = [
            {
                "metric": metric,
                "validator": layout.owners.get(metric),
                "reason": reasons.get(metric, ""),
            }
            for metric, value in row["metrics"].items()
            if value is None
        ]
        pending = [
            {"metric": metric, "validator": layout.owners.get(metric)}
            for metric in row.get("pending") or ()
        ]
        errors = [
            {"validator": error.get("validator"), "error": str(error.get("error"))}
            for error in row.get("errors") or ()
        ]
        if row["state"] == "invalid" and not errors:
            errors = [{"validator": None, "error": "no error recorded"}]
        if not (errors or unjudged or pending):
            continue
        details.append(
            {
                "run": str(row["id"]),
                "cell": row["cell"],
                "repetition": row["repetition"],
                "state": row["state"],
                "errors": errors,
                "unjudged": sorted(unjudged, key=lambda item: item["metric"]),
                "pending": sorted(pending, key=lambda item: item["metric"]),
            }
        )
    return details


def build_report(
    layout: Layout,
    rows: Sequence[Row],
    *,
    appearance: Iterable[str] | None = None,
    skipped: Sequence[str] = (),
    resamples: int = stats.RESAMPLES,
) -> dict[str, Any]:
    """The whole report as plain data (what ``--format json`` prints).

    ``appearance`` is the cells in the order their runs were found (default: the
    rows' order); ``skipped`` names run folders that could not be read.
    """
    present = {row["cell"] for row in rows}
    found = [cell for cell in (appearance or ()) if cell in present]
    order = cell_order(layout.declared_cells, [*found, *(row["cell"] for row in rows)])
    by_cell: dict[str, list[Row]] = {cell: [] for cell in order}
    for row in rows:
        by_cell[row["cell"]].append(row)

    kinds = metric_kinds(layout.metrics, rows)
    booleans = [m for m in layout.metrics if kinds[m] == "boolean"]
    numbers = [m for m in layout.metrics if kinds[m] == "number"]
    diagnostics = [
        {"metric": m, "kind": kinds[m]}
        for m in layout.metrics
        if kinds[m] not in ("boolean", "number")
    ]
    # What validators recorded beyond their declared metrics (e.g. `touched`): named, never scored.
    declared = set(layout.metrics)
    extras = sorted({m for row in rows for m in row["metrics"] if m not in declared})
    extra_kinds = metric_kinds(extras, rows)
    diagnostics += [{"metric": m, "kind": f"{extra_kinds[m]}, undeclared"} for m in extras]
    criteria = list(layout.criteria) if layout.criteria is not None else booleans
    rests_on = list(dict.fromkeys([*criteria, *layout.validity]))
    notes: list[str] = [f"run folder skipped (could not be read): {path}" for path in skipped]

    cells: list[dict[str, Any]] = []
    for cell in order:
        cell_rows = by_cell[cell]
        counted = [row for row in cell_rows if row["state"] != "invalid"]
        why_not = [
            {"run": str(row["id"]), "reason": reason}
            for row in cell_rows
            for reason in _blocking(row, rests_on)
        ]
        why_not += _unmeasured(counted, layout.criteria or ())  # declared criteria: as validate
        pending: dict[str, int] = {}
        for row in counted:
            for metric in row.get("pending") or ():
                pending[metric] = pending.get(metric, 0) + 1
        cells.append(
            {
                "cell": cell,
                "reference": cell == layout.reference,
                "runs": len(cell_rows),
                "invalid": len(cell_rows) - len(counted),
                "scores": {m: {**_score(counted, m), **_unknown(counted, m)} for m in booleans},
                "numbers": {m: _number(counted, m) for m in numbers},
                "pending": pending,
                "publishable": not why_not,
                "why_not": why_not,
                "stale": [
                    {"run": str(row["id"]), "validators": list(row["stale"])}
                    for row in cell_rows
                    if row.get("stale")
                ],
            }
        )

    gaps = None
    if layout.reference is not None:
        gaps = _gap_table(layout, criteria, kinds, by_cell, cells, notes, resamples)
    agreement = [_agreement(pair, rows) for pair in layout.agreement]

    publishable = all(cell["publishable"] for cell in cells) and not skipped
    if layout.reference is not None and layout.reference not in by_cell:
        publishable = False
    return {
        "scenario": layout.name,
        "runs": len(rows),
        "publishable": publishable,
        "metrics": {"boolean": booleans, "number": numbers, "diagnostic": diagnostics},
        "cells": cells,
        "gaps": gaps,
        "agreement": agreement,
        "notes": notes,
        "by_run": run_details(layout, rows, order),
        "usage": usage_table(layout, rows, order),
    }


def _counted_for_verdict(rows: Sequence[Row], validity: Sequence[str]) -> list[Row]:
    """Runs a verdict may rest on: not invalid, and every validity metric true."""
    return [
        row
        for row in rows
        if row["state"] != "invalid" and all(row["metrics"].get(m) is True for m in validity)
    ]


def _gap_table(
    layout: Layout,
    criteria: Sequence[str],
    kinds: Mapping[str, str],
    by_cell: Mapping[str, Sequence[Row]],
    cells: Sequence[Mapping[str, Any]],
    notes: list[str],
    resamples: int,
) -> dict[str, Any]:
    reference = layout.reference
    assert reference is not None
    table: dict[str, Any] = {
        "reference": reference,
        "criteria": [],
        "validity": list(layout.validity),
        "resamples": resamples,
        "confidence": stats.CONFIDENCE,
        "seed": stats.SEED,
        "rows": [],
    }
    if reference not in by_cell:
        notes.append(f"reference cell '{reference}' has no run: no verdict can be drawn")
        _certainty(layout, table)
        return table
    usable = []
    for criterion in criteria:
        if kinds.get(criterion) == "boolean":
            usable.append(criterion)
        else:
            notes.append(
                f"criterion '{criterion}' is not boolean ({kinds.get(criterion)}): no gap drawn"
            )
    table["criteria"] = usable
    publishable = {cell["cell"]: cell["publishable"] for cell in cells}
    reference_rows = _counted_for_verdict(by_cell[reference], layout.validity)
    for criterion in usable:
        rx = _score(reference_rows, criterion)
        reference_counts = (
            stats.resampled_counts(
                rx["true"], rx["n"], stats.rng_for(criterion, reference), resamples
            )
            if rx["n"] and publishable[reference]
            else None
        )
        for cell, cell_rows in by_cell.items():
            if cell == reference:
                continue
            x = _score(_counted_for_verdict(cell_rows, layout.validity), criterion)
            row: dict[str, Any] = {
                "cell": cell,
                "criterion": criterion,
                "cell_score": x,
                "reference_score": rx,
                "gap": None,
                "low": None,
                "high": None,
            }
            if not publishable[cell]:
                row["state"] = "not publishable"
                row["why"] = "this cell is not publishable"
            elif not publishable[reference]:
                row["state"] = "not publishable"
                row["why"] = "the reference cell is not publishable"
            elif not x["n"] or reference_counts is None:
                row["state"] = "inconclusive"
                row["why"] = "no counted run could judge it on " + (
                    "both sides" if not x["n"] and not rx["n"] else "one side"
                )
            else:
                row.update(_drawn_gap(layout, criterion, cell, x, rx, reference_counts, resamples))
            table["rows"].append(row)
    _certainty(layout, table)
    return table


def _drawn_gap(
    layout: Layout,
    criterion: str,
    cell: str,
    x: Mapping[str, int],
    rx: Mapping[str, int],
    reference_counts: Sequence[int],
    resamples: int,
) -> dict[str, Any]:
    """A gap's estimate, interval, p-value and state, by the ``[verdict] stopping`` procedure."""
    sides = (x["true"], x["n"]), (rx["true"], rx["n"])
    if layout.stopping == "anytime":
        interval = certainty.anytime_gap(*sides)
        p_value = certainty.anytime_p_value(*sides)
    else:
        rng = stats.rng_for(criterion, cell)
        counts = stats.resampled_counts(x["true"], x["n"], rng, resamples)
        gap = stats.proportion_gap(*sides, cell_counts=counts, reference_counts=reference_counts)
        # What Holm ranks by: Fisher's exact test, valid in the far tail Holm reads.
        interval, p_value = gap.interval, certainty.fisher_p_value(*sides)
    return {
        "gap": stats.rounded(interval.estimate),
        "low": stats.rounded(interval.low),
        "high": stats.rounded(interval.high),
        "p_value": stats.rounded(p_value),
        "state": "established" if interval.excludes_zero else "inconclusive",
    }


def _certainty(layout: Layout, table: dict[str, Any]) -> None:
    """Say which procedure holds, apply ``[verdict] correction``, give open gaps their runs needed.

    ``tested`` counts the gaps with an interval drawn. Under Holm a gap is
    ``established`` only when Holm's step-down over every tested gap rejects "no
    gap" (its interval alone is not enough), and its runs needed are for the
    strictest step, ``α/tested``: what it takes whatever the other gaps do.
    """
    drawn = [row for row in table["rows"] if row.get("p_value") is not None]
    alpha = 1 - stats.CONFIDENCE
    table.update(
        stopping=layout.stopping,
        correction=layout.correction,
        tested=len(drawn),
        power=certainty.POWER,
    )
    if layout.correction == "holm" and drawn:
        for row, rejected in zip(drawn, certainty.holm([r["p_value"] for r in drawn]), strict=True):
            if row["state"] == "established" and not rejected:
                row["state"] = "inconclusive"
                row["why"] = (
                    f"its interval excludes zero, but Holm's correction over {len(drawn)} "
                    "gaps does not"
                )
        alpha /= len(drawn)
    for row in table["rows"]:
        row["runs_needed"] = None
        if row.get("p_value") is None or row["state"] == "established":
            continue
        cell, reference = row["cell_score"], row["reference_score"]
        rates = (cell["true"] / cell["n"], reference["true"] / reference["n"])
        needed = certainty.runs_needed(
            rates, have=(cell["n"], reference["n"]), stopping=layout.stopping, alpha=alpha
        )
        if needed is not None:
            # Not established with the runs in hand: at least one side needs more, whatever
            # the approximation says of the sample sizes it already has.
            needed = max(needed, min(cell["n"], reference["n"]) + 1)
        row["runs_needed"] = {
            "per_cell": needed,
            "have": cell["n"],
            "reference_has": reference["n"],
            "why": None
            if needed is not None
            else (
                "not reachable: the observed gap is zero"
                if rates[0] == rates[1]
                else f"not reachable: more than {certainty.MOST_RUNS:,} runs per cell"
            ),
        }


def _agreement(pair: tuple[str, str], rows: Sequence[Row]) -> dict[str, Any]:
    first, second = pair
    pairs = [
        (row["metrics"][first], row["metrics"][second])
        for row in rows
        if row["state"] != "invalid"
        and isinstance(row["metrics"].get(first), bool)
        and isinstance(row["metrics"].get(second), bool)
    ]
    result = stats.agreement(pairs)
    return {
        "pair": [first, second],
        "n": result.n,
        "raw": stats.rounded(result.raw),
        "kappa": stats.rounded(result.kappa),
        "table": {
            "both_true": result.both_true,
            "first_only": result.first_only,
            "second_only": result.second_only,
            "both_false": result.both_false,
        },
    }

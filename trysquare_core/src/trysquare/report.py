"""``trysquare report``: per-cell tables from the recorded results.

This first version prints the score table (``x/n`` per boolean metric, an
unjudged metric shrinking only its own denominator, an invalid run leaving
every denominator) and which cells are not publishable, and why.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from trysquare import _atomic, results
from trysquare.runs import Experiment
from trysquare.scenario import Scenario

SYNTHESIS_FILE = "synthesis.md"


def cell_order(scenario: Scenario, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Cells as ``[variants]``/``[axes]`` declare them when they do, else by first appearance."""
    seen: list[str] = []
    for row in rows:
        if row["cell"] not in seen:
            seen.append(row["cell"])
    declared = _declared_cells(scenario)
    ordered = [cell for cell in declared if cell in seen]
    return ordered + [cell for cell in seen if cell not in ordered]


def _declared_cells(scenario: Scenario) -> list[str]:
    variants = scenario.variants
    if isinstance(variants, list):
        return [v if isinstance(v, str) else str(v.get("name", "")) for v in variants]
    if isinstance(variants, dict):
        return list(variants)
    axes = scenario.axes
    if isinstance(axes, dict) and axes:
        cells = [""]
        for values in axes.values():
            values = values if isinstance(values, list) else [values]
            cells = [f"{c} / {v}" if c else str(v) for c in cells for v in values]
        return cells
    return []


def score_table(scenario: Scenario, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    metrics = [m for v in scenario.validations for m in v.metrics]
    boolean = [m for m in metrics if any(isinstance(r["metrics"].get(m), bool) for r in rows)]
    table: dict[str, Any] = {"metrics": boolean, "cells": []}
    for cell in cell_order(scenario, rows):
        cell_rows = [r for r in rows if r["cell"] == cell]
        counted = [r for r in cell_rows if r["state"] != "invalid"]
        scores = {}
        for metric in boolean:
            judged = [r["metrics"][m] for r in counted for m in [metric] if isinstance(r["metrics"].get(m), bool)]
            scores[metric] = {"true": sum(judged), "n": len(judged)}
        why = [f"run '{r['id']}' is invalid: " + "; ".join(e["error"] for e in r["errors"])
               for r in cell_rows if r["state"] == "invalid"]
        table["cells"].append({
            "cell": cell,
            "runs": len(cell_rows),
            "scores": scores,
            "publishable": not why,
            "why_not": why,
        })
    return table


def render_md(scenario: Scenario, table: Mapping[str, Any]) -> str:
    metrics = table["metrics"]
    lines = [f"## {scenario.name}", "", "| cell | runs | " + " | ".join(metrics) + " |",
             "|---|---|" + "---|" * len(metrics)]
    for cell in table["cells"]:
        scores = " | ".join(f"{cell['scores'][m]['true']}/{cell['scores'][m]['n']}" for m in metrics)
        mark = "" if cell["publishable"] else " (not publishable)"
        lines.append(f"| {cell['cell']}{mark} | {cell['runs']} | {scores} |")
    blocked = [c for c in table["cells"] if not c["publishable"]]
    if blocked:
        lines += ["", "Not publishable:"]
        for cell in blocked:
            lines += [f"- {cell['cell']}: {why}" for why in cell["why_not"]]
    return "\n".join(lines) + "\n"


def render_csv(table: Mapping[str, Any]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["cell", "metric", "true", "n", "publishable"])
    for cell in table["cells"]:
        for metric in table["metrics"]:
            score = cell["scores"][metric]
            writer.writerow([cell["cell"], metric, score["true"], score["n"], cell["publishable"]])
    return out.getvalue()


def run_report(scenario: Scenario, experiment: Experiment, fmt: str) -> int:
    current = {v.name: v.digest() for v in scenario.validations}
    rows = results.build_measures(scenario, experiment.runs, current)
    results.write_measures(experiment.root, rows)
    table = score_table(scenario, rows)
    markdown = render_md(scenario, table)
    _atomic.write_text(experiment.root / SYNTHESIS_FILE, markdown)
    if fmt == "json":
        sys.stdout.write(json.dumps(table, indent=2, sort_keys=True) + "\n")
    elif fmt == "csv":
        sys.stdout.write(render_csv(table))
    else:
        sys.stdout.write(markdown)
    return 0 if all(cell["publishable"] for cell in table["cells"]) else 1

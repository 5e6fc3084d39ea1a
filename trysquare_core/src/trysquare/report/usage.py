"""What the paid validators spent, from the results' ``usage`` records: tokens, requests, cost.

A pure function of the rows, like :mod:`trysquare.report.tables`, whose report holds
:func:`usage_table` under ``"usage"``; a cost nobody priced is ``null`` with why, never $0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from trysquare.report.stats import rounded

__all__ = ["NO_PRICE", "NO_TOKENS", "TOKEN_KEYS", "usage_table", "usage_totals"]

Row = Mapping[str, Any]


class _Owners(Protocol):
    """What the table needs of the report's layout: which validator declares each metric."""

    @property
    def owners(self) -> Mapping[str, str]: ...


TOKEN_KEYS = ("input_tokens", "output_tokens", "cached_tokens")
PER_MILLION = 1_000_000


def _result_cost(usage: Mapping[str, Any]) -> tuple[float | None, str | None]:
    """``(USD, None)`` one result cost, from the price recorded with it, or ``(None, why not)``.

    Each side (input, output) that spent tokens needs its price, and a count: a
    side whose tokens the provider did not report cannot be priced. A side that
    spent nothing costs nothing, priced or not.
    """
    cost = 0.0
    why: str | None = None
    for tokens_key, price_key in (
        ("input_tokens", "price_input"),
        ("output_tokens", "price_output"),
    ):
        tokens, price = usage.get(tokens_key), usage.get(price_key)
        if tokens == 0:
            continue
        if price is None:
            return None, NO_PRICE
        if tokens is None:
            why = NO_TOKENS
            continue
        cost += tokens * price / PER_MILLION
    return (None, why) if why else (cost, None)


NO_PRICE = "no price declared"
NO_TOKENS = "tokens not reported"


def usage_totals(
    validator: str | None, cell: str | None, items: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The sums of ``items`` (results' ``usage`` records) and their cost, as one usage row."""
    totals: dict[str, Any] = {
        "validator": validator,  # None: every validator
        "cell": cell,  # None: every cell
        "results": len(items),
        "requests": sum(item.get("requests") or 0 for item in items),
    }
    for key in TOKEN_KEYS:
        # A provider that reported no count leaves it unknown, not zero.
        known = [item[key] for item in items if item.get(key) is not None]
        totals[key] = sum(known) if known else None
    priced: list[float] = []
    unpriced: dict[str, int] = {}
    for item in items:
        if item.get("requests") == 0:
            continue  # sent nothing: no cost to say, priced or not (unknown is not nothing)
        cost, why = _result_cost(item)
        if cost is None:
            unpriced[why or NO_PRICE] = unpriced.get(why or NO_PRICE, 0) + 1
        else:
            priced.append(cost)
    # Never $0 for a cost nobody priced: null, and how many results could not be priced, and why.
    totals["cost_usd"] = rounded(sum(priced)) if priced or not unpriced else None
    totals["unpriced"] = dict(sorted(unpriced.items()))
    return totals


def usage_table(layout: _Owners, rows: Sequence[Row], order: Sequence[str]) -> list[dict[str, Any]]:
    """What each paid validator spent: one row per validator and cell, then its total.

    Every result recorded with a ``usage`` counts (invalid and unjudged ones
    too: their requests were paid for). With more than one such validator,
    rows for every validator per cell and a grand total follow. Empty when no
    result recorded any usage.
    """
    spent: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for row in rows:
        for validator, usage in (row.get("usage") or {}).items():
            # Verdicts bought through a batch API (at its price) are shown apart from the others.
            label = f"{validator} (batch)" if usage.get("batch") else validator
            spent.setdefault(label, {}).setdefault(row["cell"], []).append(usage)
    if not spent:
        return []
    ranked = list(dict.fromkeys(layout.owners.values()))

    def rank(label: str) -> tuple[int, str]:
        owner = label.removesuffix(" (batch)")
        return (ranked.index(owner) if owner in ranked else len(ranked), label)

    validators = sorted(spent, key=rank)
    table: list[dict[str, Any]] = []
    for validator in validators:
        by_cell = spent[validator]
        for cell in order:
            if cell in by_cell:
                table.append(usage_totals(validator, cell, by_cell[cell]))
        table.append(
            usage_totals(validator, None, [u for items in by_cell.values() for u in items])
        )
    if len(validators) > 1:
        for cell in order:
            items = [u for v in validators for u in spent[v].get(cell, ())]
            if items:
                table.append(usage_totals(None, cell, items))
        table.append(
            usage_totals(
                None, None, [u for v in validators for items in spent[v].values() for u in items]
            )
        )
    return table

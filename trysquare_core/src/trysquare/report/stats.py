"""The statistics behind the report: bootstrap intervals and Cohen's kappa.

Stdlib only (``random.Random``, ``math``): the report must stay cheap enough to
run on every CI job, over 10,000 runs, without numpy.

Two shortcuts keep resampling fast while leaving its distribution untouched:

- resampling ``n`` booleans of which ``x`` are true and counting the trues is a
  draw from Binomial(n, x/n). One draw from that distribution (by its
  cumulative table) *is* one resample, at the cost of one random number
  instead of ``n``.
- the median of a resample is an order statistic of resampled indices, whose
  distribution is known exactly (a binomial tail), so the median's bootstrap
  interval is computed exactly: no Monte Carlo noise, no seed to pin.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from itertools import accumulate
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import random

    from trysquare.report._stats_records import Agreement, Gap, Interval

__all__ = [
    "CONFIDENCE",
    "RESAMPLES",
    "SEED",
    "Agreement",
    "Gap",
    "Interval",
    "agreement",
    "median",
    "median_interval",
    "proportion_gap",
    "rng_for",
]

RESAMPLES = 10_000
CONFIDENCE = 0.95
# Fixed, so the same measures always give the same report, byte for byte.
SEED = "trysquare-report-v1"


def __getattr__(name: str) -> Any:
    # The records are built when first asked for (trysquare.report._stats_records).
    if name in ("Agreement", "Gap", "Interval"):
        from trysquare.report import _stats_records

        return getattr(_stats_records, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def rng_for(*names: str) -> random.Random:
    """A generator seeded from :data:`SEED` and ``names``.

    Seeding per (criterion, cell) keeps one cell's interval independent of which
    other cells the experiment holds. A ``str`` seed is hashed with SHA-512 by
    ``random``, so it does not depend on ``PYTHONHASHSEED``.
    """
    import random  # here: a report drawing no interval (one run, one cell) never loads it

    return random.Random("\x1f".join((SEED, *names)))


def _binomial_cdf(n: int, p: float) -> list[float]:
    """Cumulative probabilities of Binomial(n, p) for 0..n (0 < p < 1)."""
    log_p, log_q = math.log(p), math.log1p(-p)
    lg_n = math.lgamma(n + 1)
    pmf = [
        math.exp(lg_n - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * log_p + (n - k) * log_q)
        for k in range(n + 1)
    ]
    return list(accumulate(pmf))


def resampled_counts(
    true: int, n: int, rng: random.Random, resamples: int = RESAMPLES
) -> list[int]:
    """The count of trues in each of ``resamples`` resamples of ``n`` runs, ``true`` of them true."""
    if n <= 0:
        raise ValueError("no run to resample")
    if true in (0, n):
        return [true] * resamples  # every resample is the sample itself
    cdf = _binomial_cdf(n, true / n)
    return rng.choices(range(n + 1), cum_weights=cdf, k=resamples)


def _rank(q: float, total: int) -> int:
    """Nearest rank (1-based) of the ``q`` percentile among ``total`` ordered values."""
    return max(1, math.ceil(q * total))


def proportion_gap(
    cell: tuple[int, int],
    reference: tuple[int, int],
    *,
    cell_counts: Sequence[int],
    reference_counts: Sequence[int],
) -> Gap:
    """``cell`` minus ``reference`` proportions, from paired resampled counts.

    ``cell`` and ``reference`` are ``(true, n)``; the counts come from
    :func:`resampled_counts`, drawn independently for each side. The interval
    is the 2.5th and 97.5th (nearest-rank) percentiles of the resampled differences.
    """
    from trysquare.report._stats_records import Gap, Interval

    (x, n), (rx, rn) = cell, reference
    # c/n - r/rn has the order of the integer c*rn - r*n: tally integers (few
    # distinct ones) instead of sorting ten thousand floats, and divide once.
    tally = Counter([c * rn - r * n for c, r in zip(cell_counts, reference_counts, strict=True)])
    total = sum(tally.values())
    tail = (1 - CONFIDENCE) / 2
    wanted = [_rank(tail, total), _rank(1 - tail, total)]
    found: list[int] = []
    seen = 0
    for key in sorted(tally):
        seen += tally[key]
        while wanted and seen >= wanted[0]:
            wanted.pop(0)
            found.append(key)
    scale = n * rn
    interval = Interval(estimate=x / n - rx / rn, low=found[0] / scale, high=found[1] / scale)
    at_most = sum(count for key, count in tally.items() if key <= 0)
    at_least = sum(count for key, count in tally.items() if key >= 0)
    return Gap(interval, total, min(1.0, 2 * min(at_most, at_least) / total))


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    half = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[half]
    return (ordered[half - 1] + ordered[half]) / 2


def _order_statistic_cdf(n: int, m: int, j: int) -> float:
    """P(the m-th smallest of n indices drawn uniformly from 1..n is <= j).

    That is P(at least m draws land in 1..j) = P(Binomial(n, j/n) >= m), summed
    from the larger end of the tail so no term that matters underflows.
    """
    if j >= n:
        return 1.0
    if j <= 0:
        return 0.0
    p = j / n
    log_p, log_q = math.log(p), math.log1p(-p)

    def log_pmf(k: int) -> float:
        return (
            math.lgamma(n + 1)
            - math.lgamma(k + 1)
            - math.lgamma(n - k + 1)
            + k * log_p
            + (n - k) * log_q
        )

    ratio = p / (1 - p)
    if m > n * p:  # the upper tail starts past the mode: its first term is its largest
        term, total = math.exp(log_pmf(m)), 0.0
        for k in range(m, n + 1):
            total += term
            term *= (n - k) / (k + 1) * ratio
        return min(1.0, total)
    term, total = math.exp(log_pmf(m - 1)), 0.0  # the lower tail, largest term first
    for k in range(m - 1, -1, -1):
        total += term
        term *= k / (n - k + 1) / ratio
    return max(0.0, 1.0 - total)


def _order_statistic_quantile(n: int, m: int, q: float) -> int:
    """Smallest index j in 1..n with P(m-th order statistic <= j) >= q (binary search)."""
    low, high = 1, n
    while low < high:
        mid = (low + high) // 2
        if _order_statistic_cdf(n, m, mid) >= q:
            high = mid
        else:
            low = mid + 1
    return low


def median_interval(values: Sequence[float]) -> Interval:
    """The median and its exact 95% bootstrap percentile interval.

    For odd ``n`` the resampled median is the ``(n+1)/2``-th order statistic and
    the interval is exact. For even ``n`` it is the mean of the ``n/2``-th and
    the next, which lies between them: the interval runs from the lower one's
    2.5th percentile to the upper one's 97.5th — exact bounds of a slightly
    wider, never narrower, interval.
    """
    from trysquare.report._stats_records import Interval

    if not values:
        raise ValueError("no value")
    ordered = sorted(values)
    n = len(ordered)
    tail = (1 - CONFIDENCE) / 2
    lower_rank = (n + 1) // 2  # odd: the median; even: the lower of the two middle values
    upper_rank = lower_rank if n % 2 else lower_rank + 1
    low = ordered[_order_statistic_quantile(n, lower_rank, tail) - 1]
    high = ordered[_order_statistic_quantile(n, upper_rank, 1 - tail) - 1]
    return Interval(median(ordered), low, high)


def agreement(pairs: Sequence[tuple[bool, bool]]) -> Agreement:
    """Cohen's kappa and raw agreement of two boolean raters over the same runs."""
    from trysquare.report._stats_records import Agreement

    n = len(pairs)
    both_true = sum(1 for a, b in pairs if a and b)
    first_only = sum(1 for a, b in pairs if a and not b)
    second_only = sum(1 for a, b in pairs if b and not a)
    both_false = n - both_true - first_only - second_only
    if n == 0:
        return Agreement(0, 0, 0, 0, 0, None, None)
    observed = (both_true + both_false) / n
    first_true = (both_true + first_only) / n
    second_true = (both_true + second_only) / n
    chance = first_true * second_true + (1 - first_true) * (1 - second_true)
    # Both raters constant and equal: agreement by chance is total, kappa undefined.
    kappa = None if chance >= 1 else (observed - chance) / (1 - chance)
    return Agreement(n, both_true, first_only, second_only, both_false, observed, kappa)


def rounded(value: float | None) -> float | None:
    """A figure as the report's JSON holds it: six places, and never ``-0.0``."""
    # Six places: stable, readable JSON, and no -0.49999999999999994.
    return None if value is None else round(value, 6) + 0.0

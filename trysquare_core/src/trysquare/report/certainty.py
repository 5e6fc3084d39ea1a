"""How certain a gap is, and what more runs would buy: the report's statistics beyond one look.

Stdlib only (``math``, ``statistics.NormalDist``), like :mod:`trysquare.report.stats`.

- **Anytime-valid confidence sequence** (``[verdict] stopping = "anytime"``): Robbins'
  normal-mixture boundary (H. Robbins, "Statistical methods related to the law of the
  iterated logarithm", Ann. Math. Statist. 41, 1970), in the form and with the
  tuning of S. R. Howard, A. Ramdas, J. McAuliffe, J. Sekhon, "Time-uniform, nonparametric,
  nonasymptotic confidence sequences", Ann. Statist. 49(2), 2021 (the normal mixture of
  §3.2 for a sub-Gaussian process). Each run of either cell is a Bernoulli
  observation, ``1/4``-sub-Gaussian (Hoeffding's lemma); with ``a`` runs of the cell, ``x``
  true, and ``b`` of the reference, ``rx`` true, ``S = (x - a·p1) - (rx - b·p2)`` is a sum of
  centred increments whatever order the runs came in (or which cell was run next), and for
  every ``λ`` ``exp(λS - λ²V/2)`` with ``V = (a + b)/4`` is a nonnegative supermartingale.
  Mixing ``λ`` over N(0, 1/ρ) gives ``M = sqrt(ρ/(V+ρ))·exp(S²/(2(V+ρ)))``; by Ville's
  inequality ``M`` ever reaches ``1/α`` with probability at most ``α``. So with probability
  ``1 - α``, at every number of runs at once, ``|S| < B = sqrt((V+ρ)·log((V+ρ)/(ρα²)))``.
  The sequence for ``δ = p1 - p2`` is the range of ``p1 - p2`` over the ``(p1, p2)`` in the
  unit square meeting that bound (exact: a linear range over a polygon). With ``a == b``
  it is ``(x - rx ± B)/a``. ``ρ`` makes the boundary tightest at :data:`ANYTIME_TARGET`
  runs per cell (fixed in advance, never chosen from data).
- **p-values**, for Holm: with the fixed-sample interval, Fisher's exact test (R. A. Fisher,
  *Statistical Methods for Research Workers*, 1925): valid at any number of runs, where the
  bootstrap's own p-value (:attr:`trysquare.report.stats.Gap.p_value`) is too small in the
  far tail Holm reads at small samples (``benchmarks/bench_stats.py`` measures both); for the
  sequence, ``min(1, 1/M)`` at ``δ = 0`` (its smallest over the common rate: an
  anytime-valid p-value, below ``α`` exactly when the sequence excludes zero).
- **Holm's step-down** (S. Holm, "A simple sequentially rejective multiple test
  procedure", Scand. J. Statist. 6, 1979): the ``k``-th smallest of ``m`` p-values is
  rejected while each before it was and it is below ``α/(m - k + 1)``.
- **Runs needed**: the runs per cell at which a gap would be established with probability
  :data:`POWER` if the observed rates were the true ones. Fixed-sample: the percentile
  bootstrap of the report is, for a difference of two resampled binomials, close to the
  normal interval ``d ± z·sqrt(p1q1/n1 + p2q2/n2)``, so the chance of establishing ``d`` is
  ``Φ(|d|/se - z) + Φ(-|d|/se - z)``; with ``n`` on both sides that reaches ``power`` at
  ``n = (z_{1-α/2} + z_power)²·(p1q1 + p2q2)/d²``. Anytime: ``x - rx`` is close to normal,
  mean ``n1·p1 - n2·p2``, variance ``n1·p1q1 + n2·p2q2``, and must clear ``B``. The runs
  needed are the smallest ``n`` that brings each side up to ``n`` runs with that chance.
  ``benchmarks/bench_stats.py`` checks both against simulated experiments.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING

from trysquare.report.stats import CONFIDENCE

if TYPE_CHECKING:
    from statistics import NormalDist

    from trysquare.report._stats_records import Interval

__all__ = [
    "ANYTIME_TARGET",
    "CORRECTIONS",
    "POWER",
    "STOPPINGS",
    "allocate",
    "anytime_gap",
    "anytime_p_value",
    "fisher_p_value",
    "holm",
    "power_of",
    "runs_needed",
]

POWER = 0.8  # the probability a runs-needed estimate is for
ANYTIME_TARGET = 50  # runs per cell where the anytime boundary is tightest
STOPPINGS = ("fixed", "anytime")
CORRECTIONS = ("none", "holm")
# Past this many runs per cell a gap is called out of reach rather than counted.
MOST_RUNS = 10_000_000


@cache
def _normal() -> NormalDist:
    """The standard normal, built on first use: ``statistics`` (with ``fractions`` and
    ``decimal``) is imported only by a report that computes a power."""
    from statistics import NormalDist

    return NormalDist()


@cache
def mixture_rho(alpha: float = 1 - CONFIDENCE, target_v: float = ANYTIME_TARGET / 2) -> float:
    """The mixture's ``ρ`` that makes the boundary smallest at ``V = target_v``.

    The boundary's square, ``(V+ρ)·log((V+ρ)/(ρα²))``, is smallest in ``ρ`` where
    ``log((V+ρ)/(ρα²)) = V/ρ``; the difference of the two sides increases with ``ρ``,
    so bisection (on ``log ρ``) finds it.
    """
    low, high = math.log(1e-9 * target_v), math.log(1e9 * target_v)
    for _ in range(200):
        mid = (low + high) / 2
        rho = math.exp(mid)
        if math.log((target_v + rho) / (rho * alpha * alpha)) - target_v / rho < 0:
            low = mid
        else:
            high = mid
    return math.exp((low + high) / 2)


def boundary(v: float, alpha: float = 1 - CONFIDENCE) -> float:
    """``B``: the radius ``|S|`` stays below at every ``V`` at once, with probability ``1 - α``."""
    rho = mixture_rho()
    return math.sqrt((v + rho) * math.log((v + rho) / (rho * alpha * alpha)))


def _slab_range(a: int, b: int, total: int, radius: float) -> tuple[float, float]:
    """Smallest and largest ``p1 - p2`` over ``(p1, p2)`` in [0, 1]².

    Only the points with ``|total - a·p1 + b·p2| <= radius`` count.
    """
    points: list[tuple[float, float]] = [(0.0, 0.0), (0.0, 1.0), (1.0, 0.0), (1.0, 1.0)]
    for side in (total - radius, total + radius):  # the lines a·p1 - b·p2 = side
        for p1 in (0.0, 1.0):
            points.append((p1, (a * p1 - side) / b))
        for p2 in (0.0, 1.0):
            points.append(((side + b * p2) / a, p2))
    slack = 1e-9
    inside = [
        (p1, p2)
        for p1, p2 in points
        if -slack <= p1 <= 1 + slack
        and -slack <= p2 <= 1 + slack
        and abs(total - a * p1 + b * p2) <= radius + slack * (a + b)
    ]
    # Never empty: (x/a, rx/b) meets the bound with S = 0, and the polygon holds a vertex.
    differences = [min(1.0, max(0.0, p1)) - min(1.0, max(0.0, p2)) for p1, p2 in inside]
    return min(differences), max(differences)


def anytime_gap(cell: tuple[int, int], reference: tuple[int, int]) -> Interval:
    """``cell`` minus ``reference`` proportions with its 95% anytime-valid confidence sequence."""
    from trysquare.report._stats_records import Interval

    (x, a), (rx, b) = cell, reference
    if a <= 0 or b <= 0:
        raise ValueError("no run on one side")
    radius = boundary((a + b) / 4)
    low, high = _slab_range(a, b, x - rx, radius)
    return Interval(estimate=x / a - rx / b, low=low, high=high)


def anytime_p_value(cell: tuple[int, int], reference: tuple[int, int]) -> float:
    """The anytime-valid p-value of "no gap": ``min(1, 1/M)``, largest over the common rate."""
    (x, a), (rx, b) = cell, reference
    total, shift = x - rx, a - b  # S = total - shift·p when p1 = p2 = p
    ends = (total, total - shift)
    closest = 0.0 if min(ends) <= 0 <= max(ends) else min(abs(end) for end in ends)
    v, rho = (a + b) / 4, mixture_rho()
    log_m = 0.5 * math.log(rho / (v + rho)) + closest * closest / (2 * (v + rho))
    return 1.0 if log_m <= 0 else math.exp(-log_m)


def fisher_p_value(cell: tuple[int, int], reference: tuple[int, int]) -> float:
    """Fisher's exact test of "no gap", two-sided: valid at any number of runs.

    Given both sides' runs and the total of trues, the cell's count of trues is
    hypergeometric when there is no gap; the p-value sums the probabilities of every
    count no more likely than the one observed.
    """
    (x, a), (rx, b) = cell, reference
    trues, runs = x + rx, a + b
    log_total = _log_choose(runs, trues)

    def probability(k: int) -> float:
        return math.exp(_log_choose(a, k) + _log_choose(b, trues - k) - log_total)

    observed = probability(x)
    counts = range(max(0, trues - b), min(a, trues) + 1)
    total = sum(p for p in map(probability, counts) if p <= observed * (1 + 1e-9))
    return min(1.0, total)


def _log_choose(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def holm(p_values: Sequence[float], alpha: float = 1 - CONFIDENCE) -> list[bool]:
    """Which of ``p_values`` Holm's step-down rejects at family-wise level ``alpha``."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    rejected = [False] * len(p_values)
    m = len(p_values)
    for rank, index in enumerate(order):
        if p_values[index] < alpha / (m - rank):
            rejected[index] = True
        else:
            break
    return rejected


# -- power and runs needed -----------------------------------------------------------------


def power_of(
    rates: tuple[float, float],
    runs: tuple[int, int],
    *,
    stopping: str = "fixed",
    alpha: float = 1 - CONFIDENCE,
) -> float:
    """The probability a gap between true ``rates`` is established with ``runs`` per side.

    ``stopping`` is the procedure (``fixed``: the bootstrap interval, as its normal
    approximation; ``anytime``: the confidence sequence), at level ``1 - alpha``.
    """
    (p1, p2), (n1, n2) = rates, runs
    if n1 <= 0 or n2 <= 0:
        return 0.0
    if stopping == "anytime":
        mean = n1 * p1 - n2 * p2
        sd = math.sqrt(n1 * p1 * (1 - p1) + n2 * p2 * (1 - p2))
        radius, shift = boundary((n1 + n2) / 4, alpha), n1 - n2
        upper, lower = radius + max(0, shift), -radius + min(0, shift)
        if sd == 0:
            return float(mean > upper or mean < lower)
        return _normal().cdf((mean - upper) / sd) + _normal().cdf((lower - mean) / sd)
    gap = abs(p1 - p2)
    se = math.sqrt(p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2)
    z = _normal().inv_cdf(1 - alpha / 2)
    if se == 0:
        return float(gap > 0)
    return _normal().cdf(gap / se - z) + _normal().cdf(-gap / se - z)


def runs_needed(
    rates: tuple[float, float],
    *,
    have: tuple[int, int] = (0, 0),
    stopping: str = "fixed",
    alpha: float = 1 - CONFIDENCE,
    power: float = POWER,
) -> int | None:
    """Runs per cell at which the gap between ``rates`` is established with ``power``.

    Each side is brought up to that many runs (a side holding ``have`` more keeps
    them). ``None`` when no number of runs reaches it: the rates are equal (or it
    takes more than :data:`MOST_RUNS`).
    """
    p1, p2 = rates
    if p1 == p2:
        return None

    def enough(n: int) -> bool:
        runs = (max(n, have[0]), max(n, have[1]))
        return power_of(rates, runs, stopping=stopping, alpha=alpha) >= power

    high = 1
    while not enough(high):
        high *= 2
        if high > MOST_RUNS:
            return None
    low = high // 2 + 1 if high > 1 else 1
    while low < high:  # power grows with n here: the smallest n that is enough
        mid = (low + high) // 2
        if enough(mid):
            high = mid
        else:
            low = mid + 1
    return low


def allocate(
    gaps: Sequence[Mapping[str, object]],
    have: Mapping[str, int],
    budget: int,
    *,
    stopping: str = "fixed",
    alpha: float = 1 - CONFIDENCE,
) -> dict[str, int]:
    """Spread ``budget`` more runs over the cells where they raise certainty most.

    ``gaps`` are ``{"cell", "reference", "rates"}`` for gaps still to establish; ``have``
    the runs each cell holds. Greedy: each step gives a run (or, for a large budget, an
    equal share of it) to the cell whose extra run raises the summed probability of
    establishing the gaps the most (the reference takes part in every gap).
    """
    given = dict.fromkeys(have, 0)
    if not gaps or budget <= 0:
        return given
    step = max(1, budget // 2000)  # a few thousand steps at most, whatever the budget

    def chance(gap: Mapping[str, object], extra: Mapping[str, int]) -> float:
        cell, reference = str(gap["cell"]), str(gap["reference"])
        rates = gap["rates"]
        assert isinstance(rates, tuple)
        runs = (have[cell] + extra[cell], have[reference] + extra[reference])
        return power_of(rates, runs, stopping=stopping, alpha=alpha)

    touching = {cell: [g for g in gaps if cell in (g["cell"], g["reference"])] for cell in have}
    left = budget
    while left > 0:
        share = min(step, left)
        best, best_gain = None, -1.0
        for cell in sorted(have):
            if not touching[cell]:
                continue
            now = sum(chance(g, given) for g in touching[cell])
            more = {**given, cell: given[cell] + share}
            gain = sum(chance(g, more) for g in touching[cell]) - now
            if gain > best_gain:
                best, best_gain = cell, gain
        if best is None:
            break
        given[best] += share
        left -= share
    return given

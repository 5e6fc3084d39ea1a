"""The statistics: bootstrap gaps, exact median intervals, kappa — on answers known by hand."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest
from trysquare.report import stats

pytestmark = pytest.mark.fast  # the inner loop: `uv run pytest -m fast -n 0`


def gap(
    cell: tuple[int, int], reference: tuple[int, int], resamples: int = stats.RESAMPLES
) -> stats.Gap:
    return stats.proportion_gap(
        cell,
        reference,
        cell_counts=stats.resampled_counts(*cell, stats.rng_for("c", "cell"), resamples),
        reference_counts=stats.resampled_counts(*reference, stats.rng_for("c", "ref"), resamples),
    )


def test_ten_of_ten_against_none_of_ten_is_established() -> None:
    result = gap((10, 10), (0, 10))
    # Both sides are degenerate: every resample is the sample, the gap is exactly 1.
    assert result.interval == stats.Interval(1.0, 1.0, 1.0)
    assert result.established
    assert result.resamples == 10_000


def test_five_of_ten_against_six_of_ten_is_inconclusive() -> None:
    result = gap((5, 10), (6, 10))
    assert result.interval.estimate == pytest.approx(-0.1)
    assert result.interval.low < 0 < result.interval.high
    assert not result.established
    # Two binomials of n=10: the difference's sd is ~0.22, so the interval spans ~±0.43.
    assert -0.6 < result.interval.low < -0.4
    assert 0.2 < result.interval.high < 0.4


def test_a_clear_but_not_total_gap_is_established_both_ways() -> None:
    assert gap((18, 20), (4, 20)).established
    negative = gap((4, 20), (18, 20))
    assert negative.established and negative.interval.high < 0


def test_resampled_counts_follow_the_binomial_of_the_sample() -> None:
    counts = stats.resampled_counts(3, 10, random.Random(1), 20_000)
    assert len(counts) == 20_000 and set(counts) <= set(range(11))
    # Resampling 10 runs, 3 true: the count of trues is Binomial(10, 0.3).
    observed = Counter(counts)
    for k in range(11):
        expected = math.comb(10, k) * 0.3**k * 0.7 ** (10 - k)
        assert observed[k] / 20_000 == pytest.approx(expected, abs=0.012)


def test_resampled_counts_match_resampling_runs_one_by_one() -> None:
    rng = random.Random(7)
    sample = [True] * 4 + [False] * 8
    brute = Counter(sum(rng.choices(sample, k=len(sample))) for _ in range(20_000))
    fast = Counter(stats.resampled_counts(4, 12, random.Random(8), 20_000))
    for k in range(13):
        assert fast[k] / 20_000 == pytest.approx(brute[k] / 20_000, abs=0.015)


def test_the_same_seed_gives_the_same_interval() -> None:
    assert gap((7, 12), (3, 11)) == gap((7, 12), (3, 11))
    assert stats.rng_for("a", "b").random() == stats.rng_for("a", "b").random()
    assert stats.rng_for("a", "b").random() != stats.rng_for("a", "c").random()


def test_order_statistic_cdf_is_a_binomial_tail() -> None:
    n = 9
    for m in range(1, n + 1):
        for j in range(n + 1):
            p = j / n
            direct = sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(m, n + 1))
            assert stats._order_statistic_cdf(n, m, j) == pytest.approx(direct, abs=1e-12)


def test_order_statistic_cdf_stays_finite_for_large_n() -> None:
    values = [stats._order_statistic_cdf(2001, 1001, j) for j in range(0, 2002, 50)]
    assert values == sorted(values) and values[0] == 0 and values[-1] == 1
    assert stats._order_statistic_cdf(2001, 1001, 1000) == pytest.approx(0.5, abs=0.02)


@pytest.mark.parametrize("n", [7, 8, 15])
def test_median_interval_matches_a_brute_force_bootstrap(n: int) -> None:
    rng = random.Random(n)
    values = [round(rng.gauss(10, 3), 2) for _ in range(n)]
    interval = stats.median_interval(values)
    brute = sorted(stats.median(rng.choices(values, k=n)) for _ in range(40_000))
    ordered = sorted(values)
    # The exact bounds are sample values; the brute-force percentiles land on or
    # next to them (for even n the exact interval is the wider, conservative one).
    low_rank, high_rank = ordered.index(interval.low), ordered.index(interval.high)
    assert interval.low <= brute[1000] <= ordered[min(low_rank + 1, n - 1)]
    assert ordered[max(high_rank - 1, 0)] <= brute[38_999] <= interval.high
    assert interval.estimate == stats.median(values)


def test_median_interval_small_cases() -> None:
    assert stats.median_interval([4]) == stats.Interval(4, 4, 4)
    assert stats.median_interval([5, 5, 5, 5]) == stats.Interval(5, 5, 5)
    assert stats.median_interval([1, 3]) == stats.Interval(2, 1, 3)
    with pytest.raises(ValueError):
        stats.median_interval([])


def test_kappa_on_a_known_table() -> None:
    # judge \ human   true  false
    #   true           20     5
    #   false          10    15        n = 50
    # observed agreement p_o = (20 + 15) / 50 = 0.7
    # judge true 25/50 = 0.5, human true 30/50 = 0.6
    # chance p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5
    # kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    pairs = [(True, True)] * 20 + [(True, False)] * 5 + [(False, True)] * 10 + [(False, False)] * 15
    result = stats.agreement(pairs)
    assert (
        result.n,
        result.both_true,
        result.first_only,
        result.second_only,
        result.both_false,
    ) == (50, 20, 5, 10, 15)
    assert result.raw == pytest.approx(0.7)
    assert result.kappa == pytest.approx(0.4)


def test_kappa_edges() -> None:
    perfect = stats.agreement([(True, True), (False, False)] * 3)
    assert perfect.kappa == pytest.approx(1.0) and perfect.raw == 1.0
    # Both raters always say true: agreement is total by chance, kappa is undefined.
    constant = stats.agreement([(True, True)] * 4)
    assert constant.raw == 1.0 and constant.kappa is None
    # Always opposite with balanced marginals: p_o = 0, p_e = 0.5 -> kappa = -1.
    assert stats.agreement([(True, False), (False, True)] * 2).kappa == pytest.approx(-1.0)
    assert stats.agreement([]) == stats.Agreement(0, 0, 0, 0, 0, None, None)

"""Simulation evidence for the report's gap procedures (issue 33): real error rates and power.

Prints, with fixed seeds:

- ``stats.exact_bootstrap``, ``stats.approximation``: how often the exact bootstrap (used for
  the peeking below) and the normal approximation (the runs needed rest on it) decide a gap as
  the report's own bootstrap interval does, over a grid of states.
- ``stats.peeking.p=P``: two identical cells (rate P), a look after every run up to
  ``--peeks`` runs per cell, stopping at the first ``established``: the share of experiments
  that ever read ``established`` under the fixed-sample interval and under
  ``stopping = "anytime"`` (10,000 experiments per rate; the fixed-sample interval as the
  exact bootstrap, the report's with infinitely many resamples, checked by
  ``stats.peeking.bootstrap``: the report's own 10,000 resamples on fewer experiments and
  looks, against the exact one on the same ones).
- ``stats.peeking.unequal``: the anytime sequence with unequal runs per side (each run to a
  side by a coin): the share of experiments where it ever misses the true gap.
- ``stats.runs_needed``: rates 0.5 vs 0.7 observed at 10 runs per cell; the report's runs
  needed against the runs per cell at which simulated experiments (the report's own
  procedure, fixed-sample: its bootstrap) reach 80% ``established``.
- ``stats.holm``: 30 null gaps (10 cells x 3 criteria against one reference, 30 runs per
  cell): the share of families with any false ``established``, without and with Holm (and
  with Holm ranked by the bootstrap's p-value, which the report does not do: too small in
  the far tail Holm reads).

    uv run python benchmarks/bench_stats.py [--quick]

The full run takes minutes on a shared 2-core machine; ``--quick`` well under one.
``tests/report/test_report_simulation.py`` runs a smaller version still.
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import time
from collections.abc import Callable
from statistics import NormalDist

from trysquare.report import certainty, stats

ALPHA = 1 - stats.CONFIDENCE
Z = NormalDist().inv_cdf(1 - ALPHA / 2)
State = tuple[int, int, int, int]  # cell true, cell n, reference true, reference n


class Bootstrap:
    """The report's fixed-sample gap (``stats.proportion_gap``), memoised by state.

    A gap is a function of its counts and its seed; the simulation seeds by state, so each
    state is resampled once however many experiments reach it.
    """

    def __init__(self, resamples: int = stats.RESAMPLES) -> None:
        self.resamples = resamples
        self.seen: dict[State, stats.Gap] = {}

    def gap(self, state: State) -> stats.Gap:
        if state not in self.seen:
            x, n, rx, rn = state
            name = ",".join(map(str, state))
            self.seen[state] = stats.proportion_gap(
                (x, n),
                (rx, rn),
                cell_counts=stats.resampled_counts(
                    x, n, stats.rng_for("sim", name, "cell"), self.resamples
                ),
                reference_counts=stats.resampled_counts(
                    rx, rn, stats.rng_for("sim", name, "reference"), self.resamples
                ),
            )
        return self.seen[state]

    def established(self, state: State) -> bool:
        return self.gap(state).established


def normal_established(state: State) -> bool:
    """The normal approximation of the bootstrap interval: ``|d| > z·sqrt(p1q1/n1 + p2q2/n2)``.

    What the runs needed assume; not used to decide any simulated experiment.
    """
    x, n, rx, rn = state
    p1, p2 = x / n, rx / rn
    se = math.sqrt(p1 * (1 - p1) / n + p2 * (1 - p2) / rn)
    return abs(p1 - p2) > Z * se if se > 0 else p1 != p2


class ExactBootstrap:
    """The report's bootstrap with infinitely many resamples, for equal runs per side.

    A resample of each side is Binomial(n, x/n); the percentile interval excludes zero when
    under 2.5% of resampled differences lie at or below zero (``low > 0``), or at most 2.5%
    at or above it (``high < 0``, by the nearest rank). With equal ``n`` those shares are
    ``P(X1 <= X2)`` and ``P(X1 >= X2)``, sums of ``n + 1`` products of the two binomials'
    tables: exact, and fast enough to decide every look of 10,000 experiments. The report
    draws 10,000 resamples instead; ``stats.exact_bootstrap`` prints how often the two agree.
    """

    def __init__(self) -> None:
        self.n = -1
        self.tables: dict[int, tuple[list[float], list[float]]] = {}
        self.seen: dict[tuple[int, int], bool] = {}

    def _table(self, x: int, n: int) -> tuple[list[float], list[float]]:
        if n != self.n:
            self.n, self.tables, self.seen = n, {}, {}
        if x not in self.tables:
            if x in (0, n):
                pmf = [0.0] * (n + 1)
                pmf[x] = 1.0
            else:
                cdf = stats._binomial_cdf(n, x / n)
                pmf = [cdf[0]] + [b - a for a, b in itertools.pairwise(cdf)]
            self.tables[x] = (pmf, list(itertools.accumulate(pmf)))
        return self.tables[x]

    def established(self, state: State) -> bool:
        x, n, rx, rn = state
        assert n == rn, "equal runs per side only"
        self._table(x, n)
        if (x, rx) not in self.seen:
            _, cdf1 = self._table(x, n)
            pmf2, _ = self._table(rx, n)
            at_most = sum(p * c for p, c in zip(pmf2, cdf1))  # P(X1 <= X2)
            below = sum(p * c for p, c in zip(pmf2[1:], cdf1))  # P(X1 < X2)
            at_least = 1 - below  # P(X1 >= X2)
            self.seen[(x, rx)] = at_most < ALPHA / 2 - 1e-12 or at_least <= ALPHA / 2 + 1e-12
        return self.seen[(x, rx)]


def agreement(
    first: Callable[[State], bool],
    second: Callable[[State], bool],
    sizes: tuple[int, ...],
    step: int,
) -> tuple[int, int]:
    """(states where ``first`` and ``second`` decide alike, states): a grid, equal runs per side."""
    agree = total = 0
    for n in sizes:
        for x in range(0, n + 1, max(1, n // step)):
            for rx in range(0, n + 1, max(1, n // step)):
                state = (x, n, rx, n)
                agree += first(state) == second(state)
                total += 1
    return agree, total


def peeking(
    rate: float,
    experiments: int,
    peeks: int,
    seed: int,
    fixed: Callable[[State], bool] | None = None,
) -> tuple[float, float]:
    """Shares of null experiments ever read ``established``: (fixed-sample, anytime).

    Every experiment takes one run of each cell at a time and looks after each pair, up to
    ``peeks`` per cell. ``fixed`` decides a look at the fixed-sample interval (default: the
    exact bootstrap); the anytime sequence is the report's own.
    """
    decide = fixed or ExactBootstrap().established
    rng = random.Random(f"peeking-{seed}-{rate}")
    x, rx = [0] * experiments, [0] * experiments
    fixed_hit, anytime_hit = [False] * experiments, [False] * experiments
    for n in range(1, peeks + 1):  # looks outermost: the exact bootstrap's tables are per n
        radius = certainty.boundary(n / 2)
        for e in range(experiments):
            x[e] += rng.random() < rate
            rx[e] += rng.random() < rate
            if not fixed_hit[e] and decide((x[e], n, rx[e], n)):
                fixed_hit[e] = True
            if not anytime_hit[e] and abs(x[e] - rx[e]) > radius:
                anytime_hit[e] = True
    return sum(fixed_hit) / experiments, sum(anytime_hit) / experiments


def unequal_coverage(rates: tuple[float, float], experiments: int, looks: int, seed: int) -> float:
    """Share of experiments whose anytime sequence ever misses the true gap, runs unequal.

    Each next run goes to the cell or the reference by a coin (so the two sides' counts
    differ, and the sequence must cover the gap whatever the other side's rate), with a
    look after every run once both sides have one.
    """
    rng = random.Random(f"unequal-{seed}-{rates}")
    truth = rates[0] - rates[1]
    misses = 0
    for _ in range(experiments):
        x = a = rx = b = 0
        for _look in range(looks):
            if rng.random() < 0.5:
                a += 1
                x += rng.random() < rates[0]
            else:
                b += 1
                rx += rng.random() < rates[1]
            if a and b:
                interval = certainty.anytime_gap((x, a), (rx, b))
                if not interval.low <= truth <= interval.high:
                    misses += 1
                    break
    return misses / experiments


def simulated_power(
    rates: tuple[float, float], n: int, experiments: int, seed: int, bootstrap: Bootstrap
) -> float:
    """Share of experiments with ``n`` runs per cell whose report reads ``established``."""
    rng = random.Random(f"power-{seed}-{n}")
    hits = 0
    for _ in range(experiments):
        x = sum(rng.random() < rates[0] for _ in range(n))
        rx = sum(rng.random() < rates[1] for _ in range(n))
        hits += bootstrap.established((x, n, rx, n))
    return hits / experiments


def runs_reaching(
    rates: tuple[float, float],
    power: float,
    grid: list[int],
    experiments: int,
    seed: int,
    bootstrap: Bootstrap,
) -> tuple[float, list[tuple[int, float]]]:
    """Runs per cell where the simulated power crosses ``power`` (linear between grid points)."""
    curve = [(n, simulated_power(rates, n, experiments, seed, bootstrap)) for n in grid]
    for (n0, p0), (n1, p1) in itertools.pairwise(curve):
        if p0 < power <= p1:
            return n0 + (power - p0) / (p1 - p0) * (n1 - n0), curve
    return (grid[0] if curve[0][1] >= power else math.inf), curve


def holm_family_error(
    families: int,
    cells: int,
    criteria: int,
    runs: int,
    rate: float,
    seed: int,
    bootstrap: Bootstrap,
) -> dict[str, float]:
    """Shares of null families with any false ``established``, per procedure and correction.

    As the report decides: fixed-sample, a gap is established when its bootstrap interval
    excludes zero (and, with Holm, Holm over every gap's Fisher p-value rejects it);
    ``fixed/holm-bootstrap-p`` ranks by the bootstrap's own p-value instead, the reason
    the report does not. Anytime: the sequence's p-value.
    """
    rng = random.Random(f"holm-{seed}")
    keys = ("fixed/none", "fixed/holm", "fixed/holm-bootstrap-p", "anytime/none", "anytime/holm")
    errors = dict.fromkeys(keys, 0)
    for _ in range(families):
        gaps: list[stats.Gap] = []
        fisher, anytime = [], []
        for _criterion in range(criteria):
            reference = sum(rng.random() < rate for _ in range(runs))
            for _cell in range(cells):
                x = sum(rng.random() < rate for _ in range(runs))
                gaps.append(bootstrap.gap((x, runs, reference, runs)))
                fisher.append(certainty.fisher_p_value((x, runs), (reference, runs)))
                anytime.append(certainty.anytime_p_value((x, runs), (reference, runs)))
        established = [gap.established for gap in gaps]
        errors["fixed/none"] += any(established)
        holm = certainty.holm(fisher)
        errors["fixed/holm"] += any(e and h for e, h in zip(established, holm))
        holm = certainty.holm([gap.p_value for gap in gaps])
        errors["fixed/holm-bootstrap-p"] += any(e and h for e, h in zip(established, holm))
        errors["anytime/none"] += any(p < ALPHA for p in anytime)
        errors["anytime/holm"] += any(certainty.holm(anytime))
    return {key: count / families for key, count in errors.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: well under a minute")
    args = parser.parse_args(argv)
    quick = args.quick
    started = time.perf_counter()
    bootstrap = Bootstrap()

    sizes, step = ((5, 20, 50), 10) if quick else ((5, 10, 20, 50, 100, 200), 25)
    agree, total = agreement(bootstrap.established, ExactBootstrap().established, sizes, step)
    print(
        f"stats.exact_bootstrap: decides {agree} of {total} gap states ({agree / total:.1%}) as "
        "the report's 10,000-resample bootstrap does"
    )
    agree, total = agreement(bootstrap.established, normal_established, sizes, step)
    print(
        f"stats.approximation: the normal approximation the runs needed rest on decides {agree} "
        f"of {total} gap states ({agree / total:.1%}) as the report's bootstrap does"
    )

    experiments, peeks = (1_000, 100) if quick else (10_000, 200)
    for rate in (0.3, 0.5, 0.7):
        fixed, anytime = peeking(rate, experiments, peeks, seed=1)
        print(
            f"stats.peeking.p={rate}: false established, looking after every run up to {peeks} "
            f"per cell ({experiments:,} experiments): fixed-sample {fixed:.1%}, "
            f"anytime {anytime:.1%}"
        )
    small_experiments, small_peeks = (100, 30) if quick else (500, 60)
    fixed_real, _ = peeking(
        0.5, small_experiments, small_peeks, seed=2, fixed=bootstrap.established
    )
    fixed_exact, _ = peeking(0.5, small_experiments, small_peeks, seed=2)
    print(
        f"stats.peeking.bootstrap: p=0.5, up to {small_peeks} per cell ({small_experiments} "
        f"experiments): the report's 10,000-resample bootstrap {fixed_real:.1%}, the exact one "
        f"{fixed_exact:.1%}"
    )

    for rates in ((0.5, 0.5), (0.7, 0.4)):
        missed = unequal_coverage(rates, 400 if quick else 2_000, 200 if quick else 400, seed=5)
        print(
            f"stats.peeking.unequal: rates {rates[0]} and {rates[1]}, each run to a side by a "
            f"coin, a look after every run up to {200 if quick else 400} runs: the anytime "
            f"sequence ever misses the true gap in {missed:.1%} of experiments"
        )

    observed = (7 / 10, 5 / 10)
    predicted = certainty.runs_needed(observed, have=(10, 10))
    assert predicted is not None
    grid = [round(predicted * f) for f in (0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4)]
    reached, curve = runs_reaching(
        observed, certainty.POWER, grid, 300 if quick else 2_000, 3, bootstrap
    )
    shown = ", ".join(f"{n}: {p:.0%}" for n, p in curve)
    print(
        f"stats.runs_needed: 0.7 vs 0.5 seen at 10 runs per cell: the report says ≈ {predicted}; "
        f"simulated experiments reach {certainty.POWER:.0%} established at {reached:.0f} "
        f"({predicted / reached - 1:+.0%}) [{shown}]"
    )
    anytime_predicted = certainty.runs_needed(observed, have=(10, 10), stopping="anytime")
    assert anytime_predicted is not None
    rng = random.Random("anytime-power")
    runs = anytime_predicted
    hits = 0
    tries = 300 if quick else 2_000
    for _ in range(tries):
        x = sum(rng.random() < observed[0] for _ in range(runs))
        rx = sum(rng.random() < observed[1] for _ in range(runs))
        hits += certainty.anytime_gap((x, runs), (rx, runs)).excludes_zero
    print(
        f"stats.runs_needed.anytime: the report says ≈ {anytime_predicted}; simulated experiments "
        f"at that many runs per cell read established {hits / tries:.0%} of the time"
    )

    families = 500 if quick else 10_000
    error = holm_family_error(
        families, cells=10, criteria=3, runs=30, rate=0.5, seed=4, bootstrap=bootstrap
    )
    print(
        f"stats.holm: 30 null gaps ({families:,} families, 30 runs per cell): "
        "any false established: "
        f"fixed-sample {error['fixed/none']:.1%} uncorrected, {error['fixed/holm']:.1%} with Holm "
        f"({error['fixed/holm-bootstrap-p']:.1%} had Holm ranked by the bootstrap's p-value); "
        f"anytime {error['anytime/none']:.1%} uncorrected, {error['anytime/holm']:.1%} with Holm"
    )
    print(
        f"stats.time: {time.perf_counter() - started:.0f} s, "
        f"{len(bootstrap.seen):,} bootstrap states"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The report's three statistics records, built when a statistic is first computed.

Kept out of :mod:`trysquare.report.stats`, which every ``report`` imports: a report with
no interval to draw (no reference cell, no judged pair, no median) never builds them.
``trysquare.report.stats`` still offers each by name.
"""

from __future__ import annotations

from trysquare._record import record

__all__ = ["Agreement", "Gap", "Interval"]


@record
class Interval:
    """An estimate with its 95% interval."""

    estimate: float
    low: float
    high: float

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


@record
class Gap:
    """A cell's proportion minus the reference's, with its percentile interval."""

    interval: Interval
    resamples: int
    # Twice the share of resampled differences on the far side of zero (capped at 1). Holm's
    # correction ranks by Fisher's exact test instead: this is too small in the far tail
    # (benchmarks/bench_stats.py measures both).
    p_value: float = 1.0

    @property
    def established(self) -> bool:
        return self.interval.excludes_zero


@record
class Agreement:
    """Two raters (a judge and a human) over the runs where both gave a boolean."""

    n: int
    both_true: int
    first_only: int
    second_only: int
    both_false: int
    raw: float | None  # observed agreement; None when n == 0
    kappa: float | None  # None when undefined (n == 0, or chance agreement is total)

"""A smaller run of ``benchmarks/bench_stats.py``: the error rates and power it prints, asserted.

Seconds, not minutes: fewer experiments, fewer looks, fewer resamples than the benchmark,
with bounds loose enough for that noise and tight enough to fail without the procedures.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from trysquare.report import certainty

pytestmark = pytest.mark.fast

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_stats.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_stats", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_stats"] = module
    spec.loader.exec_module(module)
    return module


def test_peeking_inflates_the_fixed_sample_error_and_not_the_anytime_one(bench: ModuleType) -> None:
    for rate in (0.3, 0.5):
        fixed, anytime = bench.peeking(rate, experiments=300, peeks=60, seed=1)
        assert fixed > 0.3  # looked at after every run, a 5% interval errs far more often
        assert anytime <= 0.05


def test_the_anytime_sequence_covers_the_true_gap_with_unequal_runs(bench: ModuleType) -> None:
    for rates in ((0.5, 0.5), (0.8, 0.3)):
        assert bench.unequal_coverage(rates, experiments=200, looks=120, seed=5) <= 0.05


def test_the_exact_bootstrap_stands_for_the_report_s(bench: ModuleType) -> None:
    report = bench.Bootstrap(resamples=2_000)
    agree, total = bench.agreement(
        report.established, bench.ExactBootstrap().established, (8, 30), 8
    )
    assert agree / total >= 0.95


def test_the_runs_needed_predict_the_simulated_runs_within_a_quarter(bench: ModuleType) -> None:
    observed = (0.7, 0.5)
    predicted = certainty.runs_needed(observed, have=(10, 10))
    assert predicted == 91
    grid = [round(predicted * f) for f in (0.6, 0.8, 1.0, 1.2, 1.4)]
    reached, _curve = bench.runs_reaching(
        observed, 0.8, grid, 150, 3, bench.Bootstrap(resamples=1_000)
    )
    assert abs(predicted / reached - 1) <= 0.25


def test_holm_keeps_the_family_wise_error_of_30_null_gaps_near_5_percent(bench: ModuleType) -> None:
    error = bench.holm_family_error(
        200,
        cells=10,
        criteria=3,
        runs=20,
        rate=0.5,
        seed=4,
        bootstrap=bench.Bootstrap(resamples=2_000),
    )
    assert error["fixed/none"] > 0.3
    assert error["fixed/holm"] <= 0.08  # 5% in the benchmark's 10,000 families; 200 here
    assert error["anytime/holm"] <= 0.05

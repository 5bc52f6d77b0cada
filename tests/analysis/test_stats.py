"""The order-statistic bootstrap must match brute-force resampling."""

from __future__ import annotations

import numpy as np
import pytest

from specload.analysis.stats import (
    Estimate,
    bootstrap_quantile,
    estimate,
    quantile_sorted,
    ratio_estimate,
)


@pytest.mark.parametrize("q", [0.5, 0.95, 0.99, 0.37])
def test_quantile_sorted_equals_numpy_linear_percentile(q: float) -> None:
    x = np.sort(np.random.default_rng(1).lognormal(0, 1, 101))
    assert quantile_sorted(x, q) == pytest.approx(float(np.quantile(x, q)), rel=1e-12)


@pytest.mark.parametrize("q", [0.5, 0.95])
def test_bootstrap_replicates_match_brute_force_resampling(q: float) -> None:
    rng = np.random.default_rng(2)
    x = np.sort(rng.lognormal(0, 0.5, 150))
    brute = np.quantile(x[rng.integers(0, x.size, (20000, x.size))], q, axis=1)
    fast = bootstrap_quantile(x, q, 20000, np.random.default_rng(3))
    for p in (2.5, 25, 50, 75, 97.5):
        assert np.percentile(fast, p) == pytest.approx(np.percentile(brute, p), rel=0.02)
    assert fast.std() == pytest.approx(brute.std(), rel=0.05)


def test_ci_covers_the_true_median_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(4)
    hits = 0
    for i in range(300):
        x = np.sort(rng.exponential(1.0, 80))
        est, _ = estimate(x, 0.5, 400, np.random.default_rng(i))
        hits += est.lo <= np.log(2) <= est.hi
    assert 0.90 <= hits / 300 <= 0.99


def test_empty_and_single_samples_give_none_or_constant() -> None:
    est, reps = estimate(np.array([]), 0.5, 10, np.random.default_rng(0))
    assert est.value is None and est.lo is None and np.isnan(reps).all()
    est, reps = estimate(np.array([3.0]), 0.95, 10, np.random.default_rng(0))
    assert est == Estimate(3.0, 3.0, 3.0)


def test_ratio_estimate_divides_replicate_by_replicate() -> None:
    num, den = Estimate(2.0, 1.0, 3.0), Estimate(4.0, 3.0, 5.0)
    est, reps = ratio_estimate(num, np.array([2.0, 1.0, 3.0]), den, np.array([4.0, 4.0, 0.0]))
    assert est.value == 0.5
    assert np.isnan(reps[2]) and reps[:2].tolist() == [0.5, 0.25]

"""The order-statistic bootstrap and its two-level form must match brute-force resampling."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import numpy as np
import pytest

from specload.analysis.statistics.stats import (
    Estimate,
    Units,
    bootstrap_quantile,
    estimate,
    hierarchical_bootstrap_quantile,
    percentile_ci,
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


# --- Two-level (hierarchical) bootstrap: run directories, then requests within each ----------


def _compositions(total: int, parts: int) -> Iterator[tuple[int, ...]]:
    """Every way to put ``total`` draws into ``parts`` ordered cells."""
    if parts == 1:
        yield (total,)
        return
    for first in range(total + 1):
        for rest in _compositions(total - first, parts - 1):
            yield (first, *rest)


def _multinomial_pmf(counts: tuple[int, ...]) -> float:
    """Probability of ``counts`` when sum(counts) draws fall uniformly into len(counts) cells."""
    total = sum(counts)
    coef = math.factorial(total)
    for c in counts:
        coef //= math.factorial(c)
    return coef / len(counts) ** total


def _exact_two_level(runs: list[list[float]], q: float) -> tuple[np.ndarray, np.ndarray]:
    """Support and probabilities of the two-level bootstrap percentile, by full enumeration.

    Level 1: R run directories drawn with replacement (multiplicities ~ Multinomial(R, 1/R)).
    Level 2: a run drawn m times contributes m * n_r draws with replacement from its values.
    """
    n_runs = len(runs)
    dist: dict[float, float] = {}
    for mult in _compositions(n_runs, n_runs):
        p_mult = _multinomial_pmf(mult)
        per_run = [
            [(c, _multinomial_pmf(c)) for c in _compositions(m * len(vals), len(vals))]
            for m, vals in zip(mult, runs, strict=False)
            if m
        ]
        values = np.concatenate([vals for m, vals in zip(mult, runs, strict=False) if m])
        for combo in itertools.product(*per_run):
            counts = np.concatenate([c for c, _ in combo])
            p = p_mult * math.prod(pc for _, pc in combo)
            v = round(float(np.quantile(np.repeat(values, counts), q)), 12)
            dist[v] = dist.get(v, 0.0) + p
    support = np.array(sorted(dist))
    return support, np.array([dist[v] for v in support])


def _pooled(runs: list[list[float]]) -> tuple[np.ndarray, np.ndarray]:
    x = np.concatenate([np.asarray(r, dtype=float) for r in runs])
    g = np.concatenate([np.full(len(r), i) for i, r in enumerate(runs)])
    order = np.argsort(x, kind="stable")
    return x[order], g[order]


SMALL_CASES = {
    "three-runs": [[1.0, 2.0, 4.0], [3.0, 5.0, 6.0, 9.0], [2.5, 7.0, 8.0]],
    "ties-unequal-sizes": [[2.0], [1.0, 2.0, 2.0, 5.0], [0.5, 2.0, 3.0]],
}


@pytest.mark.parametrize("case", sorted(SMALL_CASES))
@pytest.mark.parametrize("q", [0.5, 0.95])
def test_hierarchical_bootstrap_matches_the_exact_two_level_distribution(
    case: str, q: float
) -> None:
    runs = SMALL_CASES[case]
    support, prob = _exact_two_level(runs, q)
    assert prob.sum() == pytest.approx(1.0, abs=1e-12)
    xs, groups = _pooled(runs)
    b = 200_000
    fast = hierarchical_bootstrap_quantile(xs, groups, q, b, np.random.default_rng(5))
    mean = float((support * prob).sum())
    sd = math.sqrt(float(((support - mean) ** 2 * prob).sum()))
    assert fast.mean() == pytest.approx(mean, abs=5 * sd / math.sqrt(b))
    assert fast.std() == pytest.approx(sd, rel=0.02)
    # The whole distribution: empirical CDF against the exact one at every support point
    # (Kolmogorov distance; 0.006 is ~2.7/sqrt(B), exceeded by chance with p ~ 1e-6).
    cdf = np.cumsum(prob)
    emp = np.searchsorted(np.sort(np.round(fast, 12)), support, side="right") / b
    assert np.abs(emp - cdf).max() < 0.006
    # And the CI bounds compare uses lie where the exact distribution puts them.
    lo, hi = percentile_ci(fast)
    assert support[np.searchsorted(cdf, 0.02)] <= lo <= support[np.searchsorted(cdf, 0.03)]
    assert support[np.searchsorted(cdf, 0.97)] <= hi <= support[np.searchsorted(cdf, 0.98)]


def test_hierarchical_bootstrap_matches_explicit_resampling_on_a_bigger_case() -> None:
    rng = np.random.default_rng(6)
    runs = [rng.lognormal(0, 0.3, 40) * f for f in (1.0, 1.2, 1.1)] + [rng.lognormal(0, 0.3, 7)]
    xs, groups = _pooled([list(r) for r in runs])
    for q in (0.5, 0.99):
        brute = np.empty(10_000)  # explicit resamples: runs with replacement, then requests
        for i in range(brute.size):
            picks = rng.integers(0, len(runs), len(runs))
            pool = [runs[p][rng.integers(0, runs[p].size, runs[p].size)] for p in picks]
            brute[i] = np.quantile(np.concatenate(pool), q)
        fast = hierarchical_bootstrap_quantile(xs, groups, q, 40_000, np.random.default_rng(7))
        # Monte Carlo on both sides: over seeds the worst of these was 4 % (percentiles), 2 % (sd).
        for p in (2.5, 25, 50, 75, 97.5):
            assert np.percentile(fast, p) == pytest.approx(np.percentile(brute, p), rel=0.06)
        assert fast.std() == pytest.approx(brute.std(), rel=0.05)


def test_between_run_variance_widens_the_ci_far_beyond_pooled_resampling() -> None:
    rng = np.random.default_rng(8)
    runs = [rng.normal(10.0, 1.0, 500), rng.normal(13.0, 1.0, 500)]
    xs, groups = _pooled([list(r) for r in runs])
    hier, _ = estimate(xs, 0.5, 2000, np.random.default_rng(9), groups)
    naive, _ = estimate(xs, 0.5, 2000, np.random.default_rng(9))
    assert hier.value == naive.value == pytest.approx(float(np.quantile(xs, 0.5)))
    assert hier.lo is not None and hier.hi is not None and naive.lo is not None
    assert naive.hi is not None
    assert (hier.hi - hier.lo) > 5 * (naive.hi - naive.lo)
    # With both runs drawn twice 1/4 of the time each, the CI reaches each run's own median.
    assert hier.lo < np.median(runs[0]) + 0.3 and hier.hi > np.median(runs[1]) - 0.3


def test_one_unit_is_the_single_level_bootstrap_exactly() -> None:
    xs = np.sort(np.random.default_rng(10).lognormal(0, 1, 300))
    for q in (0.5, 0.95, 0.99):
        one = hierarchical_bootstrap_quantile(
            xs, np.zeros(xs.size, dtype=int), q, 500, np.random.default_rng(11)
        )
        assert np.array_equal(one, bootstrap_quantile(xs, q, 500, np.random.default_rng(11)))


def test_hierarchical_bootstrap_is_deterministic_for_a_seed_and_covers_q_0_and_1() -> None:
    xs, groups = _pooled([[1.0, 3.0, 3.0], [2.0, 2.0, 8.0, 9.0]])
    for q in (0.0, 1.0):
        reps = hierarchical_bootstrap_quantile(xs, groups, q, 1000, np.random.default_rng(12))
        assert set(reps.tolist()) <= set(xs.tolist())
    a = hierarchical_bootstrap_quantile(xs, groups, 0.5, 1000, np.random.default_rng(13))
    b = hierarchical_bootstrap_quantile(xs, groups, 0.5, 1000, np.random.default_rng(13))
    assert np.array_equal(a, b)
    # Units named in the same order any way, or prepared once: the same draws.
    names = np.array(["start-a", "start-b"])[groups]
    for same in (names, Units.of(groups), Units.of(groups + 7)):
        c = hierarchical_bootstrap_quantile(xs, same, 0.5, 1000, np.random.default_rng(13))
        assert np.array_equal(a, c)
    assert np.isnan(
        hierarchical_bootstrap_quantile(np.array([]), np.array([]), 0.5, 3, np.random.default_rng())
    ).all()


def test_blocks_in_two_regimes_keep_their_spread_when_the_bootstrap_collapses() -> None:
    """Five blocks fast, one slow: the pooled median sits in the fast blocks in nearly every
    bootstrap draw, so the widened bootstrap alone stays narrow; the blocks' own medians
    spread, and the interval must be at least their t interval (stats.few_units_widened)."""
    from specload.analysis.statistics.stats import few_units_widened, t975, unit_percentiles

    rng = np.random.default_rng(3)
    blocks = [rng.normal(0.83, 0.004, 9) for _ in range(5)] + [rng.normal(1.10, 0.004, 9)]
    x = np.concatenate(blocks)
    unit = np.repeat(np.arange(6), 9)
    order = np.argsort(x, kind="stable")
    xs, groups = x[order], Units.of(unit[order])
    est, reps = estimate(xs, 0.5, 1000, np.random.default_rng(0), groups)
    spread = unit_percentiles(xs, groups, 0.5)
    assert spread == pytest.approx([float(np.median(b)) for b in blocks], rel=1e-9)
    narrow, _ = few_units_widened(est, reps, 6)
    wide, _ = few_units_widened(est, reps, 6, spread)
    logs = np.log(spread)
    half_t = t975(5) * float(np.std(logs, ddof=1)) / math.sqrt(6)
    assert narrow.lo is not None and narrow.hi is not None
    assert wide.lo is not None and wide.hi is not None
    assert math.log(wide.hi / wide.lo) / 2 >= 0.95 * half_t > math.log(narrow.hi / narrow.lo) / 2
    assert wide.lo <= narrow.lo and wide.hi >= narrow.hi
    # a unit with too few values for a tail percentile gives no value for it
    assert np.isnan(unit_percentiles(xs, groups, 0.99)).all()

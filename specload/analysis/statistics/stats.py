"""Full-precision percentiles and their bootstrap confidence intervals, vectorised.

A percentile's bootstrap distribution does not need resampling the data. Resampling n values
with replacement from the sample is the same as mapping n uniform draws through the sample's
quantile function ``F_n^-1`` (which is monotone), so the r-th order statistic of a resample
is ``F_n^-1(U_(r))`` where ``U_(r) ~ Beta(r, n - r + 1)`` is the r-th of n sorted uniforms.
The next order statistic follows as ``U_(r+1) = U_(r) + (1 - U_(r)) * Beta(1, n - r)``. We
therefore draw B replicates of numpy's default ("linear", type 7) percentile exactly, at
O(B) cost after one sort, instead of O(B * n): this is what makes compare on a million
records take seconds. ``tests/analysis/statistics/test_stats.py`` checks it against brute-force
resampling.

Confidence intervals are 95 % percentile intervals of the replicates. Ratios of two
independent samples (a condition over the baseline) take the ratio replicate by replicate.

Replicates: one server start is one sample. Two starts of the same server configuration (or
the same configuration on two hosts of one kind) can differ by far more than the sampling
noise within either: a 20-s step's p50 TPOT moved by 30 % between starts, because one start's
decode step ran slower for a while. A CI computed from the requests of one start covers only
the noise within it. When a condition's step has data from two or more run directories (one
run directory = one server start; re-walks of the ladder on one server inside a run directory
are repeats and stay pooled), ``hierarchical_bootstrap_quantile`` resamples at both levels, as
a careful engineer would: draw R run directories with replacement out of the R there are, then
within each drawn run directory draw its own number of requests with replacement, pool, and
take numpy's linear percentile of the pool. The point estimate stays the pooled percentile;
only the spread of the replicates (and so every CI, ratio and crossover built on them) grows by
the between-start variance.

It is computed without materialising any resample, exactly. Given the run multiplicities
``m`` (one multinomial draw per replicate), the resample is, for each run r, ``m_r * n_r``
uniform draws from that run's values: a multinomial count on each position of the pooled
sorted array. The k-th order statistic of the resample is the first position whose cumulative
count reaches k. We find it by bisection over positions, splitting each run's count in the
current interval between its halves with a binomial draw (the exact conditional law of a
multinomial): ``ceil(log2 N)`` rounds of ``B x R`` binomial draws, vectorised over the B
replicates. The linear percentile also needs the next order statistic: the same position if
it was drawn again, else the smallest of the draws after it, one inverse-CDF draw per run (the
minimum of D uniform draws over e values has ``P(i >= t) = (1 - t/e)^D``). The resample size
``M = sum m_r n_r`` varies, so k and the interpolation weight are per replicate. ``Units.of``
prepares the runs' cumulative counts once per metric (``O(R N)``) for all its percentiles.
Cost (B = 1000, R = 2): a few milliseconds per percentile for N up to 10^5 (Python-level
rounds and binomial draws dominate), where explicit resampling costs ``O(B N)``, seconds at
N = 10^5. ``benchmarks/compare_speed.py --replicates 2`` measures it inside a whole compare
(``benchmarks/results/compare_speed_replicates2.json``, ``percentile_bootstrap_ms``).
``tests/analysis/statistics/test_stats.py`` checks the draws against the exact distribution, enumerated.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

__all__ = [
    "Estimate",
    "Units",
    "bootstrap_quantile",
    "estimate",
    "MIN_STARTS_FOR_CONFIG",
    "effect_over_starts",
    "few_units_widened",
    "for_looks",
    "look_stretch",
    "unit_percentiles",
    "hierarchical_bootstrap_quantile",
    "over_starts",
    "percentile_ci",
    "quantile_sorted",
    "ratio_estimate",
    "rng_for",
    "t_quantile",
]

CI_LEVEL = 0.95


@dataclass(frozen=True, slots=True)
class Estimate:
    """A point value with its 95 % bootstrap interval; None where there is no data."""

    value: float | None
    lo: float | None = None
    hi: float | None = None

    def to_dict(self) -> dict[str, float | None]:
        return {"value": self.value, "lo": self.lo, "hi": self.hi}


def rng_for(*parts: object, seed: int = 0) -> np.random.Generator:
    """A generator seeded from names, so a result never depends on the order of work."""
    key = zlib.crc32("\x1f".join(str(p) for p in parts).encode())
    return np.random.default_rng([seed, key])


def quantile_sorted(xs: np.ndarray | Sequence[float], q: float) -> float | None:
    """numpy's default (linear) percentile, ``q`` in 0..1, of already sorted, NaN-free values
    (an array, or a list kept sorted as values arrive, as the live tallies do): the one
    percentile of specload's figures, live or in a report."""
    n = len(xs)
    if n == 0:
        return None
    h = (n - 1) * q
    j = int(np.floor(h))
    frac = h - j
    if j + 1 >= n or frac == 0.0:
        return float(xs[min(j, n - 1)])
    return float(xs[j] + frac * (xs[j + 1] - xs[j]))


def bootstrap_quantile(xs: np.ndarray, q: float, b: int, rng: np.random.Generator) -> np.ndarray:
    """``b`` bootstrap replicates of the linear ``q`` percentile of sorted ``xs`` (NaN if empty)."""
    n = xs.shape[0]
    if n == 0:
        return np.full(b, np.nan)
    if n == 1:
        return np.full(b, float(xs[0]))
    h = (n - 1) * q
    j = int(np.floor(h))
    frac = h - j
    r = j + 1  # 1-based order statistic below the percentile
    u_r = rng.beta(r, n - r + 1, size=b)
    low = xs[np.clip(np.ceil(n * u_r).astype(np.int64) - 1, 0, n - 1)]
    if frac == 0.0 or r >= n:
        return np.asarray(low, dtype=np.float64)
    u_next = u_r + (1.0 - u_r) * rng.beta(1, n - r, size=b)
    high = xs[np.clip(np.ceil(n * u_next).astype(np.int64) - 1, 0, n - 1)]
    return np.asarray(low + frac * (high - low), dtype=np.float64)


def percentile_ci(reps: np.ndarray) -> tuple[float | None, float | None]:
    """The 95 % percentile interval of replicates, ignoring NaN (None when all are NaN)."""
    finite = reps[~np.isnan(reps)]
    if finite.size == 0:
        return None, None
    tail = (1.0 - CI_LEVEL) / 2 * 100
    lo, hi = np.percentile(finite, [tail, 100 - tail])
    return float(lo), float(hi)


@dataclass(frozen=True, slots=True)
class Units:
    """Which unit (run directory) each value of a pooled sorted sample came from, prepared once.

    ``cum[r, j]`` counts unit r's values among the first j pooled values (shape ``(R, N + 1)``);
    ``by_unit`` lists the pooled positions of unit 0's values, then unit 1's, ..., each
    ascending. Build with ``Units.of(groups)`` and pass to ``estimate`` or
    ``hierarchical_bootstrap_quantile`` for every percentile of that sample.
    """

    cum: np.ndarray
    by_unit: np.ndarray

    @classmethod
    def of(cls, groups: np.ndarray) -> Units:
        groups = np.asarray(groups).reshape(-1)
        ids_ok = groups.size and np.issubdtype(groups.dtype, np.integer) and groups.min() >= 0
        if ids_ok and groups.max() <= 8 * groups.size + 1024:  # a table of ids, not gigabytes
            present = np.bincount(groups) > 0  # O(N) renumbering of small integer ids
            ids = (np.cumsum(present) - 1)[groups]
            n_units = int(present.sum())
        else:
            uniq, inverse = np.unique(groups, return_inverse=True)
            ids, n_units = np.asarray(inverse).reshape(-1), int(uniq.size)
        cum = np.zeros((n_units, groups.size + 1), dtype=np.int64)
        by_unit = np.empty(groups.size, dtype=np.int64)
        at = 0
        for r in range(n_units):
            mine = ids == r
            np.cumsum(mine, out=cum[r, 1:])
            where = np.flatnonzero(mine)
            by_unit[at : at + where.size] = where
            at += where.size
        return cls(cum, by_unit)

    @property
    def count(self) -> int:
        return int(self.cum.shape[0])


def _descend(
    cum: np.ndarray, k: np.ndarray, draws: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Locate the ``k``-th smallest (1-based) value of each replicate's resample by bisection.

    Per replicate (row), ``draws[:, r]`` values are drawn uniformly from unit r's values.
    Each round splits every unit's count in the interval ``[lo, hi)`` of pooled positions
    that holds the k-th between ``[lo, mid)`` and ``[mid, hi)`` with a binomial draw whose
    probability is the share of that unit's values in the left half, and keeps the half that
    holds the k-th. Returns the position of the k-th, the per-unit counts before it, and the
    per-unit counts at it.
    """
    n = cum.shape[1] - 1
    lo = np.zeros(draws.shape[0], dtype=np.int64)
    hi = np.full_like(lo, n)
    below, inside = np.zeros_like(draws), draws.copy()
    below_tot = np.zeros_like(lo)
    while True:
        width = hi - lo
        if not (width > 1).any():
            break
        mid = lo + width // 2  # == lo where the interval is one position: nothing moves
        c_lo, c_mid, c_hi = cum[:, lo].T, cum[:, mid].T, cum[:, hi].T
        total = c_hi - c_lo
        with np.errstate(divide="ignore", invalid="ignore"):
            p = np.where(total > 0, (c_mid - c_lo) / np.maximum(total, 1), 0.0)
        left = rng.binomial(inside, p)
        left_tot = left.sum(axis=1)
        go_left = below_tot + left_tot >= k
        hi = np.where(go_left, mid, hi)
        lo = np.where(go_left, lo, mid)
        below_tot = np.where(go_left, below_tot, below_tot + left_tot)
        below = np.where(go_left[:, None], below, below + left)
        inside = np.where(go_left[:, None], left, inside - left)
    return lo, below, inside


def _next_drawn(
    units: Units,
    pos: np.ndarray,
    remaining: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """The first pooled position after ``pos`` that a replicate drew (its next order statistic).

    Unit r's ``remaining[:, r]`` draws after ``pos`` are uniform over its ``e_r`` values after
    ``pos``, so the smallest of them is the i-th of those with ``P(i >= t) = (1 - t/e_r)^D``:
    one inverse-CDF draw per unit, the minimum over units wins.
    """
    cum, by_unit = units.cum, units.by_unit
    sizes = cum[:, -1]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    before = cum[:, pos + 1].T  # (rows, R): each unit's values at or before pos
    after = sizes[None, :] - before
    u = 1.0 - rng.random(remaining.shape)  # (0, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        share = -np.expm1(np.log(u) / np.maximum(remaining, 1))
    i = np.minimum(np.floor(after * share).astype(np.int64), np.maximum(after - 1, 0))
    idx = np.minimum(starts[None, :] + before + i, by_unit.size - 1)
    cand = np.where(remaining > 0, by_unit[idx], by_unit.size)
    return np.asarray(cand.min(axis=1))


def hierarchical_bootstrap_quantile(
    xs: np.ndarray, groups: np.ndarray | Units, q: float, b: int, rng: np.random.Generator
) -> np.ndarray:
    """``b`` two-level bootstrap replicates of the linear ``q`` percentile of pooled ``xs``.

    ``xs`` is the pooled sample, sorted; ``groups[i]`` names the unit (run directory, one
    server start) that ``xs[i]`` came from (or ``Units.of`` it, to prepare once for several
    percentiles). Each replicate draws as many units as there are,
    with replacement, then as many values as each drawn unit has, with replacement within it,
    and takes numpy's linear percentile of the pooled draws (see the module docstring for how
    this is done without drawing values). With one unit this is ``bootstrap_quantile``.
    """
    n = xs.shape[0]
    if n == 0:
        return np.full(b, np.nan)
    units = groups if isinstance(groups, Units) else Units.of(groups)
    cum, n_units = units.cum, units.count
    if n_units < 2:
        return bootstrap_quantile(xs, q, b, rng)
    sizes = cum[:, -1]
    mult = rng.multinomial(n_units, np.full(n_units, 1.0 / n_units), size=b)
    draws = mult * sizes  # (b, R): how many values each replicate takes from each unit
    total = draws.sum(axis=1)  # >= 1: every unit has a value
    h = (total - 1) * q
    j = np.floor(h)
    frac = h - j
    k = j.astype(np.int64) + 1
    pos, below, at = _descend(cum, k, draws, rng)
    low = xs[pos]
    # The next order statistic is at the same position if that position was drawn again,
    # else at the first position after it that any unit drew.
    need = (frac > 0) & (below.sum(axis=1) + at.sum(axis=1) < k + 1)
    high = low.copy()
    if need.any():
        rest = draws[need] - below[need] - at[need]
        high[need] = xs[_next_drawn(units, pos[need], rest, rng)]
    return np.asarray(low + frac * (high - low), dtype=np.float64)


def estimate(
    xs_sorted: np.ndarray,
    q: float,
    b: int,
    rng: np.random.Generator,
    groups: np.ndarray | Units | None = None,
) -> tuple[Estimate, np.ndarray]:
    """Point percentile, its CI, and the replicates (kept for ratios and the crossover).

    With ``groups`` (the unit of each value, aligned with ``xs_sorted``) naming two or more
    units, the replicates are two-level (``hierarchical_bootstrap_quantile``).
    """
    if groups is not None:
        reps = hierarchical_bootstrap_quantile(xs_sorted, groups, q, b, rng)
    else:
        reps = bootstrap_quantile(xs_sorted, q, b, rng)
    lo, hi = percentile_ci(reps)
    return Estimate(quantile_sorted(xs_sorted, q), lo, hi), reps


def ratio_estimate(
    num: Estimate, num_reps: np.ndarray, den: Estimate, den_reps: np.ndarray
) -> tuple[Estimate, np.ndarray]:
    """``num / den`` with a CI from replicate-wise ratios (independent samples)."""
    if num.value is None or den.value is None or den.value == 0:
        return Estimate(None), np.full(num_reps.shape, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        reps = num_reps / den_reps
    reps[~np.isfinite(reps)] = np.nan
    lo, hi = percentile_ci(reps)
    return Estimate(num.value / den.value, lo, hi), reps


def _t_cdf(x: float, df: int) -> float:
    """Student's t CDF at ``x`` >= 0 by Simpson's rule on its density (exact to ~1e-10 for
    the quantiles used here; no scipy in the dependencies)."""
    grid = np.linspace(0.0, x, 4001)
    logc = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    dens = np.exp(logc - (df + 1) / 2 * np.log1p(grid * grid / df))
    h = x / 4000
    simpson = h / 3 * (dens[0] + dens[-1] + 4 * dens[1:-1:2].sum() + 2 * dens[2:-1:2].sum())
    return 0.5 + float(simpson)


#: the normal 97.5 % quantile: a two-sided 95 % interval's z (one definition; effect.py's
#: forecast and the looks' widening read it here)
Z975 = 1.959964


@lru_cache(maxsize=512)
def t_quantile(p: float, df: int) -> float:
    """Student's t quantile at ``p`` (0.5 < p < 1) for ``df`` >= 1 degrees of freedom."""
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    lo, hi = 0.0, 1.0
    while _t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _t_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2


def t975(df: int) -> float:
    """Student's t 97.5 % quantile (a two-sided 95 % interval) for ``df`` >= 1."""
    return t_quantile(0.975, df)


def t9875(df: int) -> float:
    """Student's t 98.75 % quantile (a two-sided 97.5 % interval) for ``df`` >= 1: the
    interval about this config over server starts (``over_starts``) and over time slices."""
    return t_quantile(0.9875, df)


def widening(units: int, t: Callable[[int], float] = t975) -> float:
    """How much a bootstrap over ``units`` clusters must be stretched to cover like a t
    interval: ``sqrt(G / (G - 1))`` undoes the bootstrap's variance, which divides by G, not
    G - 1, and ``t(G - 1) / z`` its normal tails. 1.44 at 6 blocks, 1.17 at 12, 9.2 at 2."""
    g = max(units, 2)
    return math.sqrt(g / (g - 1)) * t(g - 1) / Z975


#: A unit's own percentile counts toward the spread between units only where the unit holds
#: this many values on the percentile's narrower side (30 requests give a p50, not a p99).
MIN_TAIL_VALUES = 3


def unit_percentiles(xs: np.ndarray, groups: Units, q: float) -> np.ndarray:
    """Each unit's own ``q`` percentile of its values in the pooled sorted ``xs`` (NaN where a
    unit holds too few values for that percentile: ``MIN_TAIL_VALUES``)."""
    out = np.full(groups.count, np.nan)
    at = 0
    for r in range(groups.count):
        n = int(groups.cum[r, -1])
        if n * min(q, 1.0 - q) >= MIN_TAIL_VALUES:
            out[r] = quantile_sorted(xs[groups.by_unit[at : at + n]], q) or np.nan
        at += n
    return out


def _spread_stretch(
    reps: np.ndarray, unit_values: np.ndarray, t: Callable[[int], float] = t975
) -> float:
    """The stretch that makes the replicates' interval at least as wide, on a log scale, as
    a t interval of the units' own values; 0 where there is nothing to compare."""
    v = unit_values[np.isfinite(unit_values) & (unit_values > 0)]
    lo, hi = percentile_ci(reps)
    if v.size < 2 or lo is None or hi is None or not 0 < lo < hi:
        return 0.0
    half_t = t(int(v.size) - 1) * float(np.std(np.log(v), ddof=1)) / math.sqrt(v.size)
    return half_t / (math.log(hi / lo) / 2.0)


def few_units_widened(
    est: Estimate,
    reps: np.ndarray,
    units: int,
    unit_values: np.ndarray | None = None,
    t: Callable[[int], float] = t975,
) -> tuple[Estimate, np.ndarray]:
    """Replicates stretched around the point estimate on a log scale by ``widening(units)``,
    or more where the units' own values (``unit_values``: each block's percentile) spread
    wider than the bootstrap says.

    Why: a cluster bootstrap over a handful of blocks undercovers (its percentile interval is
    a normal-theory interval with the wrong variance and no t tails). Stretching each
    condition's replicates in log space stretches every ratio of them by the same factor, so
    ratios, CIs and crossovers downstream get the t-interval's width without knowing of it.
    The floor: where a step's blocks fall into two regimes and most of them into one, the
    pooled median sits inside that regime in almost every bootstrap draw, and the interval
    collapses (on the simulator, one interleaved session covered the truth at concurrency 1
    in 75 % of seeds, every miss a narrow interval); the t interval of the blocks' own medians
    keeps the spread between them. ``benchmarks/interleave.py`` measures the coverage.
    """
    if est.value is None or not est.value > 0:
        return est, reps
    c = widening(units, t)
    if unit_values is not None:
        c = max(c, _spread_stretch(reps, unit_values, t))
    return _stretched(est.value, reps, c)


def _stretched(
    value: float, reps: np.ndarray, c: float, c_hi: float | None = None
) -> tuple[Estimate, np.ndarray]:
    """Replicates stretched by ``c`` around ``value`` on a log scale (those above it by
    ``c_hi`` when given), and their interval."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log = np.log(reps / value)
        by = c if c_hi is None else np.where(log > 0, c_hi, c)
        # a large stretch of a far replicate must stay a number: clipped at e^+-30
        out = value * np.exp(np.clip(by * log, -30.0, 30.0))
    out[~np.isfinite(out)] = np.nan
    lo, hi = percentile_ci(out)
    return Estimate(value, lo, hi), out


def effect_over_starts(
    ratio: Estimate,
    reps: np.ndarray,
    cond_starts: dict[int, float],
    base_starts: dict[int, float],
) -> tuple[Estimate, np.ndarray] | None:
    """The interval about this config of a condition / baseline ratio over three or more
    server starts of each, paired by replicate number (shown beside the deciding interval
    about these starts, ``steps._latency``; it never decides): the bootstrap interval of the ratio (``reps``: over
    starts and the requests within each, two-level), each side stretched on a log scale
    around the estimate until it reaches the t interval of the starts' own log ratios
    (``cond_starts[k] / base_starts[k]``, each start's percentile; ``t9875`` quantile).
    None with fewer than ``MIN_STARTS_FOR_CONFIG`` pairs (no interval over starts).

    Why both parts: the t interval over the pairs carries the spread between starts with
    the tails a handful of them needs (a bootstrap over three starts divides by 3, not 2,
    and has normal tails); the bootstrap carries the sampling spread of each percentile,
    which starts replaying the same arrivals and prompts share, so their ratios can agree
    more closely than a new draw of traffic would. Pairing by replicate number: a sweep
    runs baseline-rK next to spec-rK on the same host, so what they share cancels; where
    nothing is shared, independent pairs give the same interval's validity."""
    keys = sorted(set(cond_starts) & set(base_starts))
    v = ratio.value
    if len(keys) < MIN_STARTS_FOR_CONFIG or v is None or not v > 0:
        return None
    d = np.log([cond_starts[k] / base_starts[k] for k in keys])
    half = t9875(len(keys) - 1) * float(np.std(d, ddof=1)) / math.sqrt(len(keys))
    lo_t, hi_t = math.exp(float(d.mean()) - half), math.exp(float(d.mean()) + half)
    lo, hi = percentile_ci(reps)
    if lo is None or hi is None or not 0 < lo < v < hi:
        return None
    c_lo = max(1.0, math.log(v / lo_t) / math.log(v / lo))
    c_hi = max(1.0, math.log(hi_t / v) / math.log(hi / v))
    return _stretched(v, reps, c_lo, c_hi)


def look_stretch(looks: int) -> float:
    """How much wider a 95 % interval gets when it must hold at each of ``looks`` looks at
    growing data (``sweep --until-decided``): each look's interval is a 1 - 0.05 / looks one
    (Bonferroni: the chance that any look's misses is at most the sum, 5 %), on the normal
    scale z(1 - 0.025 / looks) / z(0.975): 1.14 at 2 looks, 1.27 at 4."""
    from statistics import NormalDist

    if looks <= 1:
        return 1.0
    return NormalDist().inv_cdf(1.0 - 0.025 / looks) / Z975


def for_looks(est: Estimate, reps: np.ndarray, looks: int) -> tuple[Estimate, np.ndarray]:
    """An interval and its replicates widened around the estimate on a log scale by
    ``look_stretch(looks)``: every ratio of two such (and so every effect, boundary and
    decision downstream) is widened alike (``few_units_widened`` says why). Why Bonferroni
    rather than a sharper alpha-spending boundary: it needs nothing but each look's own
    interval, whatever the looks' data share, and a sweep stops after few looks."""
    c = look_stretch(looks)
    if c == 1.0 or est.value is None or not est.value > 0:
        return est, reps
    return _stretched(est.value, reps, c)


#: The fewest server starts with an interval about this config (over the starts,
#: ``over_starts``). At two, even the t-widened interval covers but is 70-260 points wide on
#: the simulator (``docs/report.md``), so none is given; the interval about these starts
#: (their units pooled, ``steps._latency``) decides from one start on.
MIN_STARTS_FOR_CONFIG = 3


def over_starts(
    est: Estimate, reps: np.ndarray, starts: int, start_values: np.ndarray | None = None
) -> tuple[Estimate, np.ndarray]:
    """A pooled percentile's interval about this config, over ``starts`` server starts
    (three or more run dirs): shown beside the interval about these starts, never deciding.

    Why: the two-level bootstrap over a handful of starts undercovers a new start's value,
    so it is stretched like a t interval over the starts and made at least as wide as the t
    interval of the starts' own percentiles (``start_values``). The t quantile is the
    97.5 % interval's (``t9875``) because real starts are not normal (on the calibrated
    simulator 30 % of them carry one slow window, which three starts often all lack): at
    the 95 % quantile the interval held the population's ratio in 0.91 of seed-steps
    (``docs/intervals.md``); at 97.5 %, 3 and 5 starts held it in 730 of 760
    (``benchmarks/results/coverage.md``). The interval stays called a 95 % CI, which is what
    it was chosen to hold. Below ``MIN_STARTS_FOR_CONFIG`` starts no interval is given (value
    kept, replicates NaN).
    """
    if starts < MIN_STARTS_FOR_CONFIG:
        return Estimate(est.value), np.full(reps.shape, np.nan)
    return few_units_widened(est, reps, starts, start_values, t9875)

"""The split of a step's per-second engine steps into a fast and a slow regime (Otsu's rule on
a log scale), the drift of the fast one, and each block's share of slow seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from specload.analysis.diagnostics.regime_model import (
    DRIFT_CHANGE,
    DRIFT_MIN_SECONDS,
    DRIFT_RHO,
    MIN_SECONDS,
    MIN_SEPARATION,
    MIN_SHARE,
    BlockRegime,
    Series,
)

__all__ = ["block_regimes", "fast_drift", "split_seconds"]


@dataclass(frozen=True, slots=True)
class _Split:
    threshold_ms: float
    slow: np.ndarray
    fast_ms: float | None
    slow_ms: float | None
    slow_share: float

    @property
    def bimodal(self) -> bool:
        n = self.slow.shape[0]
        if n < MIN_SECONDS or self.fast_ms is None or self.slow_ms is None:
            return False
        share_ok = MIN_SHARE <= self.slow_share <= 1.0 - MIN_SHARE
        return share_ok and self.slow_ms / self.fast_ms >= MIN_SEPARATION


def _cut(log_ms: np.ndarray) -> float:
    """Where the sorted per-second medians (log scale) split best into two groups: the cut
    that maximises the between-group variance (Otsu's rule). Unlike a fixed quantile it finds
    the fast level whatever share of seconds is slow (a 20th percentile falls into the slow
    regime once more than ~80 % of a short step's seconds are slow)."""
    x = np.sort(log_ms)
    n = x.shape[0]
    k = np.arange(1, n)  # the lower group holds x[:k]
    csum = np.cumsum(x)[:-1]
    m0 = csum / k
    m1 = (x.sum() - csum) / (n - k)
    between = k * (n - k) * (m1 - m0) ** 2
    i = int(np.argmax(between))
    return float((x[i] + x[i + 1]) / 2.0)


def split_seconds(ms: np.ndarray) -> _Split:
    """The step's seconds split into a fast and a slow group (see ``_cut``); a split that
    is not two regimes (``_Split.bimodal``) leaves every second fast."""
    if ms.shape[0] < 2 or float(ms.min()) == float(ms.max()):
        return _Split(float(ms.max()), np.zeros(ms.shape, bool), float(np.median(ms)), None, 0.0)
    threshold = math.exp(_cut(np.log(ms)))
    slow = ms > threshold
    split = _Split(
        threshold_ms=threshold,
        slow=slow,
        fast_ms=float(np.median(ms[~slow])),
        slow_ms=float(np.median(ms[slow])),
        slow_share=float(slow.mean()),
    )
    if split.bimodal:
        return split
    return _Split(threshold, np.zeros(ms.shape, bool), float(np.median(ms)), None, 0.0)


def _rank_corr(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (ties broken by order; the medians are floats)."""
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    if rx.std() == 0 or ry.std() == 0:
        return 0.0
    return float(np.corrcoef(rx, ry)[0, 1])


def _trend(t: np.ndarray, ms: np.ndarray) -> float | None:
    """Last third's median / first third's - 1 when the series trends, else None."""
    if t.shape[0] < DRIFT_MIN_SECONDS or abs(_rank_corr(t, ms)) < DRIFT_RHO:
        return None
    third = t.shape[0] // 3
    change = float(np.median(ms[-third:]) / np.median(ms[:third]) - 1.0)
    return change if abs(change) >= DRIFT_CHANGE else None


def fast_drift(series: Series, split: _Split) -> float | None:
    """The largest trend of any execution, on its fast seconds when the step is bimodal."""
    use = ~split.slow if split.bimodal else np.ones_like(split.slow)
    found = []
    for e in np.unique(series.execution):
        at = use & (series.execution == e)
        if (d := _trend(series.t[at], series.ms[at])) is not None:
            found.append(d)
    return max(found, key=abs) if found else None


def block_regimes(series: Series, split: _Split) -> list[BlockRegime]:
    """Each interleaved block's seconds, judged by the step's threshold."""
    out = []
    for b in np.unique(series.block[series.block >= 0]).tolist():
        at = series.block == b
        share, median = float(split.slow[at].mean()), float(np.median(series.ms[at]))
        out.append(
            BlockRegime(block=int(b), seconds=int(at.sum()), slow_share=share, median_ms=median)
        )
    return out

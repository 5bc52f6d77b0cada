"""A step's effect in an interleaved design: the paired per-unit log ratio, one t interval.

The unit is a **block pair**: block *k* of the condition and block *k* of the baseline at one
step of one server start (``sweep --interleave`` runs them next to each other on the same
GPU, with the same arrival draw and prompts). Each pair gives one number,
``d = log(percentile of the condition's block / percentile of the baseline's block)``, and
the step's effect is their geometric mean, ``exp(mean d)``, with the textbook interval

    exp(mean d ± t(1 - 0.025 / looks; G - 1) · sd(d) / sqrt(G))

over the G pairs (every start's pairs pooled: the claim is about the starts measured). That
is all: no bootstrap, no stretch, no floor. Why this one:

- **Pairing cancels what the two blocks share.** Neighbouring blocks share the GPU's state
  (clocks, a slow stretch, a drift over the session); the difference of their logs does not
  carry it, so the interval is as wide as the pairs disagree, not as wide as the session
  wanders.
- **Its assumptions can be stated and checked.** The pairs are independent given the step
  (blocks run in a seeded random order; ``benchmarks/session_drift.py`` measures drift across
  a session) and the mean of their log ratios is near normal (a few pairs of a skewed
  percentile ratio are, on a log scale; ``benchmarks/coverage.py`` measures how often the
  interval holds the truth on the simulator, whose truth is known).
- **Optional stopping is in the quantile.** ``sweep --until-decided`` looks up to ``looks``
  times; each look's interval is a 1 - 0.05 / looks one (Bonferroni, ``docs/intervals.md``).

A percentile needs values on its narrow side (``stats.MIN_TAIL_VALUES``): where a block holds
too few for it (a p95 of 24 requests, a p50 at concurrency 1 in short blocks), neighbouring
pairs of one start are merged, in run order, until each merged unit has enough on both sides;
starts are never merged (a start is the level above the pair).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from specload.analysis.statistics.stats import (
    MIN_TAIL_VALUES,
    Estimate,
    quantile_sorted,
    t_quantile,
)

__all__ = ["Paired", "PairKey", "min_unit_values", "paired_effect"]

#: A block pair's key: (server start number, block number k within the cell)
PairKey = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Paired:
    """A step's paired effect: its estimate and interval, replicates whose 95 % percentile
    interval is that interval (the crossover reads replicates, step by step), the standard
    error of the mean log ratio (what ``effect.to_decide_s`` projects), and the units."""

    estimate: Estimate
    replicates: np.ndarray
    se: float | None
    units: int


def min_unit_values(q: float) -> int:
    """The fewest values a unit needs for its own ``q`` percentile (``MIN_TAIL_VALUES`` on
    its narrower side): 6 for a p50, 60 for a p95, 300 for a p99."""
    return math.ceil(MIN_TAIL_VALUES / min(q, 1.0 - q) - 1e-9)


def _merged(
    cond: Mapping[PairKey, np.ndarray], base: Mapping[PairKey, np.ndarray], need: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The pairs both sides have, neighbours of one start merged in run order until each
    merged unit holds ``need`` values on both sides; a start's short remainder joins its
    last merged unit (or, with none, the start gives no unit)."""
    out: list[tuple[np.ndarray, np.ndarray]] = []
    keys = sorted(set(cond) & set(base))
    for start in sorted({k[0] for k in keys}):
        units: list[tuple[list[np.ndarray], list[np.ndarray]]] = []
        cur: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
        for key in (k for k in keys if k[0] == start):
            cur[0].append(cond[key])
            cur[1].append(base[key])
            if min(sum(a.size for a in cur[0]), sum(a.size for a in cur[1])) >= need:
                units.append(cur)
                cur = ([], [])
        if cur[0] and units:
            units[-1][0].extend(cur[0])
            units[-1][1].extend(cur[1])
        out.extend((np.sort(np.concatenate(c)), np.sort(np.concatenate(b))) for c, b in units)
    return out


def paired_effect(
    cond: Mapping[PairKey, np.ndarray],
    base: Mapping[PairKey, np.ndarray],
    q: float,
    *,
    looks: int = 1,
    b: int = 1000,
    rng: np.random.Generator,
) -> Paired | None:
    """The condition / baseline effect of the ``q`` percentile over block pairs (module doc).
    ``cond`` and ``base`` map each block pair's key to its block's values (the metric,
    seconds); ``b`` replicates. None where no pair holds a percentile on both sides; no
    interval below two (merged) pairs."""
    d = []
    for c, bb in _merged(cond, base, min_unit_values(q)):
        pc, pb = quantile_sorted(c, q), quantile_sorted(bb, q)
        if pc is not None and pb is not None and pc > 0 and pb > 0:
            d.append(math.log(pc / pb))
    if not d:
        return None
    logs = np.asarray(d)
    mean, g = float(logs.mean()), int(logs.size)
    if g < 2:
        return Paired(Estimate(math.exp(mean)), np.full(b, np.nan), None, g)
    se = float(logs.std(ddof=1)) / math.sqrt(g)
    half = t_quantile(1.0 - 0.025 / max(1, looks), g - 1) * se
    # replicates: t draws scaled so that their 2.5-97.5 % range is the interval
    scale = half / t_quantile(0.975, g - 1)
    reps = np.exp(np.clip(mean + scale * rng.standard_t(g - 1, size=b), -30.0, 30.0))
    est = Estimate(math.exp(mean), math.exp(mean - half), math.exp(mean + half))
    return Paired(est, reps, se, g)

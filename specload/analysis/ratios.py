"""Condition / baseline ratios per aligned step, and the "p50 better but p95 worse" flags.

A ratio below 1 means the condition is faster on that latency metric. Each ratio carries the
95 % CI of the replicate-wise ratio of the two bootstrap distributions (independent samples),
and a verdict (``better`` / ``same`` / ``worse`` by at least ``min_gain``, the crossover's rule)
plus the same verdict only where a stricter 99 % interval excludes 1 and the change is at
least 3 % (``significant``). When p50 is
significantly better and p95 significantly worse at the same step, some requests wait on the
drafting path: that is flagged, never averaged away.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specload.analysis.crossover import classify, classify_significant
from specload.analysis.stats import Estimate, ratio_estimate
from specload.analysis.steps import LATENCY_FIELDS, StepStats, metric_names

__all__ = ["Flag", "RatioRow", "p95_flags", "step_ratios"]


@dataclass(slots=True)
class RatioRow:
    """``condition`` / baseline on ``metric`` at ``target_qps`` (req/s)."""

    condition: str
    metric: str
    target_qps: float
    ratio: Estimate
    verdict: str
    #: ``verdict`` when the CI excludes 1, else "same" (for flags and the verdict's clauses).
    significant: str = "same"


@dataclass(slots=True)
class Flag:
    """p50 improves while p95 worsens on one latency family at one step."""

    condition: str
    family: str
    target_qps: float
    p50: Estimate
    p95: Estimate

    def message(self) -> str:
        name = self.family.upper() if self.family != "queue_delay" else "queue delay"
        p50 = (1 - self.p50.value) * 100 if self.p50.value is not None else 0.0
        p95 = (self.p95.value - 1) * 100 if self.p95.value is not None else 0.0
        return (
            f"{self.condition} at {self.target_qps:g} req/s: p50 {name} {p50:.0f} % lower but "
            f"p95 {name} {p95:.0f} % higher (some requests wait on the drafting path)"
        )


#: Two-sided level of the interval behind ``significant``: stricter than the reported 95 %
#: because a verdict scans every step of every metric (a Bonferroni-style guard for ~5 steps).
STRICT_LEVEL = 0.99


def _strict(est: Estimate, reps: np.ndarray) -> Estimate:
    finite = reps[~np.isnan(reps)]
    if est.value is None or finite.size == 0:
        return est
    tail = (1 - STRICT_LEVEL) / 2 * 100
    lo, hi = np.percentile(finite, [tail, 100 - tail])
    return Estimate(est.value, float(lo), float(hi))


def step_ratios(
    cond: list[StepStats], base: list[StepStats], min_gain: float
) -> tuple[dict[str, list[RatioRow]], dict[str, np.ndarray]]:
    """Rows per metric over the steps both conditions ran, and replicates shaped (B, steps)."""
    by_q = {s.target_qps: s for s in base}
    aligned = [(s, by_q[s.target_qps]) for s in cond if s.target_qps in by_q]
    rows: dict[str, list[RatioRow]] = {}
    reps: dict[str, np.ndarray] = {}
    for metric in metric_names():
        rows[metric], cols = [], []
        for s, b in aligned:
            est, r = ratio_estimate(
                s.latency[metric], s.replicates[metric], b.latency[metric], b.replicates[metric]
            )
            rows[metric].append(
                RatioRow(
                    s.condition,
                    metric,
                    s.target_qps,
                    est,
                    classify(est.value, min_gain),
                    classify_significant(_strict(est, r), min_gain),
                )
            )
            cols.append(r)
        reps[metric] = np.stack(cols, axis=1) if cols else np.empty((0, 0))
    return rows, reps


def p95_flags(rows: dict[str, list[RatioRow]], min_gain: float) -> list[Flag]:
    """Steps where p50 is better by ``min_gain`` and p95 worse by ``min_gain``."""
    flags = []
    for fam in LATENCY_FIELDS:
        if fam == "queue_delay":
            continue
        for r50, r95 in zip(rows.get(f"{fam}_p50", []), rows.get(f"{fam}_p95", [])):
            if r50.significant == "better" and r95.significant == "worse":
                flags.append(Flag(r50.condition, fam, r50.target_qps, r50.ratio, r95.ratio))
    return flags

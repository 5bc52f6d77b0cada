"""Condition / baseline ratios per aligned step, and the "p50 better but p95 worse" flags.

A ratio below 1 means the condition is faster on that latency metric. Each ratio carries the
95 % CI of the replicate-wise ratio of the two bootstrap distributions (over the units of
every server start pooled: a claim about these starts) and its ``effect`` by the one rule of
``analysis.statistics.effect``: that interval decides. From three starts on, the interval
about this config (over the starts, paired by replicate) stands beside it with its own
effect, ``config_ratio`` and ``config_effect``: shown, never deciding. When p50 helps and p95 hurts at the
same step, some requests wait on the drafting path: that is flagged, never averaged away.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specload.analysis.statistics.effect import HELPS, HURTS, INCOMPLETE, classify, to_decide_s
from specload.analysis.statistics.stats import Estimate, effect_over_starts, ratio_estimate
from specload.analysis.statistics.steps import LATENCY_FIELDS, StepStats, metric_names

__all__ = ["Flag", "RatioRow", "p95_flags", "step_ratios"]


@dataclass(slots=True)
class RatioRow:
    """``condition`` / baseline on ``metric`` at ``target_qps`` (req/s)."""

    condition: str
    metric: str
    target_qps: float
    ratio: Estimate
    #: ``helps`` / ``hurts`` / ``same`` / ``undecided`` / ``n/a`` / ``incomplete``
    #: (``analysis.statistics.effect``)
    effect: str
    #: the condition's achieved load at this step, named beside the nominal one
    #: (``report.wording.step_label``: "16 (17.1)")
    achieved_qps: float | None = None
    #: an undecided step: more measured seconds (both sides) that would likely decide it
    #: (``effect.to_decide_s``); None otherwise
    to_decide_s: float | None = None
    #: three or more starts on both sides: the interval about this config, over the starts
    #: paired by replicate (``stats.effect_over_starts``), and its effect by the one rule;
    #: shown beside ``ratio``, never deciding. None with fewer starts
    config_ratio: Estimate | None = None
    config_effect: str | None = None


@dataclass(slots=True)
class Flag:
    """p50 improves while p95 worsens on one latency family at one step."""

    condition: str
    family: str
    target_qps: float
    p50: Estimate
    p95: Estimate
    #: the condition's achieved load at the step ("16 (17.1)")
    achieved_qps: float | None = None


def step_ratios(
    cond: list[StepStats],
    base: list[StepStats],
    min_gain: float,
    incomplete: frozenset[float] = frozenset(),
) -> tuple[dict[str, list[RatioRow]], dict[str, np.ndarray]]:
    """Rows per metric over the steps both conditions ran, and replicates shaped (B, steps).

    Steps in ``incomplete`` (target QPS where either side's data is incomplete) keep their
    figures but their effect is ``incomplete``: no conclusion rests on them.
    """
    by_q = {s.target_qps: s for s in base}
    aligned = [(s, by_q[s.target_qps]) for s in cond if s.target_qps in by_q]
    rows: dict[str, list[RatioRow]] = {}
    reps: dict[str, np.ndarray] = {}
    for metric in metric_names():
        rows[metric], cols = [], []
        for s, b in aligned:
            est, r = _ratio(s, b, metric)
            effect = INCOMPLETE if s.target_qps in incomplete else classify(est, min_gain)
            more = (
                None
                if effect == INCOMPLETE
                else to_decide_s(est, min_gain, s.window_s + b.window_s)
            )
            config = _config_ratio(s, b, metric)
            config_effect = (
                None
                if config is None
                else INCOMPLETE
                if s.target_qps in incomplete
                else classify(config, min_gain)
            )
            rows[metric].append(
                RatioRow(
                    s.condition,
                    metric,
                    s.target_qps,
                    est,
                    effect,
                    s.achieved_qps,
                    more,
                    config,
                    config_effect,
                )  # fmt: skip
            )
            cols.append(r)
        reps[metric] = np.stack(cols, axis=1) if cols else np.empty((0, 0))
    return rows, reps


def _ratio(s: StepStats, b: StepStats, metric: str) -> tuple[Estimate, np.ndarray]:
    """The step's deciding ratio and its replicates: the replicate-wise ratio of the two
    sides' intervals over their starts' pooled units (about these starts)."""
    return ratio_estimate(
        s.latency[metric], s.replicates[metric], b.latency[metric], b.replicates[metric]
    )


def _config_ratio(s: StepStats, b: StepStats, metric: str) -> Estimate | None:
    """The ratio's interval about this config: over server starts paired by replicate number
    where both sides have three or more with a value (``stats.effect_over_starts``), else
    the ratio of the two sides' own intervals over their starts; None below three starts."""
    if metric not in s.config_latency or metric not in b.config_latency:
        return None
    est, r = ratio_estimate(
        s.latency[metric], s.start_replicates[metric], b.latency[metric],
        b.start_replicates[metric],
    )  # fmt: skip
    paired = effect_over_starts(
        est, r, s.start_values.get(metric, {}), b.start_values.get(metric, {})
    )
    if paired is not None:
        return paired[0]
    return ratio_estimate(
        s.config_latency[metric], s.config_replicates[metric], b.config_latency[metric],
        b.config_replicates[metric],
    )[0]  # fmt: skip


def p95_flags(rows: dict[str, list[RatioRow]]) -> list[Flag]:
    """Steps where p50 helps and p95 hurts (the one rule, both ways)."""
    flags = []
    for fam in LATENCY_FIELDS:
        if fam == "queue_delay":
            continue
        for r50, r95 in zip(rows.get(f"{fam}_p50", []), rows.get(f"{fam}_p95", []), strict=False):
            if r50.effect == HELPS and r95.effect == HURTS:
                flags.append(
                    Flag(r50.condition, fam, r50.target_qps, r50.ratio, r95.ratio, r50.achieved_qps)
                )
    return flags

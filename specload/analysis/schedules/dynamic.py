"""Did a batch-size schedule deliver the better of both worlds? The "best of both" check.

A dynamic condition (a speculative config with ``num_speculative_tokens_per_batch_size``)
promises static speculation's latency at low load and the baseline's at high load. Per step
we compare it with the better of the two fixed conditions at that step,
``best = min(baseline, static spec)`` on the comparison's metric, as the ratio
``dynamic / best``. The CI reuses the per-step bootstrap replicates compare already drew
(``StepStats.replicates``): the best is the replicate-wise minimum of the two, and the ratio
is taken replicate by replicate (``stats.ratio_estimate``); no new resampling.

Per step: ``costs`` when the ratio is at least ``1 + min_gain`` and its 95 % CI lies above 1;
``better`` when it is at least ``min_gain`` below 1 with the CI below 1; else ``delivered``
(within ``min_gain``, or not distinguishable). Steps where static spec is the better fixed
condition are "low load", those where the baseline is are "high load". The verdict:
"delivered", or "costs X % at low load" / "costs Y % at high load" (X, Y: the largest
significant excess over the best, per side): ``BestOfBoth`` holds the status and the costs,
``report/schedule_words.py`` says it.

The static condition is the one whose speculative config equals the dynamic one without the
schedule (else the first fixed-k speculative condition with the same prefix caching).
``analyse_schedules`` bundles this check with ``schedule``'s batch crossovers and proposals
into the ``ScheduleAnalysis`` that ``compare_runs`` attaches to a ``Comparison``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from specload.analysis.schedules.batch_schedule import (
    ScheduleOptions,
    batch_crossovers,
    propose_schedules,
)
from specload.analysis.schedules.schedule_results import (
    BETTER,
    COSTS,
    DELIVERED,
    NONE,
    BestOfBoth,
    BestOfBothRow,
    ComparisonView,
    ConditionView,
    ScheduleAnalysis,
)
from specload.analysis.schedules.vllm_schedule_rules import SCHEDULE_KEY, is_dynamic
from specload.analysis.statistics.effect import HELPS, HURTS, classify
from specload.analysis.statistics.stats import Estimate, percentile_ci, ratio_estimate

if TYPE_CHECKING:
    from specload.analysis.statistics.steps import StepStats

__all__ = [
    "analyse_schedules",
    "best_of_both",
    "static_partner",
]


def static_partner(dyn: ConditionView, conditions: Sequence[ConditionView]) -> str | None:
    """The fixed-k speculative condition a dynamic one should be judged against."""
    spec = {k: v for k, v in (dyn.speculative or {}).items() if k != SCHEDULE_KEY}
    fixed = [c for c in conditions if c.speculative and not is_dynamic(c.speculative)]
    for c in fixed:
        if c.speculative == spec and c.prefix_caching == dyn.prefix_caching:
            return c.label
    for c in fixed:
        if c.speculative == spec:
            return c.label
    same_prefix = [c for c in fixed if c.prefix_caching == dyn.prefix_caching]
    pool = same_prefix or fixed
    return pool[0].label if pool else None


def _best(metric: str, base: StepStats, spec: StepStats) -> tuple[Estimate, np.ndarray, str]:
    """min(baseline, spec) at one step: point, replicate-wise minimum and its CI."""
    b, s = base.latency[metric].value, spec.latency[metric].value
    if b is None or s is None:
        return Estimate(None), np.full(1, np.nan), ""
    reps = np.fmin(base.replicates[metric], spec.replicates[metric])
    lo, hi = percentile_ci(reps)
    which = spec.condition if s < b else base.condition
    return Estimate(min(b, s), lo, hi), reps, which


def _verdict(ratio: Estimate, min_gain: float) -> str:
    """The one rule (``effect.classify``) in this table's words: lower than the best of both
    is ``BETTER``, higher ``COSTS``, anything else delivered it."""
    return {HELPS: BETTER, HURTS: COSTS}.get(classify(ratio, min_gain), DELIVERED)


def _row(
    metric: str, dyn: StepStats, base: StepStats, spec: StepStats, min_gain: float
) -> BestOfBothRow:
    best, best_reps, which = _best(metric, base, spec)
    ratio, _ = ratio_estimate(dyn.latency[metric], dyn.replicates[metric], best, best_reps)
    return BestOfBothRow(
        target_qps=dyn.target_qps,
        dynamic=dyn.latency[metric],
        best=best,
        best_of=which,
        ratio=ratio,
        verdict=_verdict(ratio, min_gain),
        drafts_dynamic=dyn.server.drafts if dyn.server else None,
        drafts_static=spec.server.drafts if spec.server else None,
        running_dynamic=dyn.server.running_max if dyn.server else None,
    )


def _check(c: ComparisonView, dyn: ConditionView) -> BestOfBoth:
    static = static_partner(dyn, c.conditions)
    schedule = (dyn.speculative or {}).get(SCHEDULE_KEY) or []
    res = BestOfBoth(dyn.label, static, c.baseline, c.metric, schedule)
    if static is None:
        res.status = NONE
        return res
    base = {s.target_qps: s for s in c.steps[c.baseline]}
    spec = {s.target_qps: s for s in c.steps[static]}
    for s in c.steps[dyn.label]:
        if s.target_qps in base and s.target_qps in spec:
            res.rows.append(_row(c.metric, s, base[s.target_qps], spec[s.target_qps], c.min_gain))
    costs = [r for r in res.rows if r.verdict == COSTS and r.ratio.value is not None]
    low = [r.ratio.value - 1 for r in costs if r.best_of == static and r.ratio.value]
    high = [r.ratio.value - 1 for r in costs if r.best_of == c.baseline and r.ratio.value]
    res.cost_low = max(low) if low else None
    res.cost_high = max(high) if high else None
    if not res.rows:
        res.status = NONE
        return res
    res.status = COSTS if costs else DELIVERED
    return res


def best_of_both(comparison: ComparisonView) -> list[BestOfBoth]:
    """The check for every dynamic condition of the comparison (empty when there is none)."""
    return [
        _check(comparison, info)
        for info in comparison.conditions
        if info.label != comparison.baseline and is_dynamic(info.speculative)
    ]


def analyse_schedules(
    comparison: ComparisonView, options: ScheduleOptions | None = None
) -> ScheduleAnalysis:
    """Everything dynamic schedules add to a comparison (see ``schedule`` and this module)."""
    return ScheduleAnalysis(
        batch_crossovers=batch_crossovers(comparison),
        proposals=propose_schedules(comparison, options),
        best_of_both=best_of_both(comparison),
    )

"""Which feature changed what: prefix caching (prefill, TTFT) vs speculative decoding (decode, TPOT).

Turning both features on at once hides which one helped. With four conditions — baseline,
prefix caching only, speculative decoding only, both — each feature's effect per step is its
ratio to the baseline on p50 TTFT and p50 TPOT, and the combination *adds up* when the
"both" ratio is the product of the two single-feature ratios. The interaction
``both / (prefix * spec)`` is 1 when the effects are independent; it adds up when its 95 %
bootstrap CI contains 1 or it lies within ``min_gain`` of 1. Roles come from what each run's
server had on (``analysis.inputs.features``: declared, or read from its /metrics), never from its
label.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from specload.analysis.statistics.effect import HELPS, HURTS, classify
from specload.analysis.statistics.stats import Estimate, percentile_ci

__all__ = ["FAMILIES", "ROLES", "Attribution", "AttributionStep", "attribute"]

#: Latency family → the metric its ratios are on: TTFT is prefill, TPOT decode.
FAMILIES = {"ttft": "ttft_p50", "tpot": "tpot_p50"}
#: The three roles compared with the baseline, in the order they are shown.
ROLES = ("prefix", "spec", "both")


@dataclass(slots=True)
class AttributionStep:
    """Ratios to the baseline at one target QPS; ``interaction`` = both / (prefix * spec)."""

    target_qps: float
    ratios: dict[str, dict[str, Estimate]]  # family → role → ratio
    interaction: dict[str, Estimate]  # family → both / (prefix * spec)
    adds_up: dict[str, bool]


@dataclass(slots=True)
class Attribution:
    """The four-way attribution; ``labels`` maps role → condition label.
    ``report.attribution_words`` words it."""

    labels: dict[str, str]
    steps: list[AttributionStep] = field(default_factory=list)

    def adds_up(self, family: str) -> bool:
        """The combination adds up for ``family`` ("ttft", "tpot") at every step: the
        features do not interact there."""
        return all(s.adds_up[family] for s in self.steps)


RatioLookup = dict[str, dict[str, dict[float, tuple[Estimate, np.ndarray]]]]


def _interaction(parts: dict[str, tuple[Estimate, np.ndarray]]) -> tuple[Estimate, np.ndarray]:
    (b, rb), (p, rp), (s, rs) = parts["both"], parts["prefix"], parts["spec"]
    if b.value is None or not p.value or not s.value:
        return Estimate(None), np.array([])
    with np.errstate(divide="ignore", invalid="ignore"):
        reps = rb / (rp * rs)
    reps[~np.isfinite(reps)] = np.nan
    lo, hi = percentile_ci(reps)
    return Estimate(b.value / (p.value * s.value), lo, hi), reps


def attribute(labels: dict[str, str], ratios: RatioLookup, min_gain: float) -> Attribution | None:
    """Attribution when ``labels`` has all four roles; ``ratios[label][metric][qps]``."""
    if not all(r in labels for r in ("baseline", *ROLES)):
        return None
    common: set[float] | None = None
    for role in ROLES:
        qs = set(ratios.get(labels[role], {}).get("ttft_p50", {}))
        common = qs if common is None else common & qs
    steps = []
    for qps in sorted(common or ()):
        rat: dict[str, dict[str, Estimate]] = {}
        inter: dict[str, Estimate] = {}
        adds: dict[str, bool] = {}
        for fam, metric in FAMILIES.items():
            parts = {role: ratios[labels[role]][metric][qps] for role in ROLES}
            rat[fam] = {role: parts[role][0] for role in parts}
            inter[fam], _ = _interaction(parts)
            e = inter[fam]
            # the features add up where the one rule shows no interaction (effect.classify:
            # the interaction is the same or undecided, neither helps nor hurts)
            adds[fam] = classify(e, min_gain) not in (HELPS, HURTS)
        steps.append(AttributionStep(qps, rat, inter, adds))
    if not steps:
        return None
    return Attribution(labels=labels, steps=steps)

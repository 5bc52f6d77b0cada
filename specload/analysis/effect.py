"""The one rule: does a condition help, hurt or not change a latency metric at one load step?

Every part of the answer derives from this classification per (condition, metric, step): the
verdict sentence, the crossover and its status, the recommendations, the CI gates, the
p50/p95 flags, the per-step table's colouring and report.json. One definition, so the parts
cannot disagree (they did: a verdict clause used a stricter undisplayed interval than the
table, and the advice used a third rule).

A step **helps** when the condition's value is at least ``min_gain`` lower than the
baseline's (ratio <= 1 - min_gain) *and* the 95 % CI of the ratio lies entirely below 1; it
**hurts** when it is at least ``min_gain`` higher and the CI lies entirely above 1; otherwise
there is **no significant change**. The CI is the one the report shows next to the figure
(a bootstrap interval; with replicates it includes the variance between server starts). A
step whose data is incomplete (error budget passed, a worker lost) is **incomplete** and is
left out of every conclusion, which says so.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np

from specload.analysis.stats import Estimate

T = TypeVar("T", float, np.ndarray)

__all__ = [
    "EFFECTS",
    "HELPS",
    "HURTS",
    "INCOMPLETE",
    "NA",
    "NO_CHANGE",
    "classify",
    "effect_text",
    "reaches_gain",
    "rule_text",
]

HELPS, HURTS, NO_CHANGE = "helps", "hurts", "no_change"
#: No data for the ratio (a side without successful requests).
NA = "n/a"
#: Left out: the step's data is incomplete (errors over budget, a lost worker).
INCOMPLETE = "incomplete"
EFFECTS = (HELPS, HURTS, NO_CHANGE, NA, INCOMPLETE)

#: Slack for floating point at the threshold: a ratio of exactly 0.95 is "5 % lower".
_EPS = 1e-9


def reaches_gain(ratio: T, min_gain: float) -> T:
    """The rule's size half: a condition / baseline ratio at least ``min_gain`` below 1 (a
    float, or elementwise over an array of bootstrap replicates: NaN never reaches it)."""
    return ratio <= 1.0 - min_gain + _EPS


def classify(ratio: Estimate, min_gain: float) -> str:
    """``helps`` / ``hurts`` / ``no_change`` for a condition / baseline latency ratio.

    A missing CI (too little data to bootstrap) never makes a change significant.
    """
    v = ratio.value
    if v is None:
        return NA
    if reaches_gain(v, min_gain) and ratio.hi is not None and ratio.hi < 1.0:
        return HELPS
    if v >= 1.0 + min_gain - _EPS and ratio.lo is not None and ratio.lo > 1.0:
        return HURTS
    return NO_CHANGE


def effect_text(effect: str) -> str:
    """How a reader sees an effect: ``helps``, ``hurts``, ``no significant change``."""
    return {NO_CHANGE: "no significant change", INCOMPLETE: "left out (incomplete)"}.get(
        effect, effect
    )


def rule_text(metric_label: str, min_gain: float) -> str:
    """The rule in one sentence, shown in every report next to the figures it classifies."""
    if min_gain > 0:
        by = f"at least {min_gain * 100:g} % "
        return (
            f"A step helps when {metric_label} is {by}lower than the baseline's and the 95 % CI "
            f"of the change lies entirely below 0; it hurts when it is {by}higher and the CI "
            "lies entirely above 0; otherwise there is no significant change."
        )
    return (
        f"A step helps when {metric_label} is lower than the baseline's with the 95 % CI of "
        "the change entirely below 0; it hurts when the CI lies entirely above 0; otherwise "
        "there is no significant change."
    )

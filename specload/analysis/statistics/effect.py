"""The one rule: does a condition help, hurt, change nothing, or is it not yet known, for a
latency metric at one load step?

Every part of the answer derives from this classification per (condition, metric, step): the
verdict sentence, the crossover and its status, the recommendations, the CI gates, the
p50/p95 flags, the per-step table's colouring, the web UI and report.json. One definition, so
the parts cannot disagree (they did: a verdict clause used a stricter undisplayed interval
than the table, and the advice used a third rule).

Four answers, from the ratio condition / baseline and its 95 % CI (the one the report shows
next to the figure):

- **helps**: the ratio is at least ``min_gain`` below 1 and the whole CI lies below 1;
- **hurts**: at least ``min_gain`` above 1 and the whole CI above 1;
- **same**: the whole CI lies within ``1 ± min_gain``: no practical difference, shown (an
  equivalence test, as TOST: both one-sided tests at the CI's level reject a change of
  ``min_gain`` or more);
- **undecided**: none of these; the data does not tell them apart yet. ``to_decide_s`` says
  how much more measured time would likely decide it at the variance seen.

"Same" and "undecided" are apart so that a user can tell "no difference" from "not
measured enough" (one "no significant change" would say both). A step whose data is
incomplete (error budget passed, a worker lost) is **incomplete** and is left out of every
conclusion, which says so.
"""

from __future__ import annotations

import math
from typing import TypeVar

import numpy as np

from specload.analysis.statistics.stats import Z975, Estimate

T = TypeVar("T", float, np.ndarray)

__all__ = [
    "EFFECTS",
    "HELPS",
    "HURTS",
    "DECIDED",
    "INCOMPLETE",
    "NA",
    "SAME",
    "UNDECIDED",
    "classify",
    "reaches_gain",
    "to_decide_s",
]

HELPS, HURTS, SAME, UNDECIDED = "helps", "hurts", "same", "undecided"
#: The answers a user can act on.
DECIDED = (HELPS, HURTS, SAME)
#: No data for the ratio (a side without successful requests).
NA = "n/a"
#: Left out: the step's data is incomplete (errors over budget, a lost worker).
INCOMPLETE = "incomplete"
EFFECTS = (HELPS, HURTS, SAME, UNDECIDED, NA, INCOMPLETE)

#: Slack for floating point at the threshold: a ratio of exactly 0.95 is "5 % lower".
_EPS = 1e-9


def reaches_gain(ratio: T, min_gain: float) -> T:
    """The rule's size half: a condition / baseline ratio at least ``min_gain`` below 1 (a
    float, or elementwise over an array of bootstrap replicates: NaN never reaches it)."""
    return ratio <= 1.0 - min_gain + _EPS


def classify(ratio: Estimate, min_gain: float) -> str:
    """``helps`` / ``hurts`` / ``same`` / ``undecided`` for a condition / baseline latency
    ratio (module doc). A missing CI (too little data for one) decides nothing."""
    v, lo, hi = ratio.value, ratio.lo, ratio.hi
    if v is None:
        return NA
    if lo is None or hi is None:
        return UNDECIDED
    if reaches_gain(v, min_gain) and hi < 1.0:
        return HELPS
    if v >= 1.0 + min_gain - _EPS and lo > 1.0:
        return HURTS
    if lo >= 1.0 - min_gain - _EPS and hi <= 1.0 + min_gain + _EPS:
        return SAME
    return UNDECIDED


#: The normal quantile of 80 % power (``to_decide_s``); the CI's own is ``stats.Z975``.
_Z80 = 0.841621
#: The least extra time ``to_decide_s`` names, as a share of what was measured: an interval
#: just short of deciding is not decided by a few seconds more in practice.
MIN_MORE = 0.25


def to_decide_s(ratio: Estimate, min_gain: float, measured_s: float) -> float | None:
    """More measured seconds (both sides together, at this step) that would likely decide an
    undecided step: with probability about 0.8 if the true ratio were the one estimated and
    the spread stayed as measured.

    Why this formula: on a log scale the CI's half-width is about ``z * se`` and ``se``
    shrinks as 1/sqrt(time). The estimate must end ``z + z_0.8`` standard errors from the
    nearest line it has to clear (0 for helps or hurts, the margin for same): the textbook
    sample size of a test with 80 % power. None where the step is decided, has no CI, or its
    estimate sits exactly on a line (no amount of time decides it at that estimate)."""
    v, lo, hi = ratio.value, ratio.lo, ratio.hi
    if classify(ratio, min_gain) != UNDECIDED or v is None or lo is None or hi is None:
        return None
    if not (v > 0 and 0 < lo < hi) or measured_s <= 0 or min_gain >= 1:
        return None
    d, se = math.log(v), math.log(hi / lo) / (2 * Z975)
    down, up = math.log(1.0 - min_gain), math.log1p(min_gain)
    dist = -d if d <= down else d if d >= up else min(up - d, d - down)
    if dist <= _EPS:
        return None
    factor = ((Z975 + _Z80) * se / dist) ** 2
    return max(factor - 1.0, MIN_MORE) * measured_s

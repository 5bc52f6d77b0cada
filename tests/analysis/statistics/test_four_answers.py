"""Four answers per step (``analysis.statistics.effect``): helps, hurts, the same within the margin, or
undecided with the time that would likely decide it; a status rests on decided steps only;
and the effect over server starts pairs each start with its baseline partner."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specload.analysis.decisions.crossover import find_crossover
from specload.analysis.statistics.effect import HELPS, HURTS, SAME, UNDECIDED, classify, to_decide_s
from specload.analysis.statistics.stats import Estimate, effect_over_starts, t9875


@pytest.mark.parametrize(
    ("ratio", "answer"),
    [
        (Estimate(0.80, 0.75, 0.85), HELPS),
        (Estimate(1.20, 1.10, 1.30), HURTS),
        (Estimate(1.01, 0.97, 1.04), SAME),  # the whole CI within 5 %
        (Estimate(0.97, 0.93, 0.99), UNDECIDED),  # below 1, but not 5 % and not within it
        (Estimate(0.90, 0.80, 1.01), UNDECIDED),
        (Estimate(0.90), UNDECIDED),  # no CI decides nothing
    ],
)
def test_each_ratio_gets_one_of_four_answers(ratio: Estimate, answer: str) -> None:
    assert classify(ratio, 0.05) == answer


def test_with_no_minimum_gain_nothing_is_shown_the_same() -> None:
    assert classify(Estimate(1.0, 0.999, 1.001), 0.0) == UNDECIDED
    assert classify(Estimate(0.99, 0.985, 0.995), 0.0) == HELPS


def test_the_time_to_decide_is_the_80_percent_power_sample_size_at_the_spread_seen() -> None:
    r = Estimate(0.90, 0.80, 1.01)
    d, se = math.log(0.90), math.log(1.01 / 0.80) / (2 * 1.959964)
    factor = ((1.959964 + 0.841621) * se / abs(d)) ** 2  # the line to clear is no change
    assert to_decide_s(r, 0.05, 60.0) == pytest.approx((factor - 1) * 60.0)
    # near the margin: the same needs a CI inside +-5 %, farther to go than helps
    near = Estimate(1.02, 0.95, 1.09)
    assert to_decide_s(near, 0.05, 60.0) > to_decide_s(r, 0.05, 60.0)
    assert to_decide_s(Estimate(0.80, 0.75, 0.85), 0.05, 60.0) is None  # decided
    assert to_decide_s(Estimate(1.0, 0.8, 1.2), 0.0, 60.0) is None  # on the line: no time


def _x(effects: list[str]) -> object:
    ratios = {
        HELPS: Estimate(0.8, 0.75, 0.85),
        SAME: Estimate(1.0, 0.97, 1.03),
        HURTS: Estimate(1.2, 1.1, 1.3),
        UNDECIDED: Estimate(1.0, 0.8, 1.2),
    }
    est = [ratios[e] for e in effects]
    reps = np.tile([e.value for e in est], (20, 1))
    q = [2.0 * 2**i for i in range(len(effects))]
    return find_crossover("tpot_p50", "spec", "base", q, est, effects, reps, 0.05)


def test_a_boundary_needs_a_decided_step_on_each_side() -> None:
    assert _x([HELPS, UNDECIDED, HURTS]).settled  # the boundary lies among the undecided
    assert _x([HELPS, HELPS, SAME]).decided
    undecided_above = _x([HELPS, UNDECIDED, UNDECIDED])
    assert undecided_above.status == "crosses" and not undecided_above.decided
    assert not _x([UNDECIDED, SAME, HURTS]).settled  # "never helps" needs every step
    assert _x([SAME, SAME, HURTS]).decided


def test_the_effect_over_starts_holds_the_t_interval_of_the_paired_start_ratios() -> None:
    rng = np.random.default_rng(1)
    reps = np.exp(rng.normal(np.log(0.8), 0.01, 2000))  # a narrow bootstrap
    est = Estimate(0.8, *np.percentile(reps, [2.5, 97.5]))
    cond, base = {1: 0.70, 2: 0.80, 3: 0.90}, {1: 1.0, 2: 1.0, 3: 1.0}
    paired = effect_over_starts(est, reps, cond, base)
    assert paired is not None
    wide, out = paired
    d = np.log([0.7, 0.8, 0.9])
    half = t9875(2) * np.std(d, ddof=1) / math.sqrt(3)
    assert (
        wide.lo <= math.exp(d.mean() - half) + 1e-3 and wide.hi >= math.exp(d.mean() + half) - 1e-3
    )
    # starts that agree leave the bootstrap's interval as it was
    same = effect_over_starts(est, reps, {1: 0.8, 2: 0.8, 3: 0.8}, base)
    assert same is not None and same[0] == pytest.approx(est)
    # two pairs are too few for an interval over starts
    assert effect_over_starts(est, reps, {1: 0.8, 2: 0.8}, base) is None

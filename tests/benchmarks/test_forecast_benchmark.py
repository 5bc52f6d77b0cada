"""The forecast benchmark's reading (the figures come from ``python benchmarks/forecast.py``,
committed): each undecided step's forecast is read at the k's of the grid around it, and the
two rules differ only inside the margin. No figure is asserted."""

from __future__ import annotations

import math
from typing import Any

import pytest

from specload.analysis.statistics.effect import HELPS, SAME, UNDECIDED, to_decide_s
from specload.analysis.statistics.stats import Estimate
from tests.benchmarks import load_benchmark


def _load() -> Any:
    return load_benchmark("forecast.py")


def _row(k: int, effect: str, est: Estimate) -> dict[str, Any]:
    return {"k": k, "effects": [effect], "ratio": [est.value], "ci": [[est.lo, est.hi]]}


def test_a_forecast_is_read_at_the_grid_k_short_of_it_and_the_first_past_it() -> None:
    fc = _load()
    est = Estimate(0.90, 0.80, 1.01)  # outside the margin: helps is the line to clear
    factor = to_decide_s(est, 0.05, 1.0)
    assert factor is not None and 1.0 < factor < 2.0  # reaches k = 1 + factor: between 2 and 3
    rows = [
        _row(1, UNDECIDED, est),
        _row(2, UNDECIDED, Estimate(0.90, 0.82, 0.995)),
        _row(3, HELPS, Estimate(0.90, 0.84, 0.96)),
    ]
    (case,) = [c for c in fc.cases([{"seed": 1, "fixed": rows}]) if c["k"] == 1]
    assert not case["inside"]
    assert case["today"] == case["two_sided"]  # outside the margin the rules agree
    assert case["today"]["short"] is False and case["today"]["past"] is True


def test_inside_the_margin_the_candidate_asks_for_both_margins_at_once() -> None:
    """At the margins' middle the candidate's standard error is the margin over z_0.975 +
    z_0.9 (the estimate within z_0.9 of the middle four times in five), the product's over
    z_0.975 + z_0.8 (one margin)."""
    fc = _load()
    down, up = math.log(0.95), math.log(1.05)
    middle, margin = math.exp((down + up) / 2), (up - down) / 2
    est = Estimate(middle, middle * 0.94, middle * 1.06)
    se = math.log(1.06 / 0.94) / (2 * 1.959964)
    both = ((1.959964 + 1.281552) * se / margin) ** 2 - 1
    assert fc.two_sided(est, 0.05) == pytest.approx(both, rel=1e-3)
    today = to_decide_s(est, 0.05, 1.0)
    assert today is not None and today < fc.two_sided(est, 0.05)
    rows = [_row(1, UNDECIDED, est), _row(16, SAME, Estimate(1.0, 0.99, 1.01))]
    (case, *_) = fc.cases([{"seed": 1, "fixed": rows}])
    assert case["inside"] and case["two_sided"]["sessions"] > case["today"]["sessions"]
    # a forecast past the last k has no reading, so it is not scored
    far = [_row(1, UNDECIDED, Estimate(1.0, 0.5, 2.0)), _row(2, UNDECIDED, est)]
    (case,) = [c for c in fc.cases([{"seed": 1, "fixed": far}]) if c["k"] == 1]
    assert case["today"]["past"] is None and case["today"]["short"] is None
    summary = fc.summarise(fc.cases([{"seed": 1, "fixed": far}]))
    assert summary["inside"]["scored"] == 0 and summary["inside"]["today"]["past_the_grid"] == 2

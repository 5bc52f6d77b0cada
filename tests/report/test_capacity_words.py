"""The capacity's words (``report/capacity_words.py``), golden: ``Capacity`` and
``CapacityChange`` are facts; the capacity tables and the verdict print these phrases."""

from __future__ import annotations

import math

from specload.analysis.decisions.capacity import (
    CROSSES,
    VIOLATES,
    WITHIN,
    Capacity,
    CapacityChange,
)
from specload.analysis.decisions.crossover import Boundary
from specload.report.capacity_words import change_text, qps_text, versus_text

TESTED = (2.0, 32.0)


def _cap(label: str, status: str, qps: float) -> Capacity:
    return Capacity(label, status, Boundary(qps), "tpot_p95", TESTED)


def test_a_capacity_reads_as_a_load_or_beyond_the_tested_range() -> None:
    assert qps_text(_cap("spec", CROSSES, 13.46)) == "13.5"
    assert qps_text(_cap("spec", WITHIN, math.inf)) == ">32"
    assert qps_text(_cap("spec", VIOLATES, -math.inf)) == "<2"


def test_a_change_with_its_ci_open_or_not() -> None:
    assert change_text(CapacityChange(-0.21, (-0.27, -0.14))) == "-21 % (-27…-14)"
    assert change_text(CapacityChange(-0.21, (-0.48, -0.14), ("below", ""))) == "-21 % (<-48…-14)"
    assert change_text(CapacityChange(0.125, (0.05, 0.2)), 1) == "+12.5 % (+5.0…+20.0)"
    assert change_text(CapacityChange(None)) == "—"


def test_versus_the_baseline_says_what_the_steps_show_where_there_is_no_ratio() -> None:
    base, spec = _cap("baseline", CROSSES, 10.0), _cap("spec", CROSSES, 13.0)
    assert versus_text(base, base, None) == "—"
    assert versus_text(spec, base, CapacityChange(0.3, (0.2, 0.4))) == "+30 % (+20…+40)"
    held = _cap("baseline", WITHIN, math.inf)
    assert versus_text(spec, held, CapacityChange(None)) == "baseline >32 req/s: not reached"
    missed = _cap("spec", VIOLATES, -math.inf)
    assert versus_text(missed, base, None) == "spec <2 req/s: missed at the lowest step"

"""The crossover's words (``report/crossover_words.py``), golden: the analysis hands over a
``Crossover`` of facts, and these are the phrases every output prints from it."""

from __future__ import annotations

import math

from specload.analysis.decisions.crossover import MIXED, Boundary, Crossover, StartEffects
from specload.analysis.statistics.effect import HELPS, HURTS, INCOMPLETE, SAME
from specload.analysis.statistics.ratios import RatioRow
from specload.analysis.statistics.stats import Estimate
from specload.report.crossover_words import (
    boundary_ci_text,
    boundary_qps_text,
    ci_text,
    crossover_dict,
    fmt_qps,
    mixed_note,
    split_text,
    steps_text,
    where_effect,
)

TESTED = (2.0, 32.0)


def _x(status: str, effects: list[str], **kw: object) -> Crossover:
    steps = [2.0, 4.0, 8.0, 16.0, 32.0][: len(effects)]
    return Crossover("tpot_p50", "spec", "baseline", status, TESTED, steps, effects, **kw)  # type: ignore[arg-type]


def test_a_boundary_reads_as_a_load_or_beyond_the_tested_range() -> None:
    assert fmt_qps(17.6123) == "17.6" and fmt_qps(0.8512) == "0.85"
    assert boundary_qps_text(Boundary(17.43), TESTED) == "17.4"
    assert boundary_qps_text(Boundary(math.inf), TESTED) == ">32"
    assert boundary_qps_text(Boundary(-math.inf), TESTED) == "<2"
    assert boundary_ci_text(Boundary(10.0, (8.0, 16.0)), TESTED) == "8–16"
    assert boundary_ci_text(Boundary(10.0, (None, 4.0), ("below", "")), TESTED) == "<2–4"


def test_the_crossovers_ci_is_its_stops_else_its_starts() -> None:
    stop, start = Boundary(10.0, (8.0, 16.0)), Boundary(3.0, (2.0, 4.0))
    assert ci_text(_x("crosses", [HELPS, HELPS, HELPS, SAME], stop=stop)) == "8–16"
    assert ci_text(_x("starts_helping", [SAME, HELPS, HELPS], start=start)) == "2–4"
    assert ci_text(_x("never_helps", [SAME, SAME])) == ""


def test_scattered_help_is_noted_with_no_boundary() -> None:
    x = _x(MIXED, [HELPS, SAME, HELPS, HURTS, HELPS])
    assert mixed_note(x) == "helps at 2, 8, 32 req/s but not at 4, 16 req/s: no single boundary"
    assert mixed_note(_x("crosses", [HELPS, SAME])) == ""
    assert crossover_dict(x)["note"] == mixed_note(x)
    assert list(crossover_dict(x))[-1] == "note"  # report.json's order: the note last


def test_steps_and_the_starts_disagreement_name_achieved_loads() -> None:
    starts = [
        StartEffects("r1", "mixed", {2.0: HELPS, 4.0: HURTS, 8.0: HELPS}),
        StartEffects("r2", "mixed", {2.0: HELPS, 4.0: HELPS, 8.0: HURTS}),
        StartEffects("r3", "crosses", {2.0: HELPS, 4.0: INCOMPLETE, 8.0: HURTS}),
    ]
    x = _x(MIXED, [HELPS, SAME, SAME], starts=starts, achieved={4.0: 4.21})
    assert steps_text(x, [2.0, 4.0]) == "2, 4 (4.2) req/s"
    assert split_text(x) == (
        "at 4 (4.2) req/s (hurts in r1; helps in r2; left out (incomplete) in r3) and 8 req/s "
        "(helps in r1; hurts in r2, r3)"
    )


def test_where_an_effect_holds() -> None:
    def rows(*effects: str) -> list[RatioRow]:
        return [
            RatioRow("s", "tpot_p50", q, Estimate(1.0, 0.9, 1.1), e)
            for q, e in zip((2.0, 4.0, 8.0, 16.0), effects, strict=False)
        ]

    assert where_effect(rows(HURTS, HURTS, INCOMPLETE), HURTS) == "at every tested load"
    assert where_effect(rows(SAME, HURTS, HURTS), HURTS) == "from 4 req/s"
    assert where_effect(rows(HURTS, SAME, HURTS, SAME), HURTS) == "at 2, 8 req/s"
    assert where_effect(rows(SAME, SAME), HURTS) is None

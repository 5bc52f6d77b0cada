"""Dynamic speculation: batch-size schedules from compare results, vLLM's schedule rules, best of both."""

from __future__ import annotations

import html
import io
import json
from pathlib import Path

import numpy as np
import pytest

from analysis.synth_rundir import SPEC, Cond, linear_gain, true_crossover, write_run
from specload.analysis.compare import compare_runs
from specload.analysis.decisions.crossover import find_crossover
from specload.analysis.schedules.batch_schedule import (
    LoadPoint,
    NotPlaceable,
    ScheduleOptions,
    derive_schedule,
    running_at,
)
from specload.analysis.schedules.schedule_results import (
    HelpsApart,
    HelpsAtTop,
    KeptBelow,
    NeverHelped,
    NoPositionKept,
    PositionsDropped,
    ScatteredHelp,
    ThinMargin,
)
from specload.analysis.schedules.vllm_schedule_rules import (
    SCHEDULE_KEY,
    EndsBelowMax,
    FirstNotAtOne,
    Gap,
    KAboveMax,
    NegativeK,
    NoMaxK,
    NotAList,
    NotATriple,
    RangeNotPositive,
    RangesOverlap,
    StartAfterEnd,
    Unsorted,
    check_schedule,
    k_for_batch,
)
from specload.analysis.statistics.effect import classify
from specload.analysis.statistics.stats import Estimate
from specload.report.html import render_html
from specload.report.jsonout import report_dict
from specload.report.markdown import render_markdown
from specload.report.model import build_report
from specload.report.schedule_words import best_of_both_verdict
from specload.report.terminal import render_terminal

RATES = (0.8, 0.55, 0.3, 0.15)
QPS = (1.0, 2.0, 4.0, 8.0, 16.0)


def _points(gains, running, per_position=RATES, drafts=1000.0):
    return [
        LoadPoint(q, g, r, tuple(per_position), drafts if per_position else None)
        for q, g, r in zip(QPS, gains, running, strict=False)
    ]


def _crossover(gains, min_gain=0.05):
    ratios = [Estimate(1.0 - g, 1.0 - g - 0.01, 1.0 - g + 0.01) for g in gains]
    reps = np.tile(np.asarray([1.0 - g for g in gains]), (50, 1))
    effects = [classify(r, min_gain) for r in ratios]
    return find_crossover(
        "tpot_p50", "spec", "baseline", list(QPS), ratios, effects, reps, min_gain
    )


# -- vLLM's rules ---------------------------------------------------------------------------


def _cfg(schedule, k=4):
    return {"method": "draft_model", "num_speculative_tokens": k, SCHEDULE_KEY: schedule}


@pytest.mark.parametrize(
    "schedule, problem",
    [
        ([], NotAList()),
        ("[[1, 4, 2]]", NotAList()),
        ([[1, 4]], NotATriple(0)),
        ([[1, 4, 2], [1, 4, 2.5]], NotATriple(1)),
        ([[0, 4, 2]], RangeNotPositive(0)),
        ([[1, 4, 2], [8, 6, 1]], StartAfterEnd(1, 8, 6)),
        ([[1, 4, -1]], NegativeK(0, -1)),
        ([[1, 8, 4], [8, 16, 2]], RangesOverlap(8)),
        ([[2, 8, 4]], FirstNotAtOne()),
    ],
)
def test_schedule_vllm_rejects_is_an_error(schedule, problem) -> None:
    check = check_schedule(_cfg(schedule))
    assert not check.ok
    assert check.errors == [problem]


def test_schedule_without_a_positive_num_speculative_tokens_is_an_error() -> None:
    assert check_schedule({"method": "ngram", SCHEDULE_KEY: [[1, 4, 2]]}).errors == [NoMaxK()]
    assert check_schedule(_cfg([[1, 4, 2]], k=0)).errors == [NoMaxK()]


def test_schedule_vllm_reinterprets_is_a_note_not_an_error() -> None:
    check = check_schedule(_cfg([[9, 16, 1], [1, 4, 6]]), max_num_seqs=256)
    assert check.ok
    assert check.notes == [Unsorted(), Gap(5, 8), KAboveMax(1, 4, 6, 4), EndsBelowMax(16, 256)]


def test_k_for_batch_follows_vllms_dense_lookup() -> None:
    cfg = _cfg([[1, 4, 6], [9, 16, 1]])
    # k clamped to num_speculative_tokens; a gap carries the previous k; the tail the last k
    assert [k_for_batch(cfg, b) for b in (1, 4, 5, 8, 9, 16, 17, 500)] == [4, 4, 4, 4, 1, 1, 1, 1]


# -- running batch at a load ----------------------------------------------------------------


def test_running_at_interpolates_in_log_qps_and_is_none_outside() -> None:
    pts = _points([0.2] * 5, [1, 2, 4, 8, 24])
    assert running_at(pts, 8 * 2**0.5) == pytest.approx(16.0)
    assert running_at(pts, 4) == pytest.approx(4.0)
    assert running_at(pts, 0.5) is None and running_at(pts, 32) is None
    # a noisy dip is smoothed to a non-decreasing curve
    assert running_at(_points([0.2] * 5, [1, 3, 2, 8, 24]), 4) == pytest.approx(3.0)


# -- schedule derivation --------------------------------------------------------------------


def test_crossing_gives_k_below_lower_k_in_thin_margin_and_zero_above() -> None:
    gains = [0.25, 0.25, 0.2, 0.15, -0.05]
    pts = _points(gains, [1, 2, 4, 8, 24])
    x = _crossover(gains)
    assert x.status == "crosses" and x.qps == pytest.approx(8 * 2**0.5)
    ranges, acceptance, notes = derive_schedule(pts, x, 4, ScheduleOptions())
    # crossover at batch 16; gain falls to half its best (0.125) at batch 10;
    # position 4 (15 %) is below 20 % everywhere, position 3 (30 %) below 35 % near the crossover
    assert ranges == [[1, 10, 3], [11, 16, 2], [17, 1024, 0]]
    assert acceptance == pytest.approx(list(RATES))
    assert check_schedule(_cfg(ranges), max_num_seqs=1024).notes == []
    (thin,) = [n for n in notes if isinstance(n, ThinMargin)]
    assert (thin.batch, thin.k, thin.acceptance, thin.gain_share) == (10, 2, 0.35, 0.5)
    assert PositionsDropped(4, 4, 0.2, 3) in notes


def test_without_acceptance_figures_k_is_kept() -> None:
    gains = [0.25, 0.25, 0.2, 0.15, -0.05]
    pts = _points(gains, [1, 2, 4, 8, 24], per_position=())
    ranges, _, _ = derive_schedule(pts, _crossover(gains), 4, ScheduleOptions())
    assert ranges == [[1, 16, 4], [17, 1024, 0]]


def test_always_helps_has_no_upper_zero_range() -> None:
    gains = [0.3, 0.3, 0.3, 0.3, 0.3]
    x = _crossover(gains)
    assert x.status == "always_helps"
    opts = ScheduleOptions(max_num_seqs=256)
    ranges, _, notes = derive_schedule(_points(gains, [1, 2, 4, 8, 24]), x, 4, opts)
    assert ranges == [[1, 256, 3]]
    assert HelpsAtTop(16.0) in notes


@pytest.mark.parametrize(
    "gains, why",
    [
        ([-0.1, -0.1, -0.2, -0.3, -0.5], NeverHelped()),
        # hurts at the lowest loads, helps above: no schedule fits
        ([-0.2, -0.2, 0.2, 0.2, 0.2], HelpsApart((4.0, 8.0, 16.0))),
    ],
)
def test_never_helps_is_k_zero_everywhere_with_a_note_to_turn_it_off(gains, why) -> None:
    x = _crossover(gains)
    ranges, _, notes = derive_schedule(_points(gains, [1, 2, 4, 8, 24]), x, 4, ScheduleOptions())
    assert ranges == [[1, 1024, 0]]
    assert notes == [why]
    assert check_schedule(_cfg(ranges)).ok


def test_starting_to_help_above_loads_where_it_changes_nothing_keeps_k_everywhere() -> None:
    gains = [0.0, 0.0, 0.2, 0.2, 0.2]  # the same at 1-2 req/s, helps from 4 up
    x = _crossover(gains)
    assert x.status == "starts_helping"
    ranges, _, notes = derive_schedule(_points(gains, [1, 2, 4, 8, 24]), x, 4, ScheduleOptions())
    assert ranges == [[1, 1024, 3]]  # position 4 (15 %) dropped; never k = 0
    assert KeptBelow(1.0, (4.0, 8.0, 16.0)) in notes
    assert check_schedule(_cfg(ranges)).ok


def test_not_helping_at_the_lowest_load_only_is_derived_and_noted() -> None:
    gains = [0.0, 0.2, 0.2, 0.0, -0.1]
    x = _crossover(gains)
    ranges, _, notes = derive_schedule(_points(gains, [1, 2, 4, 8, 24]), x, 4, ScheduleOptions())
    # crossover at 4 * 2^0.75 req/s (batch 7), half the best gain at batch 6
    assert ranges == [[1, 6, 3], [7, 7, 2], [8, 1024, 0]]
    assert KeptBelow(1.0, (2.0, 4.0)) in notes


def test_every_position_wasted_means_k_zero_everywhere() -> None:
    gains = [0.25, 0.25, 0.2, 0.15, -0.05]
    pts = _points(gains, [1, 2, 4, 8, 24], per_position=(0.1, 0.05))
    ranges, _, notes = derive_schedule(pts, _crossover(gains), 2, ScheduleOptions())
    assert ranges == [[1, 1024, 0]]
    assert notes[-2:] == [PositionsDropped(1, 2, 0.2, 0), NoPositionKept()]


def test_crossover_beyond_max_num_seqs_has_no_zero_range() -> None:
    gains = [0.25, 0.25, 0.2, 0.15, -0.05]
    pts = _points(gains, [1, 2, 4, 8, 24], per_position=())
    ranges, _, _ = derive_schedule(pts, _crossover(gains), 4, ScheduleOptions(max_num_seqs=12))
    assert ranges == [[1, 12, 4]]


def test_crossing_without_running_figures_cannot_be_placed() -> None:
    gains = [0.25, 0.25, 0.2, 0.15, -0.05]
    pts = _points(gains, [None] * 5)
    with pytest.raises(NotPlaceable, match="running"):
        derive_schedule(pts, _crossover(gains), 4, ScheduleOptions())


# -- from run directories through compare and the report -------------------------------------


DYN = {**SPEC, SCHEDULE_KEY: [[1, 12, 4], [13, 1024, 0]]}


@pytest.fixture(scope="module")
def dynamic_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Baseline, static spec (crossing), a schedule tracking min(both), one 30 % slower."""
    d = tmp_path_factory.mktemp("dyn")
    spec = linear_gain(0.25, 2, 0.1)

    def ideal(q: float) -> float:
        return min(1.0, spec(q))

    write_run(d / "base", Cond("baseline"), n=200)
    write_run(d / "spec", Cond("spec", speculative=SPEC, tpot=spec, acceptance_rate=0.6), n=200)
    write_run(
        d / "ideal", Cond("dyn-ideal", speculative=DYN, tpot=ideal, acceptance_rate=0.6), n=200
    )
    slow = Cond("dyn-slow", speculative=DYN, tpot=lambda q: 1.3 * ideal(q), acceptance_rate=0.6)
    write_run(d / "slow", slow, n=200)
    return d


def test_compare_proposes_a_pasteable_schedule_at_the_crossover_batch(dynamic_runs: Path) -> None:
    c = compare_runs([dynamic_runs], bootstrap=200)
    assert c.schedules is not None
    (prop,) = c.schedules.proposals  # only the fixed-k spec condition gets one
    assert prop.condition == "spec" and prop.status == "crosses"
    x = c.crossover("spec", "tpot_p50")
    assert x is not None and x.qps == pytest.approx(true_crossover(0.25, 2, 0.1, 0.05), rel=0.1)
    # synthetic running = round(0.8 * qps) per step: 6 at 8 req/s, 13 at 16 req/s
    assert 6 < prop.batch.running < 13 and prop.batch.source == "server"
    end = int(prop.batch.running)
    assert prop.ranges[-1] == [end + 1, 1024, 0] and prop.ranges[0][0] == 1
    pasted = json.loads(prop.config_json())
    assert {k: v for k, v in pasted.items() if k != SCHEDULE_KEY} == SPEC
    assert pasted[SCHEDULE_KEY] == prop.ranges and check_schedule(pasted).ok
    report = build_report(c)
    assert prop.flag() in render_markdown(report)
    assert prop.flag() in html.unescape(render_html(report))  # shown as text, quotes and all
    term = io.StringIO()
    render_terminal(report, file=term, width=80)
    assert prop.flag() in term.getvalue()  # on one line, never wrapped: it is to be pasted
    data = report_dict(report)["schedules"]
    assert data["proposals"][0]["speculative_config"] == pasted
    assert {b["condition"] for b in data["batch_crossovers"]} >= {"spec"}


def test_best_of_both_delivered_when_tracking_the_better_fixed_condition(
    dynamic_runs: Path,
) -> None:
    c = compare_runs([dynamic_runs], bootstrap=200)
    assert c.schedules is not None
    checks = {b.condition: b for b in c.schedules.best_of_both}
    ideal = checks["dyn-ideal"]
    assert ideal.static == "spec" and ideal.status == "delivered"
    # spec's factor 1 - (0.25 - 0.1 ln(q/2)) is below 1 up to 2 e^2.5 ≈ 24 req/s
    assert [r.best_of for r in ideal.rows] == ["spec", "spec", "spec", "spec", "baseline"]
    assert all(r.verdict != "costs" for r in ideal.rows)
    assert best_of_both_verdict(ideal).startswith("dyn-ideal delivered the better of both")


def test_best_of_both_says_what_a_slower_schedule_costs_on_each_side(dynamic_runs: Path) -> None:
    c = compare_runs([dynamic_runs], bootstrap=200)
    assert c.schedules is not None
    slow = next(b for b in c.schedules.best_of_both if b.condition == "dyn-slow")
    assert slow.status == "costs"
    assert slow.cost_low == pytest.approx(0.3, abs=0.1)
    assert slow.cost_high == pytest.approx(0.3, abs=0.1)
    # the costs per side, from the rows' verdicts: spec is the better fixed condition below
    # its crossover (about 24 req/s), the baseline above
    costs = {r.best_of for r in slow.rows if r.verdict == "costs"}
    assert costs == {"spec", "baseline"}
    md = render_markdown(build_report(c))
    verdict = best_of_both_verdict(slow)
    assert "costs 3" in verdict and "at low load (vs spec" in verdict
    assert verdict in md and "Best of both: dyn-slow" in md


def test_best_of_both_without_a_static_condition_says_so(dynamic_runs: Path) -> None:
    c = compare_runs([dynamic_runs / "base", dynamic_runs / "slow"], bootstrap=100)
    assert c.schedules is not None and c.schedules.proposals == []
    (check,) = c.schedules.best_of_both
    assert check.status == "n/a" and check.static is None and check.rows == []


def test_scattered_help_or_disagreeing_starts_get_no_schedule_to_paste(tmp_path: Path) -> None:
    """A schedule needs one range where speculation helps: "mixed" (helps at 2 and 8 req/s,
    not at 4) gets no proposal and no "turn it off" either; the advice says undecided."""
    factor = {2: 0.7, 4: 1.15, 8: 0.7, 16: 1.2, 32: 1.2}
    base = write_run(tmp_path / "b", Cond("baseline"), n=200)
    spec = write_run(
        tmp_path / "s",
        Cond("spec", speculative=SPEC, tpot=lambda q: factor[int(q)], acceptance_rate=0.6),
        n=200,
    )
    c = compare_runs([base, spec], bootstrap=300)
    assert c.crossover("spec", "tpot_p50").status == "mixed"
    [prop] = c.schedules.proposals
    assert prop.ranges == [] and prop.errors == [ScatteredHelp((2.0, 8.0))]
    report = build_report(c)
    assert next(a.kind for a in report.advice if a.condition == "spec") == "undecided"
    assert not any("turn speculation off" in a.text for a in report.advice)

"""Crossover: statuses from the step classifications, boundaries and their CIs, on constructed
estimates and on noisy synthetic run dirs with a known answer."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from analysis.synth_rundir import SPEC, Cond, linear_gain, true_crossover, write_run
from specload.analysis.compare import compare_runs
from specload.analysis.decisions.crossover import find_crossover, pattern_status
from specload.analysis.statistics.effect import HELPS, HURTS, UNDECIDED, classify
from specload.analysis.statistics.stats import Estimate
from specload.report.finding_words import flag_message
from specload.report.verdict_words import sentence, verdicts


def _fixed(qps: list[float], ratios: list[tuple[float, float, float]], min_gain: float = 0.05):
    """A crossover from (value, lo, hi) ratios whose bootstrap replicates all equal the point."""
    est = [Estimate(v, lo, hi) for v, lo, hi in ratios]
    reps = np.tile(np.array([v for v, _, _ in ratios]), (50, 1))
    effects = [classify(e, min_gain) for e in est]
    return find_crossover("tpot_p50", "c", "b", qps, est, effects, reps, min_gain)


@pytest.mark.parametrize(
    ("pattern", "status"),
    [
        ([True, True, True], "always_helps"),
        ([False, False, False], "never_helps"),
        ([True, True, False], "crosses"),
        ([False, True, True], "starts_helping"),
        ([False, True, False], "helps_between"),
        ([True, False, True], "mixed"),
    ],
)
def test_every_pattern_has_its_status(pattern: list[bool], status: str) -> None:
    assert pattern_status(pattern) == status


def test_bootstrap_agreement_compares_helping_steps_not_status_labels() -> None:
    """Every replicate is "mixed", but half of them help at 2 and 8 (as the estimate) and
    half at 4 and 16: only the first half agrees with the estimate."""
    qps = [2.0, 4.0, 8.0, 16.0]
    est = [
        Estimate(*r) for r in [(0.7, 0.6, 0.8), (1.0, 0.9, 1.1), (0.7, 0.6, 0.8), (1.0, 0.9, 1.1)]
    ]
    reps = np.array([[0.7, 1.0, 0.7, 1.0]] * 25 + [[1.0, 0.7, 1.0, 0.7]] * 25)
    x = find_crossover("tpot_p50", "c", "b", qps, est, [classify(e, 0.05) for e in est], reps, 0.05)
    assert x is not None and x.status == "mixed" and x.agreement == pytest.approx(0.5)


def test_stop_is_interpolated_linearly_in_log_qps() -> None:
    x = _fixed([2, 4, 8], [(0.70, 0.68, 0.72), (0.85, 0.83, 0.87), (1.05, 1.03, 1.07)])
    # gain 0.15 at 4 and -0.05 at 8: 0.05 lies halfway, i.e. sqrt(4 * 8) in log space.
    assert x is not None and x.status == "crosses"
    assert x.stop is not None and x.stop.qps == pytest.approx(math.sqrt(32))
    assert x.stop.ci == (4, 8) and x.start is None  # bracketed by the steps that decide it
    assert x.qps == pytest.approx(math.sqrt(32)) and x.last_helping_qps == 4


def test_a_boundary_ci_is_the_steps_whose_cis_decide_it_open_where_none_does() -> None:
    """The stop lies above every step whose CI puts the gain surely at or above the minimum
    (ratio CI at or below 0.95), contiguous from the band's first step, and below the first
    step whose CI puts it surely under: a step that helps by the rule but whose CI reaches past
    0.95 does not narrow it, and without a sure step on a side that side is open."""
    x = _fixed([2, 4, 8, 16], [(0.70, 0.68, 0.72), (0.90, 0.85, 0.97), (0.97, 0.90, 1.05),
                               (1.05, 1.03, 1.07)])  # fmt: skip
    assert x is not None and x.status == "crosses" and x.helping == [2, 4]
    assert x.stop is not None and x.stop.ci == (2, 16) and 4 < x.stop.qps < 8
    unsure = _fixed([2, 4], [(0.90, 0.85, 0.97), (0.97, 0.90, 1.05)])
    assert unsure is not None and unsure.stop is not None
    assert unsure.stop.ci == (None, None) and unsure.stop.ci_beyond == ("below", "above")
    start = _fixed([2, 4, 8, 16], [(1.05, 1.03, 1.07), (1.0, 0.93, 1.02), (0.85, 0.83, 0.87),
                                   (0.70, 0.68, 0.72)])  # fmt: skip
    assert start is not None and start.status == "starts_helping"
    assert start.start is not None and start.start.ci == (2, 8) and 4 < start.start.qps < 8


def test_start_is_where_the_gain_rises_through_the_minimum() -> None:
    x = _fixed([2, 4, 8], [(1.0, 0.98, 1.02), (0.85, 0.83, 0.87), (0.7, 0.68, 0.72)])
    assert x is not None and x.status == "starts_helping" and x.stop is None
    # gain 0 at 2 and 0.15 at 4: 0.05 is a third of the way, 2 ** (4/3) in log space.
    assert x.start is not None and x.start.qps == pytest.approx(2 ** (4 / 3))
    assert x.first_helping_qps == 4 and x.peak_qps == 8
    assert x.peak_gain.value == pytest.approx(0.3)


def test_a_band_has_both_boundaries_and_scattered_help_has_none() -> None:
    band = _fixed([2, 4, 8], [(1.0, 0.98, 1.02), (0.85, 0.83, 0.87), (1.0, 0.98, 1.02)])
    assert band is not None and band.status == "helps_between"
    assert band.start is not None and band.stop is not None
    assert 2 < band.start.qps < 4 < band.stop.qps < 8
    mixed = _fixed([2, 4, 8], [(0.85, 0.83, 0.87), (1.0, 0.98, 1.02), (0.85, 0.83, 0.87)])
    assert mixed is not None and mixed.status == "mixed"
    assert mixed.start is None and mixed.stop is None and mixed.helping == [2, 8]


def test_a_gain_whose_ci_crosses_zero_does_not_help() -> None:
    # 7 % lower, CI from 10 % lower to 7 % higher: the "not significant ... still helps" case.
    est = Estimate(0.93, 0.90, 1.07)
    assert classify(est, 0.05) == UNDECIDED
    x = _fixed([4], [(0.93, 0.90, 1.07)])
    assert x is not None and x.status == "never_helps" and x.helping == []
    assert not x.settled and not x.decided  # "never helps" needs every step decided
    assert classify(Estimate(0.93, 0.90, 0.97), 0.05) == HELPS


def test_incomplete_steps_are_left_out_of_the_pattern() -> None:
    est = [Estimate(0.7, 0.68, 0.72), Estimate(1.3, 1.2, 1.4), Estimate(0.7, 0.68, 0.72)]
    reps = np.tile(np.array([0.7, 1.3, 0.7]), (20, 1))
    effects = [HELPS, "incomplete", HELPS]
    x = find_crossover("tpot_p50", "c", "b", [2, 4, 8], est, effects, reps, 0.05)
    assert x is not None and x.status == "always_helps" and x.excluded == [4]


def test_known_crossover_is_recovered_within_its_ci(crossing_pair: tuple[Path, Path]) -> None:
    truth = true_crossover(0.25, 2, 0.1, 0.05)
    cmp = compare_runs(list(crossing_pair), bootstrap=1000)
    x = cmp.crossover("spec-ngram-k4", "tpot_p50")
    assert x is not None and x.status == "crosses" and x.stop is not None
    assert x.ci[0] is not None and x.ci[1] is not None
    assert x.ci[0] <= truth <= x.ci[1]
    assert x.qps == pytest.approx(truth, rel=0.25)
    assert x.tested_range == (2.0, 32.0)
    assert x.last_helping_qps in (8.0, 16.0)
    assert 0.2 < x.first_gain.value < 0.3


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_crossover_ci_covers_truth_across_noise_seeds(tmp_path: Path, seed: int) -> None:
    truth = true_crossover(0.20, 2, 0.08, 0.05)
    base = write_run(tmp_path / "b", Cond("baseline"), seed=seed, n=200, metrics=False)
    spec = write_run(
        tmp_path / "s",
        Cond("spec", speculative=SPEC, tpot=linear_gain(0.20, 2, 0.08)),
        seed=seed,
        n=200,
        metrics=False,
    )
    x = compare_runs([base, spec], bootstrap=800).crossover("spec", "tpot_p50")
    assert x is not None and x.status == "crosses"
    assert x.ci[0] <= truth <= x.ci[1]


def test_a_feature_that_helps_more_as_load_rises_starts_helping(tmp_path: Path) -> None:
    """Prefix caching's shape: no gain at low load, more and more above."""

    def factor(q: float) -> float:
        return 1.0 - max(0.0, 0.1 * math.log(q / 4))

    truth = 4 * math.exp(0.5)  # the gain reaches 5 % here
    base = write_run(tmp_path / "b", Cond("baseline"), metrics=False, n=400)
    pre = write_run(
        tmp_path / "p", Cond("prefix", prefix_caching=True, tpot=factor), metrics=False, n=400
    )
    cmp = compare_runs([base, pre])
    x = cmp.crossover("prefix", "tpot_p50")
    assert x is not None and x.status == "starts_helping" and x.stop is None
    assert x.start is not None and x.start.ci[0] <= truth <= (x.start.ci[1] or math.inf)
    verdict = verdicts(cmp)["prefix"]
    assert "starts helping p50 TPOT at ≈" in verdict
    assert "helps from 8 req/s up to the highest tested load, 32 req/s" in verdict
    assert "stops helping" not in verdict
    d = x.to_dict()
    assert d["status"] == "starts_helping" and d["starts_at"]["qps"] == pytest.approx(x.start.qps)


def test_always_helps_is_stated_plainly(tmp_path: Path) -> None:
    base = write_run(tmp_path / "b", Cond("baseline"), metrics=False)
    spec = write_run(
        tmp_path / "s", Cond("spec", speculative=SPEC, tpot=lambda q: 0.7), metrics=False
    )
    cmp = compare_runs([base, spec])
    x = cmp.crossover("spec", "tpot_p50")
    assert x.status == "always_helps" and x.qps is None and x.agreement == 1.0
    assert x.start is None and x.stop is None
    assert verdicts(cmp)["spec"].startswith(
        "spec lowers p50 TPOT at every tested load (2–32 req/s)"
    )


def test_never_helps_is_stated_plainly(tmp_path: Path) -> None:
    # 600 requests a step: a p95 over six time slices of 50 requests each decides too little
    base = write_run(tmp_path / "b", Cond("baseline"), metrics=False, n=600)
    spec = write_run(
        tmp_path / "s", Cond("spec", speculative=SPEC, tpot=lambda q: 1.25), metrics=False, n=600
    )
    cmp = compare_runs([base, spec])
    x = cmp.crossover("spec", "tpot_p50")
    assert x.status == "never_helps" and x.qps is None
    assert verdicts(cmp)["spec"].startswith(
        "spec never helps p50 TPOT at the tested loads (2–32 req/s): it is worse at every "
        "tested load"
    )
    assert "p95 TPOT is worse at every tested load" in verdicts(cmp)["spec"]


def test_p50_better_but_p95_worse_is_flagged(tmp_path: Path) -> None:
    base = write_run(tmp_path / "b", Cond("baseline"), metrics=False, n=600)
    spec = write_run(
        tmp_path / "s",
        Cond("spec", speculative=SPEC, tpot=lambda q: 0.7, tail_share=0.15, tail_factor=2.5),
        metrics=False,
        n=600,
    )
    cmp = compare_runs([base, spec])
    fams = {(f.family, f.target_qps) for f in cmp.flags}
    assert {("tpot", q) for q in (2, 4, 8, 16, 32)} <= fams
    assert "p95 TPOT is worse at every tested load" in verdicts(cmp)["spec"]
    msg = flag_message(cmp.flags[0])
    assert re.search(r"p50 TPOT 2\d % lower \(CI \d+–\d+ %\) but p95 TPOT \d+ % higher", msg)


def test_report_json_shape_for_every_crossover_metric(tmp_path: Path) -> None:
    # the crossing pair's data at 600 requests a step: each step's six time slices then hold
    # 100 requests, enough for every step's 20 % TTFT rise to be decided
    base = write_run(tmp_path / "base", Cond("baseline"), n=600)
    spec = write_run(
        tmp_path / "spec",
        Cond("spec-ngram-k4", speculative=SPEC, tpot=linear_gain(0.25, 2, 0.1),
             ttft=lambda q: 1.2, acceptance_rate=0.6),
        n=600,
    )  # fmt: skip
    cmp = compare_runs([base, spec])
    metrics = {x.metric for x in cmp.crossovers}
    assert metrics == {"tpot_p50", "tpot_p95", "e2e_p50", "e2e_p95", "ttft_p50"}
    d = cmp.crossover("spec-ngram-k4", "ttft_p50").to_dict()
    assert d["status"] == "never_helps"
    assert {"status", "stops_at", "starts_at", "steps", "tested_range", "decided"} <= set(d)
    assert all(s["effect"] == "hurts" for s in d["steps"])  # TTFT 20 % higher everywhere


def test_noise_alone_rarely_reaches_the_verdict_and_never_flags_even_at_min_gain_zero(
    tmp_path: Path,
) -> None:
    # Identical conditions, four fixed noise draws: 4 x 5 steps x (p95 TPOT, p50 TTFT) rows
    # classified at the displayed 95 % CI: about 2 false positives are expected; allow 5.
    hits = 0
    for seed in (3, 5, 7, 9):
        base = write_run(tmp_path / f"b{seed}", Cond("baseline"), metrics=False, seed=seed)
        same = write_run(
            tmp_path / f"s{seed}", Cond("spec", speculative=SPEC), metrics=False, seed=seed + 1
        )
        cmp = compare_runs([base, same], min_gain=0.0)
        rows = cmp.ratios["spec"]["tpot_p95"] + cmp.ratios["spec"]["ttft_p50"]
        hits += sum(r.effect in (HELPS, HURTS) for r in rows)
    assert hits <= 5


def test_a_non_significant_step_with_a_large_gain_lies_before_the_stop() -> None:
    """Helps significantly at 2; at 4 the gain is 15 % but its CI crosses 0; at 8 it is
    gone. The stop is where the estimated gain crosses the minimum (between 4 and 8), not on
    the step that does not help significantly: the boundary's CI covers the 4 req/s step."""
    x = _fixed([2, 4, 8], [(0.70, 0.68, 0.72), (0.85, 0.60, 1.10), (1.05, 1.03, 1.07)])
    assert x is not None and x.status == "crosses" and x.helping == [2]
    assert x.stop is not None and x.stop.qps == pytest.approx(math.sqrt(32))
    verdict = sentence(x, {"tpot_p50": []}, [], [], [])
    assert "helps up to 2 req/s and stops helping at ≈ 5.7 req/s" in verdict


def test_a_stop_beyond_the_tested_range_is_said_and_null_in_json() -> None:
    x = _fixed([2, 4, 8], [(0.70, 0.68, 0.72), (0.85, 0.60, 1.10), (0.90, 0.70, 1.10)])
    assert x is not None and x.status == "crosses" and x.stop is not None
    assert not x.stop.inside and x.qps is None
    assert x.to_dict()["stops_at"]["qps"] is None and x.to_dict()["stops_at"]["beyond"] == "above"
    verdict = sentence(x, {"tpot_p50": []}, [], [], [])
    assert "no stop inside the tested range" in verdict and "≈" not in verdict


def test_a_bands_stop_interval_never_reaches_below_its_start_interval() -> None:
    """The web UI once read "starts at ≈ 8.9 req/s (CI 4->16) and stops at ≈ 10.6 req/s
    (CI <4-16)": helping cannot stop before it starts."""
    from specload.analysis.decisions.crossover import Boundary, nested

    start = Boundary(8.9, (4.0, None), ("", "above"))
    stop = Boundary(10.6, (None, 16.0), ("below", ""))
    s, t = nested(start, stop)
    assert (s.ci, s.ci_beyond) == ((4.0, 16.0), ("", ""))
    assert (t.ci, t.ci_beyond) == ((4.0, 16.0), ("", ""))
    inside = Boundary(6.0, (4.0, 8.0)), Boundary(12.0, (8.0, 16.0))
    assert nested(*inside) == inside  # already consistent: unchanged

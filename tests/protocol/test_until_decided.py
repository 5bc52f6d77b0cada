"""``sweep --interleave --until-decided``: the look, the round it plans, the stopping rule's
widening, and one real sweep on two identical simulators that must end "the same"."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from specload.analysis.statistics.effect import HELPS, SAME, UNDECIDED
from specload.analysis.statistics.stats import Estimate, for_looks, look_stretch
from specload.protocol.interleave import Cell
from specload.protocol.until_decided import MAX_UNITS, MIN_UNITS, Look, plan_round

CELLS = [Cell(0.0, 1), Cell(4.0), Cell(8.0)]


def _design(blocks_per_cell: int = 2) -> dict:
    plan, n = [], 0
    for cell in range(len(CELLS)):
        for k in range(blocks_per_cell):
            for cond in ("baseline", "spec"):
                plan.append({"number": n, "unit": n // 2, "condition": cond, "cell": cell, "k": k})
                n += 1
    return {"plan": plan}


def test_a_round_asks_each_undecided_step_for_the_time_that_would_decide_it() -> None:
    look = Look(1, {CELLS[0]: HELPS, CELLS[1]: UNDECIDED, CELLS[2]: UNDECIDED})
    look.to_decide_s = {CELLS[1]: 40.0, CELLS[2]: None}
    later = plan_round(look, CELLS, _design(), 2, 2.0, 5.0, budget_left_s=1000.0)
    assert later is not None
    # 40 s of measurement at 2 x 2 s per pair: 10 pairs; no time known: as many as it had
    assert later.blocks == {1: 10, 2: 2} and later.k_from == {1: 2, 2: 2}
    assert later.first_block == 12 and later.index == 1


def test_only_the_last_round_takes_more_than_max_units_pairs_a_step_asks_for() -> None:
    """Before a later look a step gets at most ``MAX_UNITS`` pairs (its estimate is better
    measured again); the last round has no later look, and takes what it asks, within the
    budget."""
    look = Look(3, {CELLS[1]: UNDECIDED, CELLS[2]: UNDECIDED})
    # 2 s blocks: 4 s of measurement a pair; 400 s asks for 100 pairs, 40 s for 10
    look.to_decide_s = {CELLS[1]: 400.0, CELLS[2]: 40.0}
    capped = plan_round(look, CELLS, _design(), 2, 2.0, 5.0, budget_left_s=10_000.0)
    assert capped is not None and capped.blocks == {2: 10, 1: MAX_UNITS}
    last = plan_round(look, CELLS, _design(), 2, 2.0, 5.0, budget_left_s=10_000.0, last=True)
    assert last is not None and last.blocks == {2: 10, 1: 100}
    # within the budget: 10 s a pair, 10 pairs first, then what is left
    tight = plan_round(look, CELLS, _design(), 2, 2.0, 5.0, budget_left_s=500.0, last=True)
    assert tight is not None and tight.blocks == {2: 10, 1: 40}


def test_the_budget_goes_to_the_step_that_needs_least_and_a_round_that_fits_none_is_none() -> None:
    look = Look(1, {CELLS[1]: UNDECIDED, CELLS[2]: UNDECIDED})
    look.to_decide_s = {CELLS[1]: 80.0, CELLS[2]: 16.0}
    # 5 s a block, 2 conditions: 10 s a pair; 60 s buys the 4 pairs at 8 req/s, then 2 more
    later = plan_round(look, CELLS, _design(), 2, 2.0, 5.0, budget_left_s=60.0)
    assert later is not None and later.blocks == {2: 4, 1: 2}
    assert (
        plan_round(look, CELLS, _design(), 2, 2.0, 5.0, budget_left_s=10.0 * MIN_UNITS - 1) is None
    )


def test_a_look_says_what_is_decided_and_how_long_the_rest_would_take() -> None:
    look = Look(2, {CELLS[0]: SAME, CELLS[1]: HELPS, CELLS[2]: UNDECIDED})
    look.to_decide_s = {CELLS[2]: 300.0}
    line = look.line(4)
    assert line.startswith("[until-decided] look 2 of 4 (intervals widened x1.27 for 4 looks)")
    assert "2 of 3 steps decided (helps at 4 req/s; the same at c=1)" in line
    assert line.endswith(
        "undecided at 8 req/s; about 5 min more measurement there would likely decide it"
    )


def test_widening_for_looks_keeps_the_estimate_and_holds_each_look_at_its_share() -> None:
    assert look_stretch(1) == 1.0
    assert look_stretch(4) == pytest.approx(2.4977 / 1.959964, rel=1e-3)  # z(1 - 0.025/4)
    rng = np.random.default_rng(0)
    reps = np.exp(rng.normal(np.log(0.9), 0.05, 4000))
    est = Estimate(0.9, *np.percentile(reps, [2.5, 97.5]))
    wide, out = for_looks(est, reps, 4)
    assert wide.value == 0.9 and out.shape == reps.shape
    half = np.log(wide.hi / wide.lo) / np.log(est.hi / est.lo)
    assert half == pytest.approx(look_stretch(4), rel=0.02)


SCENARIO = """\
name: until-decided-test
max_tokens: 24
min_tokens: 24
ignore_eos: true
arrival: constant
steps: [4]
step_duration_s: 4
warmup_s: 0.5
max_concurrency: 32
request_timeout_s: 20
prompts:
  synthetic: {input_tokens: 64, count: 20}
interleave: {blocks: 2, block_warmup_s: 0.5}
"""


def _sweep(tmp_path: Path, budget_s: float, condition: str) -> str:
    """``sweep --interleave --until-decided`` of the baseline and ``condition`` on two
    simulators; its output (exit 0 asserted)."""
    (tmp_path / "s.yaml").write_text(SCENARIO)
    sim = (
        f"{sys.executable} -m specload sim --host 127.0.0.1 --port {{port}} --profile h200-llama8b"
    )
    res = subprocess.run(
        [sys.executable, "-m", "specload", "sweep", "--interleave", "--until-decided",
         "--budget-s", str(budget_s), "--scenario", "s.yaml", "--out", "out",
         "--server-cmd", sim, "--condition", "baseline=", "--condition", condition],  # fmt: skip
        cwd=tmp_path, capture_output=True, text=True, timeout=240, check=False,
        start_new_session=True,
    )  # fmt: skip
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    return out


@pytest.mark.slow
def test_identical_servers_end_the_same_and_the_report_says_the_intervals_were_widened(
    tmp_path: Path,
) -> None:
    out = _sweep(tmp_path, 90, "twin=")
    looks = [ln for ln in out.splitlines() if ln.startswith("[until-decided] look")]
    assert looks and "1 of 1 steps decided (the same at 4 req/s)" in looks[-1], out[-3000:]
    assert "[until-decided] every step decided" in out
    meta = json.loads((tmp_path / "out" / "twin" / "run.json").read_text())
    assert meta["interleave"]["looks"] == 4
    report = json.loads((tmp_path / "out" / "report" / "report.json").read_text())
    [row] = report["ratios"]["twin"]["tpot_p50"]
    assert row["effect"] == SAME and "to_decide_s" not in row
    md = (tmp_path / "out" / "report" / "report.md").read_text()
    assert "each widened for 4 looks at the data" in md


@pytest.mark.slow
def test_a_budget_too_short_leaves_the_step_undecided_with_the_time_to_decide_it(
    tmp_path: Path,
) -> None:
    # a draft model whose step flips between a fast and a slow regime (the calibrated H200
    # one): two 2-s blocks per condition cannot decide it (an n-gram drafter on synthetic
    # prompts drafts nothing, and two blocks of it read the same as the baseline)
    spec = (
        '--speculative-config {"method":"draft_model","model":"llama-3.2-1b",'
        '"num_speculative_tokens":4} --spec-regime calibrated'
    )
    out = _sweep(tmp_path, 1, f"spec={spec}")
    assert "[until-decided] stopped: no more blocks fit the budget" in out, out[-3000:]
    report = json.loads((tmp_path / "out" / "report" / "report.json").read_text())
    [row] = report["ratios"]["spec"]["tpot_p50"]
    assert row["effect"] == UNDECIDED and row["to_decide_s"] > 0
    assert "no decision yet on p50 TPOT: undecided at 4 req/s; about " in report["verdict"]["spec"]

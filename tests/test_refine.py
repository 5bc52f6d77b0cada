"""The adaptive search (``specload sweep --refine``): where it puts new steps, when it stops.

Step placement and the stopping rules are held against constructed runs whose boundary is
known (``tests/analysis/synth_rundir.py``) and whose sweep plan could only start a server
that fails: a search that wrongly ran a pass would fail the test. The whole search runs once
on the simulator: a coarse ladder, one refining pass on fresh servers, both conditions at
the same new rates, and a report that pools the passes.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from specload.cli.main import main
from specload.core.condition import parse_condition
from specload.protocol.refine import Bound, converged, next_rates, pass_cost_s, run_refinement
from specload.protocol.sweep_plan import ConditionResult, SweepPlan
from tests.analysis.synth_rundir import SPEC, Cond, linear_gain, write_run
from tests.conftest import REPO

PY = shlex.quote(sys.executable)


def test_next_rates_measure_the_ci_bounds_and_estimate_again_snapped_to_tested_loads() -> None:
    b = Bound("spec crossover", 20.0, 16.3, 26.0, (16.0, 24.0))
    # 16.3 is within 5 % of the tested 16: measured there again (its starts accumulate)
    assert next_rates([b], tested=[14, 16, 24, 28]) == [16.0, 20.0, 26.0]
    assert next_rates([b], tested=[14, 16, 19.5, 24, 28]) == [16.0, 19.5, 26.0]
    # a tested load far beyond a CI bound (8 below 16.3, 64 above 26): one 12 % beyond it,
    # so the boundary is not interpolated across a wide gap
    assert next_rates([b], tested=[8, 16, 64]) == [14.6, 16.0, 20.0, 26.0, 29.1]
    # an open CI bound: the tested step on that side
    open_hi = Bound("spec crossover", 20.37, 17.12, None, (16.0, 24.0))
    assert next_rates([open_hi], tested=[16, 24]) == [17.1, 20.4, 24.0, 26.9]
    # beyond the tested range: nothing to place inside it; a mixed pattern: where it flips
    assert next_rates([Bound("x", None, None, None)], tested=[16, 24]) == []
    mixed = Bound("x", None, None, None, unsettled=(8.0, 16.0, 24.0))
    assert not mixed.beyond and Bound("y", None, None, None).beyond
    assert next_rates([mixed, Bound("a", 2.5, 2.2, 2.9)], tested=[1, 4]) == [
        2.0, 2.2, 2.5, 2.9, 3.2, 8.0, 16.0, 24.0]  # fmt: skip


def test_a_crossovers_pass_bisects_its_ci_and_gives_an_undecided_step_more_starts() -> None:
    """A crossover's CI is the two steps that decide it: the pass measures its middle in log
    load (√(8·24) ≈ 13.9), or the tested load within 5 % of it again, on fresh starts; never
    the decided ends."""
    b = Bound("spec crossover", 14.1, 8.0, 24.0, (14.0, 16.0), stepwise=True)
    assert next_rates([b], tested=[8, 12, 16, 24]) == [13.9]
    assert next_rates([b], tested=[8, 12, 14, 16, 24]) == [14.0]
    # ends within ~10 %: the middle is within 5 % of an end, nothing new fits
    near = Bound("spec crossover", 14.2, 14.0, 15.0, (14.0, 15.0), stepwise=True)
    assert next_rates([near], tested=[8, 14, 15, 24]) == []
    # an open side: more starts at its undecided step nearest the estimate
    open_lo = Bound("s", 14.1, None, 24.0, (12, 16), stepwise=True, undecided=(4.0, 8.0, 16.0))
    assert next_rates([open_lo], tested=[4, 8, 16, 24]) == [8.0]
    open_hi = Bound("s", 14.1, 8.0, None, (12, 16), stepwise=True, undecided=(16.0, 24.0))
    assert next_rates([open_hi], tested=[8, 16, 24]) == [16.0]
    # an open side with no undecided step on it (8 helps, but not yet surely by the minimum
    # gain): the step bracketing the estimate there stands in for that end, and the CI's
    # middle is measured, not "nothing fits"
    no_step = Bound("s", 13.9, None, 96.0, (8, 32), stepwise=True, undecided=(32.0,))
    assert next_rates([no_step], tested=[8, 32, 96]) == [27.7]


def test_never_helping_for_want_of_starts_is_measured_again_not_called_beyond() -> None:
    """No step helps and two are undecided (the rule's answer, as the verdict reads it): the
    status reads "never helps", but the boundary is not beyond the tested range; the
    undecided steps get more starts."""
    import numpy as np

    from specload.analysis.decisions.crossover import NEVER, find_crossover
    from specload.analysis.statistics.effect import HURTS, SAME, UNDECIDED
    from specload.analysis.statistics.stats import Estimate
    from specload.protocol.refine import current_bounds

    qps = [4.0, 16.0, 32.0]
    ratios = [Estimate(0.85, 0.6, 1.1), Estimate(0.96, 0.7, 1.2), Estimate(2.1, 1.8, 2.4)]
    x = find_crossover("tpot_p50", "spec", "baseline", qps, ratios,
                       [UNDECIDED, UNDECIDED, HURTS], np.full((10, 3), np.nan), 0.05)  # fmt: skip
    assert x is not None and x.status == NEVER and x.undecided_steps == [4.0, 16.0]

    class _Comparison:
        ratios = {"spec": {}}
        metric = "tpot_p50"

        def crossover(self, _label: str, _metric: str) -> object:
            return x

    (b,) = current_bounds(_Comparison(), "crossover")
    assert not b.beyond and b.undecided == (4.0, 16.0) and "no step decided yet" in b.text()
    assert next_rates([b], tested=qps) == [4.0, 16.0]
    # decided everywhere and never helping: beyond the tested range, nothing to measure
    x.effects = [SAME, SAME, HURTS]
    (b,) = current_bounds(_Comparison(), "crossover")
    assert b.beyond and next_rates([b], tested=qps) == []


def test_converged_only_when_every_ci_is_inside_and_narrow_enough() -> None:
    narrow, wide = Bound("a", 20.0, 19.6, 20.4, (18, 22)), Bound("b", 20.0, 15.0, 26.0, (18, 22))
    assert converged([narrow], 1.0) and not converged([narrow, wide], 1.0)
    # a narrow CI between loads far apart is an interpolation's, not the data's: not yet
    assert not converged([Bound("a", 20.0, 19.6, 20.4, (16, 32))], 1.0)
    assert not converged([Bound("c", 20.0, None, 26.0)], 100.0) and not converged([], 1.0)
    assert pass_cost_s([10, 12, 14], step_s=70, runs=4, start_s=30) == 4 * (30 + 3 * 70)


def _plan(out: Path, scenario: Path) -> SweepPlan:
    # a server that cannot start: any pass the search wrongly runs fails the test
    return SweepPlan(
        scenario=scenario,
        out=out,
        conditions=[parse_condition("baseline="), parse_condition("spec-ngram-k4=")],
        server_cmd="false {port}",
        health_timeout_s=1,
    )


@pytest.fixture
def constructed(tmp_path: Path) -> tuple[Path, Path]:
    """A baseline and a spec run whose p50 TPOT gain falls to the 5 % minimum at 2e² ≈ 14.8
    req/s, with steps close together around it."""
    out = tmp_path / "out"
    # 1200 requests a step: 50-300 s at these rates, so every step's CI is over six time
    # slices (``steps._time_slices``), as a real minute-long step's would be, and 8 and 24
    # req/s are decided
    write_run(out / "baseline", Cond("baseline"), qps=QPS, n=1200, seed=2)
    write_run(
        out / "spec-ngram-k4",
        Cond("spec-ngram-k4", speculative=SPEC, tpot=linear_gain(0.25, 2, 0.1)),
        qps=QPS,
        n=1200,
        seed=2,
    )
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"steps: {list(QPS)}\nstep_duration_s: 60\nwarmup_s: 10\n")
    return out, scenario


QPS = (4, 8, 12, 14, 16, 18, 24)


def _first(plan: SweepPlan, server_s: float) -> list[ConditionResult]:
    return [
        ConditionResult(c, plan.out / c.name, "completed", 0, server_s=server_s)
        for c in plan.conditions
    ]


def test_the_search_stops_on_precision_budget_and_range_without_running_a_pass(
    constructed: tuple[Path, Path],
) -> None:
    out, scenario = constructed
    plan = _plan(out, scenario)
    said: list[str] = []
    # the crossover is inside, near 14.8 req/s, between steps 2 req/s apart; its CI is the
    # steps whose own CIs decide it (8 surely helps, 24 surely not: 12-18 are within ±3 % of
    # the 5 % minimum gain)
    done = run_refinement(plan, _first(plan, 600), "crossover", 16.0, None, None, said.append)
    (first,) = done.passes
    (bound,) = first.bounds
    assert bound.qps is not None and 12 < bound.qps < 18 and (bound.lo, bound.hi) == (8, 24)
    assert bound.bracket == (14, 16)
    assert done.results == [] and done.stopped.startswith("every CI is narrower than 16")
    assert first.server_s == 1200 and first.rates == list(QPS)
    # a precise answer wanted, but the next pass (2 starts × (start + 3 rates × 70 s)) > budget
    done = run_refinement(plan, _first(plan, 600), "crossover", 0.01, 1500.0, None, said.append)
    assert done.results == [] and done.stopped.startswith("the budget: pass 2 would take")
    assert "[refine] pass 1: 4, 8, 12, 14, 16, 18, 24 req/s, 1200 server-s" in said[-1]


def test_one_start_per_pass_measures_an_undecided_step_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Starts pool: with ``--replicates 1`` a step no CI decides yet (8 req/s, the open side
    of the crossover's CI) is measured again on fresh starts, as with three per pass."""
    from specload.protocol import refine

    bound = Bound("spec crossover", 14.1, None, 24.0, (12, 16), stepwise=True, undecided=(8.0,))
    monkeypatch.setattr(refine, "_compare", lambda *_a: None)
    monkeypatch.setattr(refine, "current_bounds", lambda *_a: [bound])
    scenario = tmp_path / "s.yaml"
    scenario.write_text("steps: [4, 8, 16, 24]\n")
    plan = _plan(tmp_path / "out", scenario)
    assert plan.replicates == 1
    ran: list[list[float]] = []

    def run_pass(rates: list[float], index: int) -> list[ConditionResult]:
        ran.append(rates)
        return _first(plan, 100)

    done = run_refinement(plan, _first(plan, 600), "crossover", 0.01, None, None,
                          lambda _s: None, max_passes=2, run_pass=run_pass)  # fmt: skip
    assert ran == [[8.0]] and done.stopped == "the pass limit (2)"


def test_the_search_stops_when_no_new_load_fits_inside_the_bracket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CI of the tested loads 14.5 and 15: nothing new fits between them, so the search
    says a narrower precision cannot be reached, and runs no pass."""
    from specload.protocol import refine

    bound = Bound("spec crossover", 14.8, 14.5, 15.0, (14.5, 15.0), stepwise=True)
    monkeypatch.setattr(refine, "_compare", lambda *_a: None)
    monkeypatch.setattr(refine, "current_bounds", lambda *_a: [bound])
    scenario = tmp_path / "s.yaml"
    scenario.write_text("steps: [8, 14, 14.5, 15, 24]\n")
    plan = dataclasses.replace(_plan(tmp_path / "out", scenario), replicates=3)
    done = run_refinement(plan, _first(plan, 600), "crossover", 0.01, None, None, lambda _s: None)
    assert done.stopped == refine.NOTHING_FITS and done.results == []
    # one start per pass stops the same way: its starts pool with the earlier ones
    one = run_refinement(_plan(tmp_path / "out1", scenario), _first(plan, 600), "crossover",
                         0.01, None, None, lambda _s: None)  # fmt: skip
    assert one.stopped == refine.NOTHING_FITS and one.results == []


def test_a_boundary_beyond_the_tested_range_is_not_refined(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_run(out / "baseline", Cond("baseline"), qps=(2, 4, 8))
    write_run(
        out / "spec-ngram-k4",
        Cond("spec-ngram-k4", speculative=SPEC, tpot=lambda q: 0.7),
        qps=(2, 4, 8),
    )
    scenario = tmp_path / "s.yaml"
    scenario.write_text("steps: [2, 4, 8]\n")
    plan = _plan(out, scenario)
    done = run_refinement(plan, _first(plan, 100), "crossover", 1.0, None, None, lambda _s: None)
    assert done.stopped.startswith("beyond the tested range (spec-ngram-k4 crossover)")


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--refine", "capacity"], "capacity needs an SLO"),
        (["--refine", "crossover", "--max-passes", "1"], "--max-passes"),
        (["--refine", "crossover", "--precision", "0"], "--precision"),
        (["--budget-s", "100"], "applies to --refine"),
        (["--refine", "crossover", "--slo", "tpot_p95=25"], "with a unit"),
    ],
)
def test_bad_refine_options_exit_2_before_any_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], expected: str
) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("steps: [1, 2]\n")
    rc = main(["sweep", "--server-cmd", "false {port}", "--condition", "baseline=",
               "--scenario", str(scenario), "--out", str(tmp_path / "o"), *extra])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and expected in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_crossover_refinement_needs_servers_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("steps: [1, 2]\n")
    rc = main(["sweep", "--url", "http://127.0.0.1:9", "--label", "spec", "--skip-preflight",
               "--scenario", str(scenario), "--out", str(tmp_path / "o"), "--refine", "crossover"])  # fmt: skip
    assert rc == 2 and "use --server-cmd, or --refine capacity" in capsys.readouterr().err


SIM = f"{PY} -m specload sim --host 127.0.0.1 --port {{port}} --profile h200-llama8b"
SPEC_FLAGS = shlex.join(
    ["--speculative-config", json.dumps(
        {"method": "draft_model", "model": "llama-3.2-1b", "num_speculative_tokens": 4,
         "synthetic_acceptance_rates": [0.8, 0.55, 0.3, 0.15]}, separators=(",", ":"))]
)  # fmt: skip
#: 2-s steps: with 1-s ones a box busy with the rest of the suite left the 8 req/s step
#: undecided (one start's interval over time slices), and the search rightly stopped there.
LADDER = """\
name: refine
max_tokens: 128
min_tokens: 128
ignore_eos: true
arrival: constant
steps: [8, 32, 96]
step_duration_s: 2
warmup_s: 0.5
max_concurrency: 256
metrics_interval_s: 1
request_timeout_s: 30
prompts:
  synthetic: {input_tokens: 256, count: 50}
"""


@pytest.mark.slow
def test_refine_on_the_simulator_adds_steps_around_the_crossover(tmp_path: Path) -> None:
    import subprocess

    scenario = tmp_path / "ladder.yaml"
    scenario.write_text(LADDER)
    out = tmp_path / "sweep"
    began = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "specload", "sweep", "--server-cmd", SIM,
         "--condition", "baseline=", "--condition", f"spec={SPEC_FLAGS}",
         "--scenario", str(scenario), "--out", str(out),
         "--refine", "crossover", "--precision", "0.5", "--max-passes", "2"],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    sweep_s = time.monotonic() - began
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    refine = json.loads((out / "refine.json").read_text())
    first, second = refine["passes"]
    assert first["rates"] == [8, 32, 96] and refine["stopped"] == "the pass limit (2)"
    (bound,) = first["bounds"]
    assert bound["qps"] is not None and 8 < bound["qps"] < 96, bound
    # around the boundary: its CI (open bounds: the ladder's steps), at most 12 % beyond
    lo = (bound["lo"] if bound["lo"] is not None else 8) / 1.13
    hi = (bound["hi"] if bound["hi"] is not None else 96) * 1.13
    assert second["rates"] and all(lo <= r <= hi for r in second["rates"]), (bound, second)
    assert set(second["rates"]) - {8, 32, 96}  # loads the ladder did not have
    # both conditions ran the new rates, each on a fresh server of its own
    for name in ("baseline-p2", "spec-p2"):
        steps = json.loads((out / name / "steps.json").read_text())
        assert [s["target_qps"] for s in steps] == second["rates"]
        assert (out / name / "server.log").is_file()
        assert json.loads((out / name / "run.json").read_text())["status"] == "completed"
    _server_seconds_hold_the_runs(out, refine, sweep_s)
    assert "[refine] stopped: the pass limit (2)" in res.stdout
    # the comparison pools the passes: every rate of both, for both conditions
    report = json.loads((out / "report" / "report.json").read_text())
    rates = sorted({8, 32, 96, *second["rates"]})  # a pass may measure a ladder load again
    for label in ("baseline", "spec"):
        assert [s["target_qps"] for s in report["steps"][label]] == rates
    # the batch-size view (vllm:num_requests_running) follows the refined boundary, so the
    # proposed num_speculative_tokens_per_batch_size schedule comes from it
    # (the stop boundary, whatever the status: "helps between" has one too, and the
    # back-compatible "qps" is set for "crosses" only)
    stop = report["crossover"]["spec"]["tpot_p50"]["stops_at"]
    stop_qps = stop["qps"] if stop is not None else None
    (bx,) = [b for b in report["schedules"]["batch_crossovers"] if b["metric"] == "tpot_p50"]
    assert bx["qps"] == stop_qps and (stop_qps is None or bx["running"] is not None)


def _run_s(run_dir: Path) -> float:
    """How long the run in ``run_dir`` ran, by its run.json."""
    meta = json.loads((run_dir / "run.json").read_text())
    return float(meta["ended_at"]) - float(meta["started_at"])


def _server_seconds_hold_the_runs(out: Path, refine: dict[str, Any], sweep_s: float) -> None:
    """refine.json's server-seconds are the time its servers were up: a pass's at least the
    runs its servers served (a server is up for the whole of its run), the total at most the
    sweep command's own lifetime (one server at a time), and the sum of the passes (each is
    rounded to 0.1 s there, the total once: one rounding step apart at most)."""
    first, second = refine["passes"]
    assert second["run_dirs"] == ["baseline-p2", "spec-p2"]
    for done, dirs in ((first, ["baseline", "spec"]), (second, second["run_dirs"])):
        ran = sum(_run_s(out / d) for d in dirs)
        assert done["server_s"] >= ran - 0.05, (done["server_s"], ran)  # 0.05: its rounding
    assert refine["server_s"] <= sweep_s, (refine["server_s"], sweep_s)
    assert abs(refine["server_s"] - first["server_s"] - second["server_s"]) < 0.11, refine


def test_refine_refuses_a_trace_replay_before_any_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "t.jsonl").write_text('{"timestamp": 0, "input_tokens": 8, "output_tokens": 8}\n')
    scenario = tmp_path / "s.yaml"
    scenario.write_text("steps: [1, 2]\narrival: trace\ntrace: t.jsonl\nwarmup_s: 0\n")
    rc = main(["sweep", "--server-cmd", "false {port}", "--condition", "baseline=",
               "--scenario", str(scenario), "--out", str(tmp_path / "o"), "--refine",
               "crossover"])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and "--refine: not with arrival: trace" in err
    assert not (tmp_path / "o").exists()

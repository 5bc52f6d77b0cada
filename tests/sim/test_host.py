"""Host speed for speculation: --spec-overhead-scale, --start-jitter, --start-seed.

Cost model, engine and draws are checked directly (virtual time, deterministic); the servers
only show that the flags reach the engine and that /debug/host reports the draw.
"""

from __future__ import annotations

import math
import statistics
import subprocess
import sys

import pytest

from specload.sim import load_profile, parse_spec_config
from specload.sim.costmodel import BatchShape, spec_launch_time, step_time
from specload.sim.engine import Engine, EngineConfig
from specload.sim.host import (
    HOST_A_SCALE,
    HostDraw,
    JitterParams,
    SlowWindow,
    draw_host,
    parse_jitter,
)
from specload.sim.metrics import SimMetrics
from specload.sim.request import Request
from specload.sim.textgen import OutputText
from tests.conftest import REPO
from tests.sim.helpers import get_json, metrics

sys.path.append(str(REPO / "benchmarks"))  # virtual.py: the engine in virtual time
from virtual import random_prompt, run_poisson

H200 = load_profile("h200-llama8b")
SPEC = parse_spec_config(
    {
        "method": "draft_model",
        "num_speculative_tokens": 4,
        "synthetic_acceptance_rates": [0.8, 0.55, 0.3, 0.15],
    }
)
CALIBRATED = JitterParams.from_profile(H200)

# One decoding request (the 1 req/s regime): the spec step drafts k=4 and verifies.
SPEC_STEP = BatchShape(
    n_seqs=1,
    decode_tokens=1,
    verify_tokens=4,
    ctx_tokens=700,
    draft_k=4,
    draft_seqs=1,
    spec_seqs=1,
    spec="model",
)
BASE_STEP = BatchShape(n_seqs=1, decode_tokens=1, ctx_tokens=700)
BIG_BASE_STEP = BatchShape(
    n_seqs=40, n_prefill=2, prefill_tokens=1024, decode_tokens=38, ctx_tokens=30_000
)


# -- cost model ------------------------------------------------------------------------------
@pytest.mark.parametrize("scale", [0.5, 1.3, HOST_A_SCALE, 3.0])
def test_scale_multiplies_only_the_launch_bound_part_of_a_spec_step(scale: float) -> None:
    launch = spec_launch_time(H200, SPEC_STEP)
    assert launch == pytest.approx(
        H200.spec_step_overhead_s
        + H200.spec_per_seq_overhead_s
        + 4 * (H200.draft_step_overhead_s + H200.draft_per_seq_overhead_s)
    )
    t1 = step_time(H200, SPEC_STEP)
    assert step_time(H200, SPEC_STEP, scale) == pytest.approx(t1 + (scale - 1) * launch)
    for b in (BASE_STEP, BIG_BASE_STEP):
        assert spec_launch_time(H200, b) == 0.0
        assert step_time(H200, b, scale) == step_time(H200, b)


def test_host_a_scale_makes_the_spec_step_15_to_30_percent_slower() -> None:
    """The GPU validation: host A's spec step was 15-30 % slower than host B's; baselines matched."""
    ratio = step_time(H200, SPEC_STEP, HOST_A_SCALE) / step_time(H200, SPEC_STEP)
    assert 1.15 <= ratio <= 1.30
    # The calibration host's one-request spec step is the measured 13.5-14.5 ms.
    assert 13.0e-3 <= step_time(H200, SPEC_STEP) <= 14.5e-3


def test_host_a_scale_reproduces_spec_never_helping_and_leaves_baseline_alone() -> None:
    for rate in (1.0, 4.0, 8.0):
        n = min(max(32, int(20 * rate)), 800)
        tpot: dict[tuple[bool, float], float] = {}
        for spec in (False, True):
            for scale in (1.0, HOST_A_SCALE):
                cfg = EngineConfig(H200, SPEC if spec else None, host=HostDraw(scale=scale))
                run = run_poisson(cfg, rate, n, seed=0)
                tpot[spec, scale] = statistics.median(
                    r.tpot_s for r in run.results if r.tpot_s is not None
                )
        assert tpot[False, HOST_A_SCALE] == tpot[False, 1.0]  # baseline: identical timeline
        assert tpot[True, 1.0] < 0.9 * tpot[False, 1.0]  # calibration host: spec helps
        assert tpot[True, HOST_A_SCALE] > 0.95 * tpot[False, 1.0]  # host A: it never does


# -- draws -----------------------------------------------------------------------------------
def test_draws_are_reproducible_per_seed_and_differ_between_seeds() -> None:
    draws = [draw_host(1.0, CALIBRATED, seed) for seed in range(20)]
    assert draws == [draw_host(1.0, CALIBRATED, seed) for seed in range(20)]
    assert len({d.factor for d in draws}) == 20
    assert draw_host(1.0, CALIBRATED, 1) != draw_host(1.0, CALIBRATED, 2)
    # One seed is one host: a larger sigma stretches the same draw; the window does not move.
    wide = draw_host(1.0, parse_jitter("0.6", CALIBRATED), 7)
    base = draw_host(1.0, CALIBRATED, 7)
    assert math.log(wide.factor) == pytest.approx(2 * math.log(base.factor))
    assert wide.window == base.window


def test_no_jitter_is_the_deterministic_host() -> None:
    assert parse_jitter(None, CALIBRATED) is None
    for seed in (0, 1, 99):
        d = draw_host(1.0, None, seed)
        assert d.is_identity and d.spec_scale(0.0) == d.spec_scale(1e6) == 1.0
    assert draw_host(1.5, None, 3).spec_scale(50.0) == 1.5


def test_calibrated_jitter_over_200_seeds_matches_the_documented_spread() -> None:
    """sigma 0.3 of ln(factor), median 1, slow window in ~30 % of starts (docs/simulator.md)."""
    assert parse_jitter("calibrated", CALIBRATED) == CALIBRATED
    assert (CALIBRATED.sigma, CALIBRATED.window_prob) == (0.3, 0.3)
    draws = [draw_host(1.0, CALIBRATED, seed) for seed in range(1, 201)]
    logs = [math.log(d.factor) for d in draws]
    assert 0.22 <= statistics.stdev(logs) <= 0.38
    assert abs(statistics.median(logs)) <= 0.08
    # Host A (S 1.68) is a slow but not absurd start: a few percent of starts are that slow.
    assert 0.005 <= sum(d.factor >= HOST_A_SCALE for d in draws) / len(draws) <= 0.12
    windows = [d.window for d in draws if d.window is not None]
    assert 0.18 <= len(windows) / len(draws) <= 0.42
    for w in windows:
        assert 0 <= w.start_s < CALIBRATED.window_latest_s
        assert w.end_s - w.start_s == pytest.approx(15.0) and w.factor == 2.4
    # Inside the window, the one-request spec step goes from ~13.6 to ~20 ms (host C).
    inside = step_time(H200, SPEC_STEP, 2.4) / step_time(H200, SPEC_STEP)
    assert 1.4 <= inside <= 1.56


@pytest.mark.parametrize("value", ["abc", "-0.1", "nan", "9"])
def test_bad_jitter_values_are_rejected(value: str) -> None:
    with pytest.raises(ValueError, match="--start-jitter"):
        parse_jitter(value, CALIBRATED)


# -- the slow window in the engine ---------------------------------------------------------
class _Sink:
    def push(self, req: Request, text: str, n: int, finish: str | None, now: float) -> None:
        pass


def _step_durations(spec: bool, host: HostDraw, t0: float) -> list[tuple[float, float]]:
    """(seconds since start, duration) of every step of one long request from t0."""
    import random

    engine = Engine(
        EngineConfig(H200, SPEC if spec else None, seed=3, host=host), SimMetrics("m", 4)
    )
    engine.t0 = t0
    prompt = random_prompt(random.Random(1), 64)
    engine.add(
        Request(
            rid="r",
            prompt=prompt,
            text=OutputText(prompt, 0),
            target_len=400,
            finish_reason="length",
            sink=_Sink(),
            arrival=t0,
        )
    )
    t, out = t0, []
    while engine.has_work:
        plan = engine.plan(t)
        out.append((t - t0, plan.duration))
        t += plan.duration
        engine.complete(plan, t)
    return out


def test_slow_window_slows_spec_steps_only_inside_the_window() -> None:
    window = SlowWindow(0.5, 1.0, 2.4)
    for t0 in (0.0, 1234.5):  # the window counts from the engine's start time
        plain = _step_durations(True, HostDraw(), t0)
        slow = _step_durations(True, HostDraw(window=window), t0)
        assert plain[-1][0] > 1.5  # the request outlives the window
        launch = spec_launch_time(H200, SPEC_STEP)
        inside = outside = 0
        # Same acceptance draws, so step i has the same batch in both runs.
        for (_, d_plain), (since, d_slow) in zip(plain, slow, strict=False):
            if 0.5 <= since < 1.0 and d_plain > 10e-3:  # a decode step inside the window
                assert d_slow == pytest.approx(d_plain + 1.4 * launch, rel=1e-6)
                inside += 1
            elif since < 0.5 or since >= 1.0:
                assert d_slow == pytest.approx(d_plain, rel=1e-9)
                outside += 1
        assert inside >= 20 and outside >= 20


def test_slow_window_and_host_factor_leave_baseline_steps_alone() -> None:
    host = HostDraw(scale=2.0, factor=1.5, window=SlowWindow(0.0, 10.0, 3.0))
    assert _step_durations(False, host, 0.0) == _step_durations(False, HostDraw(), 0.0)


# -- the server ------------------------------------------------------------------------------
def _host(url: str) -> dict:
    """What a start drew (without the clock-dependent fields)."""
    d = get_json(url + "/debug/host")
    if d["slow_window"] is not None:
        d["slow_window"] = {
            k: v for k, v in d["slow_window"].items() if k not in ("start_at", "end_at")
        }
    return {
        k: v
        for k, v in d.items()
        if k not in ("started_at", "uptime_s", "in_slow_window", "current_scale")
    }


def test_server_reports_its_drawn_host_and_the_draw_follows_the_start_seed(sim_factory) -> None:
    spec = '{"method":"draft_model","num_speculative_tokens":4}'
    args = (
        "--profile",
        "h200-llama8b",
        "--speculative-config",
        spec,
        "--spec-overhead-scale",
        "1.5",
        "--start-jitter",
        "--start-seed",
        "4",
    )
    a, b = sim_factory(*args), sim_factory(*args)
    c = sim_factory(*args[:-1], "5")
    ha, hb, hc = _host(a.url), _host(b.url), _host(c.url)
    want = draw_host(1.5, CALIBRATED, 4)
    assert ha == hb  # two starts, one seed: one host, in separate processes
    assert ha["host_factor"] == want.factor and ha["start_seed"] == 4
    assert ha["effective_scale"] == pytest.approx(1.5 * want.factor)
    assert ha["spec_overhead_scale"] == 1.5 and ha["speculative"] is True
    assert ha["start_jitter"]["sigma"] == 0.3 and ha["start_jitter"]["slow_window_prob"] == 0.3
    assert hc["host_factor"] == draw_host(1.5, CALIBRATED, 5).factor != ha["host_factor"]
    full = get_json(a.url + "/debug/host")
    if want.window is not None:  # seed 4 draws a window at 13.8 s: absolute times given too
        assert full["slow_window"]["start_at"] == pytest.approx(
            full["started_at"] + want.window.start_s
        )
        assert full["in_slow_window"] is (
            want.window.start_s <= full["uptime_s"] < want.window.end_s
        )
    assert f"host_factor={want.factor:.4f}" in a.log.read_text()
    assert not [k for k in metrics(a.url) if "host" in k or "jitter" in k]


def test_server_without_host_flags_is_the_calibration_host(shared_sim) -> None:
    d = get_json(shared_sim.url + "/debug/host")
    assert d["spec_overhead_scale"] == d["host_factor"] == d["current_scale"] == 1.0
    assert d["start_jitter"] is None and d["slow_window"] is None
    assert d["in_slow_window"] is False


def test_profile_set_changes_the_calibrated_jitter(sim_factory) -> None:
    s = sim_factory(
        "--profile",
        "tiny",
        "--start-jitter",
        "calibrated",
        "--profile-set",
        "slow_window_prob=1",
        "--profile-set",
        "slow_window_latest_s=0",
    )
    d = get_json(s.url + "/debug/host")
    assert d["slow_window"]["start_s"] == 0.0 and d["slow_window"]["end_s"] == 15.0
    assert d["start_seed"] == 0


def test_host_flags_are_explained_in_help() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "specload", "sim", "--help"],
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    ).stdout
    text = " ".join(out.split())
    for needle in (
        "--spec-overhead-scale S",
        "launch-bound",
        "baseline steps are unchanged",
        "--start-jitter [SIGMA|calibrated]",
        "lognormal",
        "slow window",
        "/debug/host",
        "--start-seed N",
        "replicate",
    ):
        assert needle in text, needle

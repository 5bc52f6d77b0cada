"""The speculative step's time regime: --spec-regime, --regime-seed, sim/regime.py.

The windows, the engine and the virtual driver are checked in-process (virtual time,
deterministic); one server start shows that the flags reach it and that /debug/host serves the
truth; bad flags are one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import random
import statistics
import subprocess
import sys

import pytest

from specload.sim import load_profile, parse_spec_config
from specload.sim.costmodel import BatchShape, spec_launch_time
from specload.sim.engine import EngineConfig
from specload.sim.flags import add_arguments
from specload.sim.groundtruth import regime_truth
from specload.sim.host import HostDraw, draw_host
from specload.sim.main import settings_from_args
from specload.sim.regime import RegimeParams, TimeRegime, parse_regime
from tests.conftest import REPO
from tests.sim.helpers import get_json

sys.path.append(str(REPO / "benchmarks"))  # virtual.py: the engine in virtual time
from virtual import RequestResult, run_closed, run_poisson

H200 = load_profile("h200-llama8b")
CALIBRATED = RegimeParams.from_profile(H200)
SPEC = parse_spec_config(
    {
        "method": "draft_model",
        "num_speculative_tokens": 4,
        "synthetic_acceptance_rates": [0.8, 0.55, 0.3, 0.15],
    }
)
#: Short windows, so a few seconds of virtual load cross many of them.
SHORT = RegimeParams(mean_fast_s=0.4, mean_slow_s=0.3, factor=2.31)
ONE_REQUEST = BatchShape(
    n_seqs=1, decode_tokens=1, verify_tokens=4, ctx_tokens=700, draft_k=4, draft_seqs=1,
    spec_seqs=1, spec="model",
)  # fmt: skip


# -- the windows -----------------------------------------------------------------------------
def test_same_seed_gives_the_same_windows_whatever_the_order_of_questions() -> None:
    times = [random.Random(1).uniform(0, 300) for _ in range(2000)]
    a, b = TimeRegime(CALIBRATED, 7), TimeRegime(CALIBRATED, 7)
    forward = [a.is_slow(t) for t in sorted(times)]
    b.is_slow(299.0)  # b generates its windows far ahead first, then answers out of order
    assert [b.is_slow(t) for t in sorted(times, reverse=True)][::-1] == forward
    assert a.slow_intervals(0, 300) == b.slow_intervals(0, 300)
    assert a == b and hash(a) == hash(b)
    fresh = pickle.loads(pickle.dumps(TimeRegime(CALIBRATED, 7)))  # another process's copy
    assert fresh.slow_intervals(0, 300) == a.slow_intervals(0, 300)
    # the same regime through the host draw: the regime seed defaults to the start seed
    host = draw_host(1.0, None, 7, CALIBRATED)
    assert host.regime == a and host.regime.slow_intervals(0, 300) == a.slow_intervals(0, 300)
    assert draw_host(1.0, None, 3, CALIBRATED, regime_seed=7).regime == a


def test_different_seeds_give_different_windows() -> None:
    windows = [tuple(TimeRegime(CALIBRATED, s).slow_intervals(0, 120)) for s in range(20)]
    assert len(set(windows)) == 20
    starts = {TimeRegime(CALIBRATED, s).is_slow(0.0) for s in range(20)}
    assert starts == {True, False}  # a stationary start: some seeds begin slow


def test_long_run_slow_share_and_window_lengths_converge_to_the_parameters() -> None:
    """Over 200 000 s the share's standard error is about 0.002 (correlation time
    mean_fast x mean_slow / (mean_fast + mean_slow) = 1.9 s): 0.01 is five of them."""
    for seed in (1, 2):
        r = TimeRegime(CALIBRATED, seed)
        assert r.slow_share_between(0, 200_000) == pytest.approx(CALIBRATED.slow_share, abs=0.01)
        slow = [b - a for a, b in r.slow_intervals(0, 200_000)]
        assert statistics.mean(slow) == pytest.approx(CALIBRATED.mean_slow_s, rel=0.05)
        # exponential: the standard deviation equals the mean
        assert statistics.stdev(slow) == pytest.approx(CALIBRATED.mean_slow_s, rel=0.08)
    shares = [TimeRegime(SHORT, s).slow_share_between(50, 51) for s in range(4000)]
    assert statistics.mean(shares) == pytest.approx(SHORT.slow_share, abs=0.02)


def test_slow_intervals_are_clipped_and_match_is_slow() -> None:
    r = TimeRegime(SHORT, 5)
    windows = r.slow_intervals(10.0, 20.0)
    assert windows and all(10.0 <= a < b <= 20.0 for a, b in windows)
    for k in range(1000):
        t = 10.0 + k / 100
        assert r.is_slow(t) == any(a <= t < b for a, b in windows)
        assert r.factor_at(t) == (SHORT.factor if r.is_slow(t) else 1.0)
    assert r.slow_intervals(5.0, 5.0) == [] and r.slow_share_between(3.0, 2.0) == 0.0


# -- parameters and flags --------------------------------------------------------------------
def test_parse_regime_values() -> None:
    assert parse_regime(None, CALIBRATED) is None
    assert parse_regime("off", CALIBRATED) is None
    assert parse_regime("calibrated", CALIBRATED) == CALIBRATED
    p = parse_regime("slow_share=0.4,mean_window_s=5,factor=1.5", CALIBRATED)
    assert p == RegimeParams(6.0, 4.0, 1.5)
    assert p is not None and p.slow_share == pytest.approx(0.4) and p.mean_window_s == 5.0
    assert parse_regime("factor=3", CALIBRATED) == RegimeParams(4.7, 3.2, 3.0)
    assert parse_regime("mean_slow_s=1", CALIBRATED) == RegimeParams(4.7, 1.0, 2.31)
    share = parse_regime("slow_share=0.25", CALIBRATED)
    assert share is not None and share.mean_window_s == pytest.approx(CALIBRATED.mean_window_s)


@pytest.mark.parametrize(
    "value",
    [
        "abc",
        "slow_share=1",
        "slow_share=0",
        "factor=0",
        "factor=nan",
        "mean_window_s=-1",
        "factor=x",
        "factor=1,factor=2",
        "slow_share=0.3,mean_fast_s=2",
        "speed=2",
    ],
)
def test_bad_regime_values_are_rejected(value: str) -> None:
    with pytest.raises(ValueError, match="--spec-regime"):
        parse_regime(value, CALIBRATED)


def _settings(*argv: str) -> HostDraw:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return settings_from_args(p.parse_args(list(argv))).host


def test_flags_reach_the_host_draw() -> None:
    assert _settings().regime is None  # off by default, for every profile
    assert _settings("--spec-regime", "off").regime is None
    host = _settings("--spec-regime", "--start-seed", "4")
    assert host.regime == TimeRegime(CALIBRATED, 4)  # regime seed = start seed
    assert _settings("--spec-regime", "calibrated", "--regime-seed", "9").regime == TimeRegime(
        CALIBRATED, 9
    )
    tiny = _settings("--profile", "tiny", "--spec-regime", "factor=3")
    assert tiny.regime == TimeRegime(RegimeParams(0.47, 0.32, 3.0), 0)
    forced = _settings("--spec-regime", "--profile-set", "spec_regime_factor=1.5")
    assert forced.regime is not None and forced.regime.params.factor == 1.5


def test_describe_and_to_dict_name_the_regime() -> None:
    host = draw_host(1.0, None, 0, CALIBRATED, regime_seed=12)
    assert not host.is_identity
    text = host.describe()
    assert "spec_regime=slow_share=0.405,mean_fast_s=4.7,mean_slow_s=3.2,factor=2.31" in text
    assert "regime_seed=12" in text
    assert "spec_regime=off" in HostDraw().describe()
    d = host.to_dict()["spec_regime"]
    assert d["regime_seed"] == 12 and d["factor"] == 2.31 and d["mean_fast_s"] == 4.7
    assert HostDraw().to_dict()["spec_regime"] is None


def test_regime_truth_lists_the_realised_windows() -> None:
    assert regime_truth(None, 1000.0, 5.0) is None
    r = TimeRegime(SHORT, 3)
    truth = regime_truth(r, 1000.0, 20.0)
    assert truth is not None and truth["regime_seed"] == 3
    windows = r.slow_intervals(0, 20.0)
    assert [(w["start_s"], w["end_s"]) for w in truth["slow_windows"]] == windows
    assert all(w["start_at"] == 1000.0 + w["start_s"] for w in truth["slow_windows"])
    assert truth["realised_slow_share"] == pytest.approx(r.slow_share_between(0, 20.0))
    assert truth["in_slow_window"] is r.is_slow(20.0)
    json.dumps(truth)  # served as JSON


# -- the engine and the virtual driver --------------------------------------------------------
def _decode_steps(results: list[RequestResult]) -> list[tuple[float, float]]:
    """(start, duration) of each step after a request's first token (one request at a time)."""
    return [
        (a, b - a) for r in results for a, b in zip(r.chunk_times, r.chunk_times[1:], strict=False)
    ]


def _block(spec: bool, t0: float, host: HostDraw) -> list[tuple[float, float]]:
    cfg = EngineConfig(H200, SPEC if spec else None, seed=3)
    run = run_closed(cfg, 1, num_requests=4, seed=2, t0=t0, host=host)
    assert run.t0 == t0 and all(r.arrival >= t0 for r in run.results)
    return _decode_steps(run.results)


@pytest.mark.parametrize("t0", [0.0, 100.0, 1234.5])
def test_factor_applies_to_spec_steps_in_slow_windows_of_the_block_s_seconds(t0: float) -> None:
    """A block run from session second t0 meets the regime of [t0, ...): each spec step that
    starts in a slow window gains (factor - 1) x its launch-bound time, every other is as on
    a host without the regime."""
    regime = draw_host(1.0, None, 11, SHORT)
    assert regime.regime is not None
    plain, timed = _block(True, t0, HostDraw()), _block(True, t0, regime)
    assert len(plain) == len(timed) > 300  # same batches, step for step (c = 1)
    extra = (SHORT.factor - 1) * spec_launch_time(H200, ONE_REQUEST)  # a k = 4 step's
    slow = full = 0
    for (_, d_plain), (start, d_timed) in zip(plain, timed, strict=True):
        if regime.regime.is_slow(start):
            assert 0 < d_timed - d_plain <= extra * (1 + 1e-9)  # k < 4 near a request's end
            full += math.isclose(d_timed - d_plain, extra, rel_tol=1e-6)
            slow += 1
        else:
            assert d_timed == pytest.approx(d_plain, rel=1e-9)
    assert 0.2 * len(timed) < slow < 0.8 * len(timed) and full >= 0.9 * slow


def test_baseline_steps_are_untouched_by_the_regime() -> None:
    for t0 in (0.0, 50.0):
        assert _block(False, t0, draw_host(1.0, None, 1, SHORT)) == _block(False, t0, HostDraw())
    heavy = draw_host(1.0, None, 1, RegimeParams(0.01, 100.0, 10.0))
    cfg = EngineConfig(H200, None)
    a = run_poisson(cfg, 8.0, 100, seed=1, t0=20.0, host=heavy)
    b = run_poisson(cfg, 8.0, 100, seed=1, t0=20.0)
    assert [r.chunk_times for r in a.results] == [r.chunk_times for r in b.results]


def test_offset_shifts_the_clock_and_keeps_the_load() -> None:
    cfg = EngineConfig(H200, None)
    a = run_poisson(cfg, 4.0, 40, seed=5)
    b = run_poisson(cfg, 4.0, 40, seed=5, t0=1000.0)
    assert b.t0 == 1000.0 and b.end_s == pytest.approx(1000.0 + b.duration_s)
    assert b.duration_s == pytest.approx(a.duration_s, rel=1e-9)
    for ra, rb in zip(a.results, b.results, strict=True):
        assert rb.arrival == pytest.approx(ra.arrival + 1000.0)
        assert rb.tpot_s == pytest.approx(ra.tpot_s, rel=1e-6)


def test_closed_loop_keeps_n_requests_in_flight() -> None:
    cfg = EngineConfig(H200, SPEC)
    run = run_closed(cfg, 4, duration_s=10.0, output_len=64, seed=1, t0=30.0)
    assert run.max_running == 4
    arrivals = sorted(r.arrival for r in run.results)
    assert arrivals[:4] == [30.0] * 4 and arrivals[-1] < 40.0
    dones = sorted(r.done_at for r in run.results)
    # every request after the first four was sent the moment another finished
    assert all(any(math.isclose(a, d) for d in dones) for a in arrivals[4:])
    assert all(r.output_tokens == 64 for r in run.results)
    capped = run_closed(cfg, 2, num_requests=5, output_len=16)
    assert len(capped.results) == 5 and capped.max_running == 2
    with pytest.raises(ValueError, match="concurrency"):
        run_closed(cfg, 0, duration_s=1.0)
    with pytest.raises(ValueError, match="duration_s"):
        run_closed(cfg, 1)


# -- calibration -------------------------------------------------------------------------------
def test_profile_holds_the_committed_calibration() -> None:
    """The h200 profile's regime is the one benchmarks/calibrate_sim.py checked and committed."""
    committed = json.loads(
        (REPO / "benchmarks" / "results" / "calibration_regime.json").read_text()
    )
    assert committed["params"]["mean_fast_s"] == H200.spec_regime_mean_fast_s
    assert committed["params"]["mean_slow_s"] == H200.spec_regime_mean_slow_s
    assert committed["params"]["factor"] == H200.spec_regime_factor
    assert all(c["pass"] for c in committed["checks"])
    # one-request spec step: ~13.5 ms fast, ~19.8 ms slow (the H200's 13.6 / 19.8 ms)
    fast = spec_launch_time(H200, ONE_REQUEST)
    assert 5.5e-3 < (H200.spec_regime_factor - 1) * fast < 7.0e-3


# -- the server and the CLI ------------------------------------------------------------------
def test_server_serves_the_regime_truth_and_logs_it(sim_factory) -> None:
    s = sim_factory(
        "--profile",
        "tiny",
        "--speculative-config",
        '{"method":"draft_model","num_speculative_tokens":4}',
        "--spec-regime",
        "--regime-seed",
        "3",
    )
    d = get_json(s.url + "/debug/host")
    truth = d["spec_regime"]
    want = TimeRegime(RegimeParams(0.47, 0.32, 2.31), 3)
    assert truth["regime_seed"] == 3 and truth["mean_fast_s"] == 0.47
    windows = [(w["start_s"], w["end_s"]) for w in truth["slow_windows"]]
    assert windows == want.slow_intervals(0.0, d["uptime_s"])
    assert d["current_scale"] == want.factor_at(d["uptime_s"])
    log = s.log.read_text()
    assert "spec_regime=slow_share=" in log and "regime_seed=3" in log


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--spec-regime", "fast"], "--spec-regime fast: expected 'calibrated', 'off'"),
        (["--spec-regime", "slow_share=2"], "slow_share"),
        (["--spec-regime", "factor=0"], "factor"),
        (["--spec-regime", "--profile-set", "spec_regime_mean_slow_s=0"], "mean_slow_s"),
        (["--regime-seed", "x"], "--regime-seed x: expected an integer"),
    ],
)
def test_bad_regime_flag_exits_2_with_one_line(args: list[str], needle: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "specload", "sim", "--port", "1", *args],
        check=False,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr

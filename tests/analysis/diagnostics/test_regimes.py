"""Regimes: a flipping engine step is found with its levels, share, effect and likely cause.

The synthetic spec condition's engine step is 13 ms, and 20 ms in two 5-s windows of every
25 s (``synth_regimes``); the baseline's is a flat 6.5 ms. Every figure the analysis reports
is checked against that truth.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from analysis.synth_regimes import (
    BASE_MS,
    FAST_MS,
    SLOW_MS,
    regime_pair,
    slow_at,
    write_regime_run,
    write_telemetry,
)
from analysis.synth_rundir import Cond
from specload.analysis.compare import load_conditions
from specload.analysis.diagnostics.regime_gaps import MAX_PER_SECOND, pick, read_gaps
from specload.analysis.diagnostics.regime_model import Regime, Regimes
from specload.analysis.diagnostics.regimes import find_regimes
from specload.analysis.inputs.run_columns import load_run
from specload.report.regime_words import regime_sentence, regime_sentences, spread_line


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return regime_pair(tmp_path_factory.mktemp("regimes"))


def _regimes(*dirs: Path, baseline: str = "baseline") -> Regimes:
    groups, _ = load_conditions(list(dirs))
    return find_regimes(groups, baseline)


@pytest.fixture(scope="module")
def found(pair: tuple[Path, Path]) -> Regimes:
    return _regimes(*pair)


def _truth_share(r: Regime) -> float:
    """The share of the analysed seconds that the truth puts in the slow regime."""
    return float(np.mean([slow_at(t + 0.5) for t in r.series.t.tolist()]))


def test_flipping_step_is_bimodal_with_the_true_levels_and_share(found: Regimes) -> None:
    spec = found.by_condition["spec"]
    assert list(spec) == [("qps", 4.0), ("qps", 8.0)]
    for r in spec.values():
        assert r.bimodal and r.seconds >= 28
        assert r.fast_ms == pytest.approx(FAST_MS, rel=0.05)
        assert r.slow_ms == pytest.approx(SLOW_MS, rel=0.05)
        assert r.slow_share == pytest.approx(_truth_share(r), abs=0.07)
        assert 0.3 < r.slow_share < 0.55
        assert not r.drifting
        assert regime_sentence(r) is not None
        assert f"flipped between 13 and 20 ms at {r.key[1]:g} req/s" in regime_sentence(r)


def test_slow_seconds_are_the_true_slow_seconds(found: Regimes) -> None:
    r = found.by_condition["spec"][("qps", 4.0)]
    truth = np.array([slow_at(t + 0.5) for t in r.series.t.tolist()])
    # a second in which the regime flips is mixed: allow those alone to disagree
    edge = np.array(
        [slow_at(t + 0.05) != slow_at(t + 0.95) for t in r.series.t.tolist()], dtype=bool
    )
    assert np.array_equal(r.slow[~edge], truth[~edge])


def test_flat_baseline_is_not_bimodal_and_says_nothing(found: Regimes) -> None:
    for r in found.by_condition["baseline"].values():
        assert not r.bimodal and not r.drifting and regime_sentence(r) is None
        assert r.slow_share == 0.0
        assert r.fast_ms == pytest.approx(BASE_MS, rel=0.03)
    assert not any(s.startswith("baseline") for s in regime_sentences(found))


def test_effect_per_regime_against_the_baseline(found: Regimes) -> None:
    """Spec's TPOT is 13/3 ms in fast seconds, 20/3 in slow ones; the baseline's 6.5 ms."""
    for r in found.by_condition["spec"].values():
        e = r.effect
        assert e is not None and e.baseline == "baseline"
        assert e.baseline_tpot_p50_s == pytest.approx(BASE_MS / 1000, rel=0.03)
        assert e.fast_change == pytest.approx(FAST_MS / 3 / BASE_MS - 1, abs=0.04)
        assert e.slow_change == pytest.approx(SLOW_MS / 3 / BASE_MS - 1, abs=0.05)
        assert e.fast_requests > 20 and e.slow_requests > 20
        assert e.change is not None and e.fast_change <= e.change <= e.slow_change
        assert regime_sentence(r) is not None
        assert f"{e.fast_change * 100:+.0f} % in fast seconds" in regime_sentence(r)
        assert f"{e.slow_change * 100:+.0f} % in slow ones" in regime_sentence(r)
        assert f"at this host's {r.slow_share * 100:.0f} % slow share" in regime_sentence(r)


def test_summary_when_bimodal_at_most_steps(found: Regimes) -> None:
    assert set(found.spread) == {"spec"}
    assert spread_line(found.spread["spec"]).startswith(
        "spec's engine step had two regimes at 2 of 2"
    )
    assert regime_sentences(found)[0] == spread_line(found.spread["spec"])


def test_to_dict_is_json_ready_and_carries_the_effect(found: Regimes) -> None:
    r = orjson.loads(orjson.dumps(found.by_condition["spec"][("qps", 4.0)].to_dict()))
    assert r["bimodal"] is True and r["target_qps"] == 4.0 and r["concurrency"] is None
    assert r["effect"]["fast_change"] < -0.25 and r["telemetry"] is None
    assert len(r["series"]["t"]) == len(r["series"]["ms"]) == r["seconds"]
    assert found.by_condition["baseline"][("qps", 4.0)].to_dict()["bimodal"] is False


# --- telemetry: why the slow seconds were slow --------------------------------------------


def _gpu_idle(t: int, slow: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """The H200's slow seconds: GPU idle between kernels at full clocks, host CPU unchanged."""
    gpu = {"util_pct": 48.0 if slow else 68.0, "sm_clock_mhz": 1980.0, "clock_events": []}
    return gpu, {"cpu_idle_pct": 70.0, "loadgen_cpu_pct": 40.0, "loadgen_cores": 4}


def _host_bound(t: int, slow: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """The same GPU, with the host's CPU 20 points busier in the slow seconds."""
    gpu = {"util_pct": 48.0 if slow else 68.0, "sm_clock_mhz": 1980.0, "clock_events": []}
    return gpu, {
        "cpu_idle_pct": 50.0 if slow else 70.0,
        "loadgen_cpu_pct": 40.0,
        "loadgen_cores": 4,
    }


def _throttled(t: int, slow: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    gpu = {
        "util_pct": 97.0,
        "sm_clock_mhz": 1350.0 if slow else 1980.0,
        "clock_events": ["sw_thermal_slowdown"] if slow else ["gpu_idle"],
    }
    return gpu, {"cpu_idle_pct": 70.0, "loadgen_cpu_pct": 40.0, "loadgen_cores": 4}


def _loadgen(t: int, slow: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    gpu = {"util_pct": 40.0 if slow else 68.0, "sm_clock_mhz": 1980.0, "clock_events": []}
    return gpu, {
        "cpu_idle_pct": 5.0,
        "loadgen_cpu_pct": 395.0 if slow else 150.0,
        "loadgen_cores": 4,
    }


def _power_cap_throughout(t: int, slow: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """A reason active in every second explains nothing: utilisation decides."""
    gpu = {
        "util_pct": 45.0 if slow else 70.0,
        "sm_clock_mhz": 1975.0,
        "clock_events": ["sw_power_cap"],
    }
    return gpu, {"cpu_idle_pct": 70.0}


@pytest.mark.parametrize(
    ("second", "cause", "words"),
    [
        (_gpu_idle, "GPU idle between kernels", "GPU busy 48 % vs 68 % then, clocks unchanged, host CPU 30.0 % vs 30.0 %: GPU idle between kernels at full clocks"),
        (_host_bound, "host-bound", "GPU busy 48 % vs 68 % then, clocks unchanged, host CPU 50.0 % vs 30.0 %: host-bound"),
        (_throttled, "GPU throttled", "SM clock 1350 vs 1980 MHz; clock events sw_thermal_slowdown: GPU throttled"),
        (_loadgen, "load generator CPU-saturated", "specload's own CPU at 99 % of its cores then"),
        (_power_cap_throughout, "GPU idle between kernels", "GPU busy 45 % vs 70 % then, clocks unchanged, host CPU 30.0 % vs 30.0 %: GPU idle between kernels"),
    ],
)  # fmt: skip
def test_telemetry_names_the_cause_of_the_slow_seconds(
    pair: tuple[Path, Path], tmp_path: Path, second: Any, cause: str, words: str
) -> None:
    spec = tmp_path / "spec"
    shutil.copytree(pair[1], spec)
    write_telemetry(spec, second)
    r = _regimes(pair[0], spec).by_condition["spec"][("qps", 4.0)]
    assert r.telemetry is not None and r.telemetry.cause == cause
    assert regime_sentence(r) is not None and words in regime_sentence(r)


def test_a_run_without_telemetry_leaves_the_clause_out(found: Regimes) -> None:
    for r in found.by_condition["spec"].values():
        assert r.telemetry is None
        assert regime_sentence(r) is not None and "GPU busy" not in regime_sentence(r)


# --- drift, blocks, reading ----------------------------------------------------------------


def test_a_steady_rise_is_drifting_not_bimodal(tmp_path: Path) -> None:
    from analysis.synth_rundir import T0

    rising = write_regime_run(
        tmp_path / "rise", Cond("baseline"), lambda t: 6.0 * (1 + 0.5 * ((t - T0) % 90) / 90), qps=(4.0,), seconds=80
    )  # fmt: skip
    (r,) = _regimes(rising).by_condition["baseline"].values()
    assert r.drifting and not r.bimodal
    assert r.drift is not None and 0.15 < r.drift < 0.6


def test_blocks_of_an_interleaved_run_get_their_own_share(tmp_path: Path) -> None:
    from analysis.synth_regimes import flipping

    spec = write_regime_run(
        tmp_path / "spec", Cond("spec"), flipping, tokens_per_chunk=3, qps=(4.0,), seconds=100,
        block_every_s=25.0,
    )  # fmt: skip
    (r,) = _regimes(spec, baseline="spec").by_condition["spec"].values()
    assert len(r.blocks) >= 4
    for b in r.blocks:
        at = r.series.block == b.block
        assert b.seconds == int(at.sum())
        assert b.slow_share == pytest.approx(float(r.slow[at].mean()))


def test_a_broken_line_falls_back_to_a_scan_with_the_same_gaps(
    pair: tuple[Path, Path], tmp_path: Path
) -> None:
    spec = tmp_path / "spec"
    shutil.copytree(pair[1], spec)
    lines = (spec / "requests.jsonl").read_bytes().splitlines()
    lines.insert(len(lines) // 2, b'{"broken": ')
    (spec / "requests.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    clean, broken = read_gaps(load_run(pair[1])), read_gaps(load_run(spec))
    assert clean is not None and broken is not None
    assert np.array_equal(clean.t, broken.t) and np.array_equal(clean.gap_s, broken.gap_s)


def test_a_run_without_itl_has_no_regimes(tmp_path: Path) -> None:
    from analysis.synth_rundir import write_run

    run = write_run(tmp_path / "b", Cond("baseline"), qps=(4.0,), n=60, itl=False)
    assert read_gaps(load_run(run)) is None
    found = _regimes(run)
    assert found.by_condition == {"baseline": {}} and regime_sentences(found) == []


def test_pick_caps_requests_per_second_and_step() -> None:
    n = 50
    cols = {
        "ok": np.ones(n, dtype=bool),
        "warmup": np.zeros(n, dtype=bool),
        "content_chunks": np.full(n, 10.0),
        "sent_at": np.r_[np.full(30, 100.2), np.arange(20) + 101.0],
        "step": np.zeros(n),
    }
    picked, capped = pick(cols)
    assert picked.tolist() == list(range(MAX_PER_SECOND)) + list(range(30, 50))
    assert capped == frozenset({0.0})


def test_a_mostly_slow_step_is_still_two_regimes_at_its_true_share(tmp_path: Path) -> None:
    """80 % of seconds slow: a fixed low quantile of the per-second medians would fall into
    the slow regime and call every second fast; the split must find the fast level anyway."""
    from analysis.synth_rundir import T0

    def mostly_slow(t: float) -> float:
        return 13.0 if (t - T0) % 10.0 < 2.0 else 20.0

    run = write_regime_run(
        tmp_path / "spec", Cond("spec"), mostly_slow, tokens_per_chunk=3, qps=(4.0,), seconds=60
    )
    (r,) = _regimes(run, baseline="spec").by_condition["spec"].values()
    assert r.bimodal
    assert r.fast_ms == pytest.approx(13.0, rel=0.05) and r.slow_ms == pytest.approx(20.0, rel=0.05)
    assert r.slow_share == pytest.approx(0.8, abs=0.08)

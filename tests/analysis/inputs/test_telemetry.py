"""Telemetry read back and aggregated (``analysis/inputs/telemetry.py``) from hand-written lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specload.analysis.inputs.telemetry import (
    CpuStolen,
    GpuThrottled,
    LoadgenSaturated,
    StepTelemetry,
    TelemetrySecond,
    per_second,
    read_telemetry,
    step_telemetry,
)
from specload.recorder.rundir import TELEMETRY_FILE


def gpu(t: float, i: int, util: float, clock: float, power: float, *events: str) -> dict[str, Any]:
    return {
        "t": t,
        "source": "gpu",
        "gpu": i,
        "util_pct": util,
        "sm_clock_mhz": clock,
        "power_w": power,
        "clock_events": list(events),
    }


def host(t: float, idle: float, iowait: float, steal: float, loadgen: float) -> dict[str, Any]:
    return {
        "t": t,
        "source": "host",
        "cpu_user_pct": 100.0 - idle - iowait - steal,
        "cpu_system_pct": 0.0,
        "cpu_idle_pct": idle,
        "cpu_iowait_pct": iowait,
        "cpu_steal_pct": steal,
        "load1": 1.0,
        "loadgen_cpu_pct": loadgen,
        "loadgen_cores": 16,
    }


INFO = {"t": 99.9, "source": "info", "gpu": "nvml", "host": "procfs", "interval_s": 0.5}

#: Two GPUs sampled twice a second for three seconds: second 101 is a slow second at full
#: clocks (the host-bound signature), second 102 is throttled on GPU 1 (power cap).
LINES = [
    INFO,
    gpu(100.0, 0, 90, 1980, 300),
    gpu(100.0, 1, 80, 1980, 290),
    host(100.0, 50, 0, 0, 40),
    gpu(100.5, 0, 70, 1980, 310, "gpu_idle"),
    gpu(100.5, 1, 60, 1970, 280),
    host(100.5, 40, 5, 5, 60),
    gpu(101.0, 0, 30, 1980, 200),
    gpu(101.0, 1, 30, 1980, 200),
    host(101.0, 80, 0, 0, 20),
    gpu(102.2, 0, 90, 1980, 350),
    gpu(102.2, 1, 90, 1500, 350, "sw_power_cap"),
    {"source": "gpu", "gpu": 0, "util_pct": 1.0},  # no time: ignored
]


def test_per_second_averages_samples_and_reduces_gpus() -> None:
    seconds = per_second(LINES)
    assert list(seconds) == [100, 101, 102]
    s100 = seconds[100]
    assert s100.gpu_util_pct == pytest.approx((90 + 80 + 70 + 60) / 4)
    assert s100.sm_clock_mhz == pytest.approx((1980 + 1970) / 2)  # min per instant, then mean
    assert s100.power_w == pytest.approx(((300 + 290) + (310 + 280)) / 2)  # sum, then mean
    assert s100.clock_events == ()  # gpu_idle is no slowdown
    assert s100.host_busy_pct == pytest.approx((50 + 50) / 2)  # 100 - idle - iowait - steal
    assert s100.steal_pct == pytest.approx(2.5)
    assert s100.loadgen_cpu_pct == pytest.approx(50.0) and s100.loadgen_cores == 16
    assert seconds[101] == TelemetrySecond(
        t=101,
        gpu_util_pct=30.0,
        sm_clock_mhz=1980.0,
        power_w=400.0,
        host_busy_pct=20.0,
        steal_pct=0.0,
        loadgen_cpu_pct=20.0,
        loadgen_cores=16,
    )
    s102 = seconds[102]
    assert s102.sm_clock_mhz == 1500.0 and s102.clock_events == ("sw_power_cap",)
    assert s102.host_busy_pct is None and s102.loadgen_cores is None  # no host sample


def test_nulls_are_unknown_not_zero() -> None:
    lines = [
        {"t": 5.1, "source": "gpu", "gpu": 0, "util_pct": None, "sm_clock_mhz": 1980},
        {"t": 5.6, "source": "host", "cpu_idle_pct": None, "loadgen_cpu_pct": 12.5},
    ]
    (s,) = per_second(lines).values()
    assert s.gpu_util_pct is None and s.power_w is None and s.sm_clock_mhz == 1980.0
    assert s.host_busy_pct is None and s.loadgen_cpu_pct == 12.5


def test_step_telemetry_uses_the_measured_window_only() -> None:
    steps = [
        {"index": 0, "start": 99.0, "warmup_end": 100.5, "end": 102.0},  # warm-up cut off
        {"index": 1, "start": 102.0, "warmup_end": 102.0, "end": 103.0},
        {"index": 2, "start": 103.0, "warmup_end": 103.5, "end": 104.0},  # no samples
        {"index": 3, "start": 104.0, "warmup_end": 104.5},  # never ended
    ]
    out = step_telemetry(LINES, steps)
    assert set(out) == {0, 1}
    first = out[0]
    assert first.seconds == 2
    # second 100 keeps only its 100.5 samples; second 101 is whole
    assert first.gpu_util_pct == pytest.approx(((70 + 60) / 2 + 30) / 2)
    assert first.sm_clock_mhz_min == 1970.0 and first.sm_clock_mhz_median == 1975.0
    assert first.host_busy_pct == pytest.approx((50 + 20) / 2)
    assert first.clock_events == ()
    assert out[1].clock_events == ("sw_power_cap",) and out[1].sm_clock_mhz_min == 1500.0
    assert out[1].to_dict() == {
        "seconds": 1,
        "gpu_util_pct": 90.0,
        "sm_clock_mhz_min": 1500.0,
        "sm_clock_mhz_median": 1500.0,
        "power_w": 700.0,
        "clock_events": ["sw_power_cap"],
        "host_busy_pct": None,
        "steal_pct": None,
        "loadgen_cpu_pct": None,
        "loadgen_cores": None,
    }
    assert json.dumps(out[1].to_dict())
    assert isinstance(first, StepTelemetry)


def test_read_telemetry_is_empty_without_the_file_and_skips_a_partial_line(
    tmp_path: Path,
) -> None:
    assert read_telemetry(tmp_path) == []
    body = "".join(json.dumps(x) + "\n" for x in LINES[:4]) + '{"t": 100.5, "sour'
    (tmp_path / TELEMETRY_FILE).write_text(body)
    lines = read_telemetry(tmp_path)
    assert lines == LINES[:4]
    assert per_second(lines)[100].gpu_util_pct == 85.0


def _step(**kw: Any) -> StepTelemetry:
    base: dict[str, Any] = dict(
        seconds=10,
        gpu_util_pct=70.0,
        sm_clock_mhz_min=1980.0,
        sm_clock_mhz_median=1980.0,
        power_w=400.0,
        clock_events=(),
        host_busy_pct=30.0,
        steal_pct=0.0,
        loadgen_cpu_pct=50.0,
        loadgen_cores=4,
    )
    return StepTelemetry(**{**base, **kw})


def test_a_steps_telemetry_names_what_makes_its_timings_suspect() -> None:
    assert _step().suspects() == []
    throttled = _step(sm_clock_mhz_min=1500.0, clock_events=("sw_power_cap",))
    assert throttled.suspects() == [GpuThrottled(("sw_power_cap",), 1500.0, 1980.0)]
    # a reason without a dip (the H200's power cap flag at full clocks) is not a throttle
    assert _step(clock_events=("sw_power_cap",)).suspects() == []
    assert _step(loadgen_cpu_pct=380.0).suspects() == [LoadgenSaturated(0.95, 4)]
    assert _step(steal_pct=12.0).suspects() == [CpuStolen(12.0)]


def test_compare_warns_once_per_step_for_a_throttled_gpu(tmp_path: Path) -> None:
    from specload.analysis.compare import compare_runs
    from specload.analysis.comparison import SuspectTelemetry
    from specload.report.compare_words import comparison_warnings
    from tests.analysis.synth_regimes import regime_pair, write_telemetry

    base, spec = regime_pair(tmp_path)

    def second(t: int, slow: bool) -> tuple[dict[str, Any], dict[str, Any]]:
        clock = 1400.0 if slow else 1980.0
        events = ["hw_slowdown"] if slow else []
        return {"util_pct": 60.0, "sm_clock_mhz": clock, "clock_events": events}, {
            "cpu_idle_pct": 80.0,
            "loadgen_cpu_pct": 20.0,
            "loadgen_cores": 2,
        }

    write_telemetry(spec, second)
    c = compare_runs([base, spec], bootstrap=200)
    facts = [w for w in c.warnings if isinstance(w, SuspectTelemetry)]
    assert facts and {w.condition for w in facts} == {"spec"}
    assert all(isinstance(w.suspect, GpuThrottled) for w in facts)
    throttled = [w for w in comparison_warnings(c) if "GPU throttled" in w]
    assert throttled and all(w.startswith("spec at ") for w in throttled)
    assert len(throttled) == len({w.split(":")[0] for w in throttled})  # one per step

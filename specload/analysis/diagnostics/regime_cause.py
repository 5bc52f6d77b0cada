"""What the telemetry shows in a step's slow seconds against its fast ones: the load generator
saturated, the GPU throttled or idle between kernels, the host busier, or nothing named.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from specload.analysis.diagnostics.regime_model import (
    CAUSE_GPU_IDLE,
    CAUSE_HOST_BOUND,
    CAUSE_LOADGEN,
    CAUSE_THROTTLED,
    CAUSE_UNEXPLAINED,
    EVENT_EXCESS,
    EVENT_SHARE,
    HOST_POINTS,
    MIN_TELEMETRY_SECONDS,
    UTIL_DROP_POINTS,
    RegimeTelemetry,
    Series,
)
from specload.analysis.inputs.run_columns import RunColumns
from specload.analysis.inputs.telemetry import (
    CLOCK_DROP,
    LOADGEN_SATURATED,
    TelemetrySecond,
    loadgen_share,
    per_second,
    read_telemetry,
)
from specload.analysis.statistics.stats import quantile_sorted

__all__ = ["regime_telemetry", "telemetry_by_run"]


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _median(xs: list[float]) -> float | None:
    return quantile_sorted(sorted(xs), 0.5)


def _values(seconds: list[TelemetrySecond], get: Callable[[TelemetrySecond], Any]) -> list[float]:
    return [float(v) for s in seconds if (v := get(s)) is not None]


def _cause(t: RegimeTelemetry) -> str:
    """What the slow seconds look like, the measurement's own fault first (module doc)."""
    if t.loadgen_share_slow is not None and t.loadgen_share_slow >= LOADGEN_SATURATED:
        return CAUSE_LOADGEN
    slow_clk, fast_clk = t.sm_clock_slow_mhz, t.sm_clock_fast_mhz
    clock_drop = (
        slow_clk is not None and fast_clk is not None and slow_clk < (1 - CLOCK_DROP) * fast_clk
    )
    events = t.event_share_slow >= EVENT_SHARE
    events &= t.event_share_slow - t.event_share_fast >= EVENT_EXCESS
    if clock_drop or events:
        return CAUSE_THROTTLED
    busy_slow, busy_fast = t.gpu_util_slow_pct, t.gpu_util_fast_pct
    if (
        busy_slow is not None
        and busy_fast is not None
        and busy_fast - busy_slow >= UTIL_DROP_POINTS
    ):
        return CAUSE_HOST_BOUND if _host_shows_it(t) else CAUSE_GPU_IDLE
    return CAUSE_UNEXPLAINED


def _host_shows_it(t: RegimeTelemetry) -> bool:
    """Host evidence for "host-bound": the host's CPU or steal ``HOST_POINTS`` higher in the
    slow seconds than in the fast ones."""
    pairs = ((t.host_busy_slow_pct, t.host_busy_fast_pct), (t.steal_slow_pct, t.steal_fast_pct))
    return any(a is not None and b is not None and a - b >= HOST_POINTS for a, b in pairs)


def regime_telemetry(
    series: Series, slow: np.ndarray, tel: dict[int, dict[int, TelemetrySecond]]
) -> RegimeTelemetry | None:
    """Slow vs fast seconds in the telemetry; None when either has too few seconds in it."""
    joined = [
        (tel.get(int(r), {}).get(int(t)), bool(s))
        for r, t, s in zip(series.run, series.t, slow, strict=True)
    ]
    slow_s = [x for x, s in joined if x is not None and s]
    fast_s = [x for x, s in joined if x is not None and not s]
    if len(slow_s) < MIN_TELEMETRY_SECONDS or len(fast_s) < MIN_TELEMETRY_SECONDS:
        return None
    partial = RegimeTelemetry(
        slow_seconds=len(slow_s),
        fast_seconds=len(fast_s),
        gpu_util_slow_pct=_mean(_values(slow_s, lambda s: s.gpu_util_pct)),
        gpu_util_fast_pct=_mean(_values(fast_s, lambda s: s.gpu_util_pct)),
        sm_clock_slow_mhz=_median(_values(slow_s, lambda s: s.sm_clock_mhz)),
        sm_clock_fast_mhz=_median(_values(fast_s, lambda s: s.sm_clock_mhz)),
        clock_events=tuple(sorted({e for s in slow_s for e in s.clock_events})),
        event_share_slow=sum(bool(s.clock_events) for s in slow_s) / len(slow_s),
        event_share_fast=sum(bool(s.clock_events) for s in fast_s) / len(fast_s),
        loadgen_share_slow=_mean(_values(slow_s, loadgen_share)),
        cause="",
        host_busy_slow_pct=_mean(_values(slow_s, lambda s: s.host_busy_pct)),
        host_busy_fast_pct=_mean(_values(fast_s, lambda s: s.host_busy_pct)),
        steal_slow_pct=_mean(_values(slow_s, lambda s: s.steal_pct)),
        steal_fast_pct=_mean(_values(fast_s, lambda s: s.steal_pct)),
    )
    return replace(partial, cause=_cause(partial))


def telemetry_by_run(runs: list[RunColumns]) -> dict[int, dict[int, TelemetrySecond]]:
    """Each run's telemetry by second (runs without ``telemetry.jsonl`` left out)."""
    out = {}
    for i, run in enumerate(runs):
        if lines := read_telemetry(run.path):
            out[i] = per_second(lines)
    return out

"""GPU and host telemetry of a run, per wall-clock second and per load step.

Speculative decoding on an H200 flips between a fast and a slow regime within seconds. The
telemetry sampled alongside the measurement (``metrics/telemetry.py``) tells the three causes
of a slow second apart: the GPU throttled (SM clock drops, clock-event reasons active), the
server's host could not feed the GPU (utilisation drops at full clocks), or the load
generator's own CPU was saturated (``loadgen_cpu_pct`` near ``loadgen_cores * 100``). This
module only reads ``telemetry.jsonl`` back and aggregates it; it never imports Locust.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from specload.recorder.jsonl import iter_jsonl
from specload.recorder.rundir import TELEMETRY_FILE
from specload.recorder.steps_json import measured_window

__all__ = [
    "CLOCK_DROP",
    "LOADGEN_SATURATED",
    "STEAL_HIGH_PCT",
    "CpuStolen",
    "GpuThrottled",
    "LoadgenSaturated",
    "StepTelemetry",
    "TelemetrySecond",
    "TelemetrySuspect",
    "loadgen_share",
    "per_second",
    "read_telemetry",
    "step_telemetry",
]

#: The load generator used at least this share of its cores: its own lag is in the timings.
LOADGEN_SATURATED = 0.9
#: The SM clock this much below its typical (median) value: the GPU slowed itself down.
CLOCK_DROP = 0.05
#: Mean CPU steal above this (percent): a noisy neighbour took the host's CPU.
STEAL_HIGH_PCT = 5.0

#: Clock-event reasons that say nothing about a slow GPU (it is simply not busy).
_IGNORED_EVENTS = frozenset({"gpu_idle", "idle"})


@dataclass(frozen=True, slots=True)
class TelemetrySecond:
    """Telemetry of one wall-clock second (unix seconds, floored), averaged over its samples."""

    t: int
    gpu_util_pct: float | None = None  # mean over GPUs and samples
    sm_clock_mhz: float | None = None  # min over GPUs, mean over samples
    power_w: float | None = None  # summed over GPUs
    clock_events: tuple[str, ...] = ()  # active clock-event reason names other than idle
    host_busy_pct: float | None = None  # 100 - idle - iowait - steal, whole host
    steal_pct: float | None = None
    loadgen_cpu_pct: float | None = None  # specload's own processes, % of one core summed
    loadgen_cores: int | None = None  # cores the load generator may use


def read_telemetry(run_dir: Path) -> list[dict[str, Any]]:
    """Every line of ``run_dir/telemetry.jsonl``; ``[]`` when absent (older or GPU-less runs).

    A partial last line (a killed run) is skipped, like every JSONL file of a run dir.
    """
    path = Path(run_dir) / TELEMETRY_FILE
    if not path.exists():
        return []
    return list(iter_jsonl(path))


def _num(v: Any) -> float | None:
    """A finite float, or None: samples carry nulls for what a source does not know."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


@dataclass(slots=True)
class _GpuSample:
    """One sampling instant's GPUs (lines with the same ``t``), reduced across GPUs."""

    utils: list[float]
    clocks: list[float]
    powers: list[float]


@dataclass(slots=True)
class _SecondAcc:
    """Lines of one second, gathered before they are reduced to a ``TelemetrySecond``."""

    gpu: dict[float, _GpuSample]
    events: set[str]
    busy: list[float]
    steal: list[float]
    loadgen: list[float]
    cores: list[int]


def _new_acc() -> _SecondAcc:
    return _SecondAcc({}, set(), [], [], [], [])


def _add_gpu(acc: _SecondAcc, t: float, line: dict[str, Any]) -> None:
    s = acc.gpu.setdefault(t, _GpuSample([], [], []))
    for value, into in (
        (line.get("util_pct"), s.utils),
        (line.get("sm_clock_mhz"), s.clocks),
        (line.get("power_w"), s.powers),
    ):
        if (f := _num(value)) is not None:
            into.append(f)
    for ev in line.get("clock_events") or ():
        if isinstance(ev, str) and ev not in _IGNORED_EVENTS:
            acc.events.add(ev)


def _host_busy(line: dict[str, Any]) -> float | None:
    idle = _num(line.get("cpu_idle_pct"))
    if idle is None:
        return None
    rest = sum(_num(line.get(k)) or 0.0 for k in ("cpu_iowait_pct", "cpu_steal_pct"))
    return max(0.0, 100.0 - idle - rest)


def _add_host(acc: _SecondAcc, line: dict[str, Any]) -> None:
    if (busy := _host_busy(line)) is not None:
        acc.busy.append(busy)
    if (steal := _num(line.get("cpu_steal_pct"))) is not None:
        acc.steal.append(steal)
    if (lg := _num(line.get("loadgen_cpu_pct"))) is not None:
        acc.loadgen.append(lg)
    cores = line.get("loadgen_cores")
    if isinstance(cores, int) and not isinstance(cores, bool):
        acc.cores.append(cores)


def _reduce(t: int, acc: _SecondAcc) -> TelemetrySecond:
    samples = list(acc.gpu.values())
    utils = [u for s in samples for u in s.utils]
    clocks = [min(s.clocks) for s in samples if s.clocks]
    powers = [sum(s.powers) for s in samples if s.powers]
    return TelemetrySecond(
        t=t,
        gpu_util_pct=_mean(utils),
        sm_clock_mhz=_mean(clocks),
        power_w=_mean(powers),
        clock_events=tuple(sorted(acc.events)),
        host_busy_pct=_mean(acc.busy),
        steal_pct=_mean(acc.steal),
        loadgen_cpu_pct=_mean(acc.loadgen),
        loadgen_cores=max(acc.cores) if acc.cores else None,
    )


def per_second(lines: Iterable[dict[str, Any]]) -> dict[int, TelemetrySecond]:
    """Telemetry lines grouped by floored unix second, in time order.

    GPU lines with the same ``t`` are one sampling instant across GPUs: their SM clock is the
    minimum (the slowest GPU sets a tensor-parallel step's pace) and their power the sum; the
    second's value is the mean over its instants. ``info`` lines and lines without a time are
    ignored.
    """
    accs: dict[int, _SecondAcc] = defaultdict(_new_acc)
    for line in lines:
        t = _num(line.get("t"))
        if t is None:
            continue
        source = line.get("source")
        if source == "gpu":
            _add_gpu(accs[math.floor(t)], t, line)
        elif source == "host":
            _add_host(accs[math.floor(t)], line)
    return {t: _reduce(t, accs[t]) for t in sorted(accs)}


@dataclass(frozen=True, slots=True)
class StepTelemetry:
    """Telemetry over one step's measured window: the seconds' values, summarised.

    ``sm_clock_mhz_min`` shows the worst second (a throttle of a few seconds), the median the
    typical one; ``clock_events`` is every reason seen in any second of the window.
    """

    seconds: int
    gpu_util_pct: float | None
    sm_clock_mhz_min: float | None
    sm_clock_mhz_median: float | None
    power_w: float | None
    clock_events: tuple[str, ...]
    host_busy_pct: float | None
    steal_pct: float | None
    loadgen_cpu_pct: float | None
    loadgen_cores: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``clock_events`` as a list)."""
        d = asdict(self)
        d["clock_events"] = list(self.clock_events)
        return d

    def suspects(self) -> list[TelemetrySuspect]:
        """What in this step's telemetry makes its timings suspect (``report/compare_words.py``
        words each): the GPU throttled (its SM clock dipped with a clock-event reason
        active), the load generator saturated its cores, or the host's CPU was stolen."""
        out: list[TelemetrySuspect] = []
        lo, mid = self.sm_clock_mhz_min, self.sm_clock_mhz_median
        if self.clock_events and lo is not None and mid and lo < (1 - CLOCK_DROP) * mid:
            out.append(GpuThrottled(self.clock_events, lo, mid))
        share = _share(self.loadgen_cpu_pct, self.loadgen_cores)
        if share is not None and self.loadgen_cores and share >= LOADGEN_SATURATED:
            out.append(LoadgenSaturated(share, self.loadgen_cores))
        if self.steal_pct is not None and self.steal_pct > STEAL_HIGH_PCT:
            out.append(CpuStolen(self.steal_pct))
        return out


@dataclass(frozen=True, slots=True)
class GpuThrottled:
    """The GPU throttled in a step: its SM clock dipped below its median by more than
    ``CLOCK_DROP`` with these clock-event reasons active."""

    clock_events: tuple[str, ...]
    sm_clock_mhz_min: float
    sm_clock_mhz_median: float


@dataclass(frozen=True, slots=True)
class LoadgenSaturated:
    """The load generator used ``share`` (``LOADGEN_SATURATED`` or more) of its ``cores``."""

    share: float
    cores: int


@dataclass(frozen=True, slots=True)
class CpuStolen:
    """The host's mean CPU steal over a step, above ``STEAL_HIGH_PCT`` percent."""

    steal_pct: float


#: What in a step's telemetry makes its timings suspect (``StepTelemetry.suspects``).
TelemetrySuspect = GpuThrottled | LoadgenSaturated | CpuStolen


def _share(cpu_pct: float | None, cores: int | None) -> float | None:
    return None if cpu_pct is None or not cores else cpu_pct / (100.0 * cores)


def loadgen_share(s: TelemetrySecond) -> float | None:
    """The load generator's CPU in one second as a share of its cores (None: unknown)."""
    return _share(s.loadgen_cpu_pct, s.loadgen_cores)


def _values(seconds: list[TelemetrySecond], name: str) -> list[float]:
    return [v for s in seconds if (v := getattr(s, name)) is not None]


def _summarise(seconds: list[TelemetrySecond]) -> StepTelemetry:
    clocks = _values(seconds, "sm_clock_mhz")
    return StepTelemetry(
        seconds=len(seconds),
        gpu_util_pct=_mean(_values(seconds, "gpu_util_pct")),
        sm_clock_mhz_min=min(clocks) if clocks else None,
        sm_clock_mhz_median=statistics.median(clocks) if clocks else None,
        power_w=_mean(_values(seconds, "power_w")),
        clock_events=tuple(sorted({e for s in seconds for e in s.clock_events})),
        host_busy_pct=_mean(_values(seconds, "host_busy_pct")),
        steal_pct=_mean(_values(seconds, "steal_pct")),
        loadgen_cpu_pct=_mean(_values(seconds, "loadgen_cpu_pct")),
        loadgen_cores=max((s.loadgen_cores or 0 for s in seconds), default=0) or None,
    )


def _window(step: dict[str, Any]) -> tuple[float, float] | None:
    """The measured window when both edges are known and it is not empty."""
    start, end = measured_window(step)
    if start is None or end is None or end <= start:
        return None
    return start, end


def step_telemetry(
    lines: Iterable[dict[str, Any]], steps: list[dict[str, Any]]
) -> dict[int, StepTelemetry]:
    """Per step execution (steps.json's ``index``), over its measured window [warmup_end, end).

    A sample belongs to a step when its own time is inside the window (``warmup_end``
    itself counts, ``end`` does not), so a second cut by the window's edge keeps only its
    samples inside. Steps without a usable window (not ended; ``start`` stands in for a
    missing ``warmup_end``) or without any sample in it are left out.
    """
    timed = [(t, line) for line in lines if (t := _num(line.get("t"))) is not None]
    out: dict[int, StepTelemetry] = {}
    for step in steps:
        window = _window(step)
        index = step.get("index")
        if window is None or not isinstance(index, int) or isinstance(index, bool):
            continue
        lo, hi = window
        seconds = per_second(line for t, line in timed if lo <= t < hi)
        if seconds:
            out[index] = _summarise(list(seconds.values()))
    return out

"""What a regime reading holds: the thresholds of the rule, each step's engine-step series, and
the regimes, effects and telemetry found in them (``regimes.find_regimes`` fills them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "CAUSE_GPU_IDLE",
    "CAUSE_HOST_BOUND",
    "CAUSE_LOADGEN",
    "CAUSE_THROTTLED",
    "CAUSE_UNEXPLAINED",
    "BlockRegime",
    "DRIFT_CHANGE",
    "DRIFT_MIN_SECONDS",
    "DRIFT_RHO",
    "EVENT_EXCESS",
    "EVENT_SHARE",
    "HOST_POINTS",
    "MIN_GAPS",
    "MIN_REQUESTS",
    "MIN_SECONDS",
    "MIN_SEPARATION",
    "MIN_SHARE",
    "MIN_TELEMETRY_SECONDS",
    "Regime",
    "RegimeEffect",
    "RegimeTelemetry",
    "RegimeSpread",
    "RegimeSpread",
    "Regimes",
    "SERIES_FIELDS",
    "Series",
    "StepKey",
    "UTIL_DROP_POINTS",
]

MIN_SHARE = 0.10

MIN_SEPARATION = 1.2

MIN_SECONDS = 10

MIN_GAPS = 5

DRIFT_MIN_SECONDS = 12

DRIFT_RHO = 0.5

DRIFT_CHANGE = 0.10

#: Requests each regime needs before its p50 TPOT is quoted.
MIN_REQUESTS = 5

#: Seconds of each regime with telemetry before a cause is named.
MIN_TELEMETRY_SECONDS = 3

UTIL_DROP_POINTS = 10.0

#: Points by which the host's busy CPU or steal must rise in the slow seconds to call them
#: host-bound (``_host_shows_it``).
HOST_POINTS = 5.0

EVENT_SHARE = 0.5

EVENT_EXCESS = 0.25

#: What a step's slow seconds look like (``RegimeTelemetry.cause``, report.json's
#: ``telemetry.cause``): labels of the one classification ``regime_cause`` makes, each
#: defined once; ``report/regime_words`` words each with its figures.
CAUSE_LOADGEN = "load generator CPU-saturated"
CAUSE_THROTTLED = "GPU throttled"
CAUSE_HOST_BOUND = "host-bound"
CAUSE_GPU_IDLE = "GPU idle between kernels"
CAUSE_UNEXPLAINED = "unexplained"

#: ("qps", 8.0) for an open-loop step, ("concurrency", 8.0) for a closed-loop one.
StepKey = tuple[str, float]


@dataclass(frozen=True, slots=True)
class Series:
    """Per-second median engine step of one (condition, step): one entry per second.

    ``execution`` numbers the step executions (run dir, step index, block) in time order, so
    a plot can put them back to back."""

    t: np.ndarray
    ms: np.ndarray
    gaps: np.ndarray
    run: np.ndarray
    execution: np.ndarray
    block: np.ndarray

    def take(self, mask: np.ndarray) -> Series:
        return Series(*(getattr(self, f)[mask] for f in SERIES_FIELDS))

    def to_dict(self) -> dict[str, Any]:
        return {"t": self.t.tolist(), "ms": np.round(self.ms, 3).tolist(),
                "execution": self.execution.tolist()}  # fmt: skip


SERIES_FIELDS = ("t", "ms", "gaps", "run", "execution", "block")


@dataclass(frozen=True, slots=True)
class RegimeTelemetry:
    """Slow vs fast seconds joined with the run's telemetry, and what the slow ones look like."""

    slow_seconds: int
    fast_seconds: int
    gpu_util_slow_pct: float | None
    gpu_util_fast_pct: float | None
    sm_clock_slow_mhz: float | None
    sm_clock_fast_mhz: float | None
    #: clock-event reasons active in any slow second; the share of slow / fast seconds with one
    clock_events: tuple[str, ...]
    event_share_slow: float
    event_share_fast: float
    #: specload's own CPU in the slow seconds, as a share of the cores it may use
    loadgen_share_slow: float | None
    #: one of the ``CAUSE_*`` labels
    cause: str
    #: the whole host's busy CPU and steal (%) in the slow and the fast seconds
    host_busy_slow_pct: float | None = None
    host_busy_fast_pct: float | None = None
    steal_slow_pct: float | None = None
    steal_fast_pct: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "slow_seconds": self.slow_seconds,
            "fast_seconds": self.fast_seconds,
            "gpu_util_slow_pct": self.gpu_util_slow_pct,
            "gpu_util_fast_pct": self.gpu_util_fast_pct,
            "sm_clock_slow_mhz": self.sm_clock_slow_mhz,
            "sm_clock_fast_mhz": self.sm_clock_fast_mhz,
            "clock_events": list(self.clock_events),
            "event_share_slow": self.event_share_slow,
            "event_share_fast": self.event_share_fast,
            "loadgen_share_slow": self.loadgen_share_slow,
            "host_busy_slow_pct": self.host_busy_slow_pct,
            "host_busy_fast_pct": self.host_busy_fast_pct,
            "steal_slow_pct": self.steal_slow_pct,
            "steal_fast_pct": self.steal_fast_pct,
            "cause": self.cause,
        }


@dataclass(frozen=True, slots=True)
class RegimeEffect:
    """p50 TPOT of a condition's fast- and slow-regime requests against the baseline's."""

    baseline: str
    baseline_tpot_p50_s: float
    tpot_p50_s: float | None
    fast_requests: int
    slow_requests: int
    fast_tpot_p50_s: float | None
    slow_tpot_p50_s: float | None

    def _vs(self, v: float | None) -> float | None:
        return None if v is None else v / self.baseline_tpot_p50_s - 1.0

    @property
    def fast_change(self) -> float | None:
        return self._vs(self.fast_tpot_p50_s)

    @property
    def slow_change(self) -> float | None:
        return self._vs(self.slow_tpot_p50_s)

    @property
    def change(self) -> float | None:
        """The condition's p50 TPOT (all requests) against the baseline's: this host's mix."""
        return self._vs(self.tpot_p50_s)

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "baseline_tpot_p50_s": self.baseline_tpot_p50_s,
            "tpot_p50_s": self.tpot_p50_s,
            "fast_requests": self.fast_requests,
            "slow_requests": self.slow_requests,
            "fast_tpot_p50_s": self.fast_tpot_p50_s,
            "slow_tpot_p50_s": self.slow_tpot_p50_s,
            "fast_change": self.fast_change,
            "slow_change": self.slow_change,
            "change": self.change,
        }


@dataclass(frozen=True, slots=True)
class BlockRegime:
    """One block of an interleaved sweep (``block`` on its records) at one step."""

    block: int
    seconds: int
    slow_share: float
    median_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {"block": self.block, "seconds": self.seconds, "slow_share": self.slow_share,
                "median_ms": self.median_ms}  # fmt: skip


@dataclass(slots=True)
class Regime:
    """One condition at one step: its engine-step series and whether it has two regimes."""

    condition: str
    #: the step: its load (req/s) or its concurrency
    key: StepKey
    seconds: int
    threshold_ms: float | None
    fast_ms: float | None
    slow_ms: float | None
    slow_share: float
    bimodal: bool
    drifting: bool
    #: the largest last-third vs first-third change of a drifting execution (fraction)
    drift: float | None
    series: Series
    #: sampled requests behind the series, and whether the caps left any out
    requests: int
    sampled: bool
    blocks: list[BlockRegime] = field(default_factory=list)
    telemetry: RegimeTelemetry | None = None
    effect: RegimeEffect | None = None

    @property
    def slow(self) -> np.ndarray:
        """Per second of ``series``: slow or not."""
        if self.threshold_ms is None:
            return np.zeros(self.series.ms.shape[0], dtype=bool)
        return np.asarray(self.series.ms > self.threshold_ms)

    def to_dict(self) -> dict[str, Any]:
        """The figures; report.json adds the step's name and the sentence
        (``report/jsonout.py``)."""
        kind, value = self.key
        return {
            "condition": self.condition,
            "target_qps": value if kind == "qps" else None,
            "concurrency": int(value) if kind == "concurrency" else None,
            "seconds": self.seconds,
            "bimodal": self.bimodal,
            "fast_ms": self.fast_ms,
            "slow_ms": self.slow_ms,
            "slow_share": self.slow_share,
            "threshold_ms": self.threshold_ms,
            "drifting": self.drifting,
            "drift": self.drift,
            "requests": self.requests,
            "sampled": self.sampled,
            "blocks": [b.to_dict() for b in self.blocks],
            "telemetry": self.telemetry.to_dict() if self.telemetry else None,
            "effect": self.effect.to_dict() if self.effect else None,
            "series": self.series.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class RegimeSpread:
    """A condition with two regimes at most (more than half) of its steps: at each step its
    figures depend on how many of its seconds were slow on this host."""

    condition: str
    baseline: str
    bimodal_steps: int
    steps: int
    slow_share_lo: float
    slow_share_hi: float


@dataclass(slots=True)
class Regimes:
    """Every condition's regimes by step (its ``StepKey``), and the conditions they spread over."""

    by_condition: dict[str, dict[StepKey, Regime]] = field(default_factory=dict)
    #: condition -> its spread, when it has two regimes at most of its steps
    spread: dict[str, RegimeSpread] = field(default_factory=dict)

    def bimodal(self) -> list[Regime]:
        return [r for steps in self.by_condition.values() for r in steps.values() if r.bimodal]

"""Regimes: whether a condition's engine step flips between a fast and a slow level in time.

On an H200, vLLM's draft-model speculative step flips between ~13 ms and ~18-22 ms in
windows of 2-10 s, at any load, while the baseline's step stays flat. A step's ratio to the
baseline then depends on how many of its seconds were slow, so the report must show it.

How it is read (``analysis/diagnostics/regime_gaps.py`` reads the gaps): each non-zero chunk gap of a
successful measured request is one engine step; gaps are binned by the second they arrived
in, and each second with at least ``MIN_GAPS`` gaps gets its median: the step's engine-step
series (per condition and load step, all run dirs, repeats and blocks together).

- **slow**: the per-second medians split in two where they separate best on a log scale
  (``_cut``: Otsu's rule, whatever share of the seconds is slow); ``fast_ms`` / ``slow_ms``
  are the medians of the two groups, ``slow_share`` the share of slow seconds.
- **bimodal** (two regimes): at least ``MIN_SECONDS`` seconds, each regime holds at least
  ``MIN_SHARE`` (10 %) of them and ``slow_ms / fast_ms >= MIN_SEPARATION`` (1.2); a split
  that is not leaves every second fast (``slow_share`` 0).
- **drifting**: within one step execution (>= ``DRIFT_MIN_SECONDS`` seconds), the seconds
  of the fast regime (all seconds when not bimodal) trend: the rank correlation of their
  medians with time is at least ``DRIFT_RHO`` (0.5) in size and the last third's median
  differs from the first third's by at least ``DRIFT_CHANGE`` (10 %). Measured on the fast
  regime so that flips alone never read as drift.
- **effect** (bimodal steps of a non-baseline condition): each sampled request is fast or
  slow by its own median chunk gap against the same threshold; the p50 TPOT of each group
  against the baseline's p50 TPOT at the step, and the condition's own p50 TPOT (all its
  requests) against it: what this host's slow share gave.
- **telemetry** (``analysis/inputs/telemetry.py``, when the run has ``telemetry.jsonl``): the slow
  and fast seconds joined with it by second; the slow seconds are called "load generator
  CPU-saturated" (specload's own CPU >= 90 % of its cores), "GPU throttled" (SM clock >= 5 %
  lower, or a clock-event reason active in at least half the slow seconds and in 25 points
  fewer of the fast ones: a reason active throughout explains nothing), "GPU idle between
  kernels" (GPU busy >= 10 points lower at unchanged clocks: what the telemetry shows, not
  why), "host-bound" only when the host shows it too (its CPU >= 5 points busier, or steal
  >= 5 points higher, in the slow seconds; in the three H200 sessions pooled the host CPU
  read 7.4-9.6 %, slow and fast seconds within 0.5 points of each other at every step, so
  the GPU was idle for a reason the host counters do not show) or "unexplained".
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from specload.analysis.diagnostics.regime_gaps import RunGaps, read_gaps
from specload.analysis.inputs.run_columns import RunColumns
from specload.analysis.inputs.telemetry import (
    CLOCK_DROP,
    LOADGEN_SATURATED,
    TelemetrySecond,
    loadgen_share,
    per_second,
    read_telemetry,
)
from specload.analysis.wording import signed_pct, step_name

__all__ = [
    "RULE",
    "Regime",
    "RegimeEffect",
    "RegimeTelemetry",
    "Regimes",
    "Series",
    "find_regimes",
    "step_label",
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

#: The rule in words, as the report states it under the regime sentences.
RULE = (
    "A step's per-second median engine steps (chunk gaps) are split in two where they "
    "separate best on a log scale; it has two regimes when each group holds at least "
    f"{MIN_SHARE * 100:.0f} % of its seconds and slow/fast >= {MIN_SEPARATION:g}."
)

#: ("qps", 8.0) for an open-loop step, ("concurrency", 8.0) for a closed-loop one.
StepKey = tuple[str, float]


def step_label(key: StepKey) -> str:
    """A step key's name (``wording.step_name``): "8 req/s" or "concurrency 8"."""
    kind, value = key
    return step_name(value) if kind == "qps" else step_name(0.0, int(value))


def _step_keys(cols: dict[str, np.ndarray]) -> list[StepKey]:
    """Each record's step key (compare aligns steps by target QPS, closed loop by level)."""
    qps = np.round(cols["target_qps"], 6).tolist()
    conc = cols["concurrency"].tolist()
    return [
        ("concurrency", c) if q == 0 and math.isfinite(c) else ("qps", q)
        for q, c in zip(qps, conc, strict=True)
    ]


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
        return Series(*(getattr(self, f)[mask] for f in _SERIES_FIELDS))

    def to_dict(self) -> dict[str, Any]:
        return {"t": self.t.tolist(), "ms": np.round(self.ms, 3).tolist(),
                "execution": self.execution.tolist()}  # fmt: skip


_SERIES_FIELDS = ("t", "ms", "gaps", "run", "execution", "block")


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
    #: "load generator CPU-saturated" | "GPU throttled" | "host-bound" |
    #: "GPU idle between kernels" | "unexplained"
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

    def clause(self) -> str:
        """ "GPU busy 48 % vs 68 % then, clocks unchanged: host-bound"."""
        busy = (
            f"GPU busy {self.gpu_util_slow_pct:.0f} % vs {self.gpu_util_fast_pct:.0f} % then"
            if self.gpu_util_slow_pct is not None and self.gpu_util_fast_pct is not None
            else "GPU busy not sampled"
        )
        if self.cause == "load generator CPU-saturated":
            share = self.loadgen_share_slow or 0.0
            return (
                f"specload's own CPU at {share * 100:.0f} % of its cores then: load generator "
                "CPU-saturated (the slow seconds may be the client's)"
            )
        if self.cause == "GPU throttled":
            return f"{busy}, {self._clocks()}: GPU throttled"
        known = self.sm_clock_slow_mhz is not None and self.sm_clock_fast_mhz is not None
        clocks = "clocks unchanged" if known else "SM clock not sampled"
        host = self._host()
        if self.cause == "host-bound":
            return f"{busy}, {clocks}, {host}: host-bound"
        if self.cause == "GPU idle between kernels":
            return f"{busy}, {clocks}, {host}: GPU idle between kernels at full clocks"
        return f"{busy}, {clocks}: cause not visible in the telemetry"

    def _host(self) -> str:
        """The host's side of the slow seconds: its busy CPU (and steal, when it rose)."""
        slow, fast = self.host_busy_slow_pct, self.host_busy_fast_pct
        if slow is None or fast is None:
            return "host CPU not sampled"
        out = f"host CPU {slow:.1f} % vs {fast:.1f} %"
        if self.steal_slow_pct is not None and self.steal_fast_pct is not None:
            if self.steal_slow_pct - self.steal_fast_pct >= HOST_POINTS:
                out += f", steal {self.steal_slow_pct:.1f} % vs {self.steal_fast_pct:.1f} %"
        return out

    def _clocks(self) -> str:
        parts = []
        if self.sm_clock_slow_mhz is not None and self.sm_clock_fast_mhz is not None:
            parts.append(
                f"SM clock {self.sm_clock_slow_mhz:.0f} vs {self.sm_clock_fast_mhz:.0f} MHz"
            )
        if self.clock_events:
            parts.append("clock events " + ", ".join(self.clock_events))
        return "; ".join(parts) or "clocks dropped"


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
    step: str
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
    sentence: str | None = None

    @property
    def slow(self) -> np.ndarray:
        """Per second of ``series``: slow or not."""
        if self.threshold_ms is None:
            return np.zeros(self.series.ms.shape[0], dtype=bool)
        return np.asarray(self.series.ms > self.threshold_ms)

    def to_dict(self) -> dict[str, Any]:
        kind, value = self.key
        return {
            "condition": self.condition,
            "step": self.step,
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
            "sentence": self.sentence,
            "series": self.series.to_dict(),
        }


@dataclass(slots=True)
class Regimes:
    """Every condition's regimes by step label, and the sentences the report shows."""

    by_condition: dict[str, dict[str, Regime]] = field(default_factory=dict)
    #: condition -> one line when it has two regimes at most of its steps
    summaries: dict[str, str] = field(default_factory=dict)

    def bimodal(self) -> list[Regime]:
        return [r for steps in self.by_condition.values() for r in steps.values() if r.bimodal]

    def sentences(self) -> list[str]:
        """The summary lines, then one sentence per bimodal (condition, step)."""
        return [*self.summaries.values(), *(r.sentence for r in self.bimodal() if r.sentence)]

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {
            label: {name: r.to_dict() for name, r in steps.items()}
            for label, steps in self.by_condition.items()
        }


# --- the series --------------------------------------------------------------------------


def _group_medians(
    keys: list[np.ndarray], values: np.ndarray
) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Median and count of ``values`` per group of equal keys; groups in key order."""
    order = np.lexsort([values, *reversed(keys)])
    ks = [k[order] for k in keys]
    v = values[order]
    changed = np.zeros(v.shape[0], dtype=bool)
    changed[:1] = True
    for k in ks:
        changed[1:] |= k[1:] != k[:-1]
    starts = np.flatnonzero(changed)
    counts = np.diff(np.append(starts, v.shape[0]))
    med = (v[starts + (counts - 1) // 2] + v[starts + counts // 2]) / 2.0
    return [k[starts] for k in ks], med, counts


@dataclass(slots=True)
class _StepData:
    """What one (condition, step) gathered over its run dirs before it is judged."""

    series: list[Series] = field(default_factory=list)
    #: sampled requests: own median chunk gap (ms) and TPOT (s)
    req_ms: list[np.ndarray] = field(default_factory=list)
    req_tpot: list[np.ndarray] = field(default_factory=list)
    sampled: bool = False


def _run_series(i: int, gaps: RunGaps, cols: dict[str, np.ndarray], keep: np.ndarray) -> Series:
    """Per-second medians of the gaps ``keep`` of run ``i``, by (execution, block, second)."""
    rec = gaps.rec[gaps.req[keep]]
    block = (
        np.nan_to_num(cols["block"][rec], nan=-1.0) if "block" in cols else np.full(rec.shape, -1.0)
    )
    (execs, blocks, secs), med, n = _group_medians(
        [cols["step"][rec], block, np.floor(gaps.t[keep])], gaps.gap_s[keep]
    )
    full = n >= MIN_GAPS
    return Series(
        secs[full].astype(np.int64), med[full] * 1000.0, n[full],
        np.full(int(full.sum()), i), execs[full], blocks[full],
    )  # fmt: skip


def _requests(
    gaps: RunGaps, cols: dict[str, np.ndarray], keep: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each sampled request's median chunk gap (ms) and its TPOT (s)."""
    (reqs,), med, _ = _group_medians([gaps.req[keep]], gaps.gap_s[keep])
    return med * 1000.0, cols["tpot_s"][gaps.rec[reqs]]


def _gather(runs: list[RunColumns]) -> dict[StepKey, _StepData]:
    """Each step's series and sampled requests over the runs (those that recorded ITL)."""
    out: dict[StepKey, _StepData] = {}
    for i, run in enumerate(runs):
        gaps = read_gaps(run)
        if gaps is None:
            continue
        keys = _step_keys({k: run.cols[k][gaps.rec] for k in ("target_qps", "concurrency")})
        ids = {k: n for n, k in enumerate(dict.fromkeys(keys))}
        per_gap = np.array([ids[k] for k in keys], dtype=np.int64)[gaps.req]
        for key, n in ids.items():
            keep = per_gap == n
            data = out.setdefault(key, _StepData())
            data.series.append(_run_series(i, gaps, run.cols, keep))
            ms, tpot = _requests(gaps, run.cols, keep)
            data.req_ms.append(ms)
            data.req_tpot.append(tpot)
            data.sampled |= not gaps.capped.isdisjoint(
                run.cols["step"][gaps.rec[gaps.req[keep]]].tolist()
            )
    return out


def _joined(parts: list[Series]) -> Series:
    """One series in time order, executions numbered 0, 1, ... in that order."""
    s = Series(*(np.concatenate([getattr(p, f) for p in parts]) for f in _SERIES_FIELDS))
    s = s.take(np.lexsort([s.t, s.run]))
    ids = np.stack([s.run, s.execution, s.block], axis=1)
    new = np.ones(s.t.shape[0], dtype=bool)
    new[1:] = (ids[1:] != ids[:-1]).any(axis=1)
    return Series(s.t, s.ms, s.gaps, s.run, np.cumsum(new) - 1, s.block)


# --- judging one step ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Split:
    threshold_ms: float
    slow: np.ndarray
    fast_ms: float | None
    slow_ms: float | None
    slow_share: float

    @property
    def bimodal(self) -> bool:
        n = self.slow.shape[0]
        if n < MIN_SECONDS or self.fast_ms is None or self.slow_ms is None:
            return False
        share_ok = MIN_SHARE <= self.slow_share <= 1.0 - MIN_SHARE
        return share_ok and self.slow_ms / self.fast_ms >= MIN_SEPARATION


def _cut(log_ms: np.ndarray) -> float:
    """Where the sorted per-second medians (log scale) split best into two groups: the cut
    that maximises the between-group variance (Otsu's rule). Unlike a fixed quantile it finds
    the fast level whatever share of seconds is slow (a 20th percentile falls into the slow
    regime once more than ~80 % of a short step's seconds are slow)."""
    x = np.sort(log_ms)
    n = x.shape[0]
    k = np.arange(1, n)  # the lower group holds x[:k]
    csum = np.cumsum(x)[:-1]
    m0 = csum / k
    m1 = (x.sum() - csum) / (n - k)
    between = k * (n - k) * (m1 - m0) ** 2
    i = int(np.argmax(between))
    return float((x[i] + x[i + 1]) / 2.0)


def _split(ms: np.ndarray) -> _Split:
    """The step's seconds split into a fast and a slow group (see ``_cut``); a split that
    is not two regimes (``_Split.bimodal``) leaves every second fast."""
    if ms.shape[0] < 2 or float(ms.min()) == float(ms.max()):
        return _Split(float(ms.max()), np.zeros(ms.shape, bool), float(np.median(ms)), None, 0.0)
    threshold = math.exp(_cut(np.log(ms)))
    slow = ms > threshold
    split = _Split(
        threshold_ms=threshold,
        slow=slow,
        fast_ms=float(np.median(ms[~slow])),
        slow_ms=float(np.median(ms[slow])),
        slow_share=float(slow.mean()),
    )
    if split.bimodal:
        return split
    return _Split(threshold, np.zeros(ms.shape, bool), float(np.median(ms)), None, 0.0)


def _rank_corr(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (ties broken by order; the medians are floats)."""
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    if rx.std() == 0 or ry.std() == 0:
        return 0.0
    return float(np.corrcoef(rx, ry)[0, 1])


def _trend(t: np.ndarray, ms: np.ndarray) -> float | None:
    """Last third's median / first third's - 1 when the series trends, else None."""
    if t.shape[0] < DRIFT_MIN_SECONDS or abs(_rank_corr(t, ms)) < DRIFT_RHO:
        return None
    third = t.shape[0] // 3
    change = float(np.median(ms[-third:]) / np.median(ms[:third]) - 1.0)
    return change if abs(change) >= DRIFT_CHANGE else None


def _drift(series: Series, split: _Split) -> float | None:
    """The largest trend of any execution, on its fast seconds when the step is bimodal."""
    use = ~split.slow if split.bimodal else np.ones_like(split.slow)
    found = []
    for e in np.unique(series.execution):
        at = use & (series.execution == e)
        if (d := _trend(series.t[at], series.ms[at])) is not None:
            found.append(d)
    return max(found, key=abs) if found else None


def _blocks(series: Series, split: _Split) -> list[BlockRegime]:
    """Each interleaved block's seconds, judged by the step's threshold."""
    out = []
    for b in np.unique(series.block[series.block >= 0]).tolist():
        at = series.block == b
        share, median = float(split.slow[at].mean()), float(np.median(series.ms[at]))
        out.append(
            BlockRegime(block=int(b), seconds=int(at.sum()), slow_share=share, median_ms=median)
        )
    return out


def _judge(label: str, key: StepKey, data: _StepData) -> Regime:
    """One step's series, split into its fast and slow seconds and judged."""
    series = _joined(data.series)
    r = Regime(
        condition=label,
        step=step_label(key),
        key=key,
        seconds=int(series.t.shape[0]),
        threshold_ms=None,
        fast_ms=None,
        slow_ms=None,
        slow_share=0.0,
        bimodal=False,
        drifting=False,
        drift=None,
        series=series,
        requests=sum(x.shape[0] for x in data.req_ms),
        sampled=data.sampled,
    )
    if not r.seconds:  # no second with enough gaps
        return r
    split = _split(series.ms)
    r.threshold_ms, r.fast_ms, r.slow_ms = split.threshold_ms, split.fast_ms, split.slow_ms
    r.slow_share, r.bimodal = split.slow_share, split.bimodal
    r.drift = _drift(series, split)
    r.drifting = r.drift is not None
    r.blocks = _blocks(series, split)
    return r


# --- telemetry ---------------------------------------------------------------------------


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _median(xs: list[float]) -> float | None:
    return float(np.median(xs)) if xs else None


def _values(seconds: list[TelemetrySecond], get: Callable[[TelemetrySecond], Any]) -> list[float]:
    return [float(v) for s in seconds if (v := get(s)) is not None]


def _cause(t: RegimeTelemetry) -> str:
    """What the slow seconds look like, the measurement's own fault first (module doc)."""
    if t.loadgen_share_slow is not None and t.loadgen_share_slow >= LOADGEN_SATURATED:
        return "load generator CPU-saturated"
    slow_clk, fast_clk = t.sm_clock_slow_mhz, t.sm_clock_fast_mhz
    clock_drop = (
        slow_clk is not None and fast_clk is not None and slow_clk < (1 - CLOCK_DROP) * fast_clk
    )
    events = t.event_share_slow >= EVENT_SHARE
    events &= t.event_share_slow - t.event_share_fast >= EVENT_EXCESS
    if clock_drop or events:
        return "GPU throttled"
    busy_slow, busy_fast = t.gpu_util_slow_pct, t.gpu_util_fast_pct
    if (
        busy_slow is not None
        and busy_fast is not None
        and busy_fast - busy_slow >= UTIL_DROP_POINTS
    ):
        return "host-bound" if _host_shows_it(t) else "GPU idle between kernels"
    return "unexplained"


def _host_shows_it(t: RegimeTelemetry) -> bool:
    """Host evidence for "host-bound": the host's CPU or steal ``HOST_POINTS`` higher in the
    slow seconds than in the fast ones."""
    pairs = ((t.host_busy_slow_pct, t.host_busy_fast_pct), (t.steal_slow_pct, t.steal_fast_pct))
    return any(a is not None and b is not None and a - b >= HOST_POINTS for a, b in pairs)


def _telemetry(
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


def _telemetry_of(runs: list[RunColumns]) -> dict[int, dict[int, TelemetrySecond]]:
    """Each run's telemetry by second (runs without ``telemetry.jsonl`` left out)."""
    out = {}
    for i, run in enumerate(runs):
        if lines := read_telemetry(run.path):
            out[i] = per_second(lines)
    return out


# --- the effect on TPOT ------------------------------------------------------------------


def _tpot_p50(runs: list[RunColumns]) -> dict[StepKey, float]:
    """p50 TPOT of all successful measured requests per step (pooled, like ``StepStats``)."""
    closed, value, tpot = [], [], []
    for run in runs:
        c = run.cols
        use = c["ok"] & ~c["warmup"] & np.isfinite(c["tpot_s"]) & np.isfinite(c["target_qps"])
        qps, conc = np.round(c["target_qps"][use], 6), c["concurrency"][use]
        loop = (qps == 0) & np.isfinite(conc)
        closed.append(loop)
        value.append(np.where(loop, conc, qps))
        tpot.append(c["tpot_s"][use])
    if not runs:
        return {}
    is_closed, v, x = np.concatenate(closed), np.concatenate(value), np.concatenate(tpot)
    out = {}
    for flag in (False, True):
        for q in np.unique(v[is_closed == flag]).tolist():
            key: StepKey = ("concurrency" if flag else "qps", q)
            out[key] = float(np.median(x[(is_closed == flag) & (v == q)]))
    return out


def _p50(x: np.ndarray) -> float | None:
    x = x[np.isfinite(x)]
    return float(np.median(x)) if x.shape[0] >= MIN_REQUESTS else None


def _effect(
    regime: Regime, data: _StepData, own_p50: float | None, baseline: str, base_p50: float
) -> RegimeEffect:
    """The condition's fast- and slow-regime requests' p50 TPOT against the baseline's."""
    ms, tpot = np.concatenate(data.req_ms), np.concatenate(data.req_tpot)
    slow = ms > (regime.threshold_ms or math.inf)
    return RegimeEffect(
        baseline=baseline,
        baseline_tpot_p50_s=base_p50,
        tpot_p50_s=own_p50,
        fast_requests=int((~slow).sum()),
        slow_requests=int(slow.sum()),
        fast_tpot_p50_s=_p50(tpot[~slow]),
        slow_tpot_p50_s=_p50(tpot[slow]),
    )


# --- sentences ---------------------------------------------------------------------------


def _ms(v: float | None) -> str:
    if v is None:
        return "?"
    return f"{v:.0f}" if v >= 10 else f"{v:.1f}"


def _effect_clause(r: Regime, e: RegimeEffect) -> str:
    parts = []
    if e.fast_change is not None:
        parts.append(f"{signed_pct(e.fast_change)} in fast seconds")
    if e.slow_change is not None:
        parts.append(f"{signed_pct(e.slow_change)} in slow ones")
    head = f"p50 TPOT vs {e.baseline}: " + ", ".join(parts) if parts else ""
    if e.change is None:
        return head
    mix = f"{signed_pct(e.change)} at this host's {r.slow_share * 100:.0f} % slow share"
    return f"{head}; {mix}" if head else f"p50 TPOT vs {e.baseline}: {mix}"


def _sentence(r: Regime) -> str:
    """ "spec's engine step flipped between 13 and 20 ms at 8 req/s; 41 % of seconds slow; …"."""
    parts = [
        f"{r.condition}'s engine step flipped between {_ms(r.fast_ms)} and {_ms(r.slow_ms)} ms "
        f"at {r.step}",
        f"{r.slow_share * 100:.0f} % of seconds slow",
    ]
    if r.telemetry is not None:
        parts.append(r.telemetry.clause())
    if r.effect is not None and (clause := _effect_clause(r, r.effect)):
        parts.append(clause)
    if r.drift is not None:
        word = "slower" if r.drift > 0 else "faster"
        parts.append(f"its fast level also drifted ({abs(r.drift) * 100:.0f} % {word} by the end)")
    return "; ".join(parts)


def _summary(label: str, baseline: str, steps: dict[str, Regime]) -> str | None:
    """One line when a condition has two regimes at most (more than half) of its steps."""
    decided = [r for r in steps.values() if r.seconds >= MIN_SECONDS]
    two = [r for r in decided if r.bimodal]
    if len(two) < 2 or 2 * len(two) <= len(decided):
        return None
    shares = sorted(r.slow_share * 100 for r in two)
    against = f"its ratio to {baseline} depends" if label != baseline else "its figures depend"
    return (
        f"{label}'s engine step had two regimes at {len(two)} of {len(decided)} steps "
        f"({shares[0]:.0f}–{shares[-1]:.0f} % of seconds slow): at each step {against} "
        "on how many of its seconds were slow on this host"
    )


# --- entry point ---------------------------------------------------------------------------


def _condition(
    label: str,
    runs: list[RunColumns],
    baseline: str,
    base_p50: Callable[[], dict[StepKey, float]],
) -> dict[str, Regime]:
    """Every step of one condition judged; the effect and the telemetry (both read only when
    a step is bimodal) where it is."""
    gathered = _gather(runs)
    own_p50 = functools.cache(lambda: _tpot_p50(runs))
    telemetry: dict[int, dict[int, TelemetrySecond]] | None = None
    out = {}
    for key in sorted(gathered, key=lambda k: (k[0] != "concurrency", k[1])):
        data = gathered[key]
        r = _judge(label, key, data)
        if r.bimodal:
            if telemetry is None:
                telemetry = _telemetry_of(runs)
            r.telemetry = _telemetry(r.series, r.slow, telemetry)
            if label != baseline and key in base_p50():
                r.effect = _effect(r, data, own_p50().get(key), baseline, base_p50()[key])
            r.sentence = _sentence(r)
        out[r.step] = r
    return out


def find_regimes(groups: dict[str, list[RunColumns]], baseline: str) -> Regimes:
    """Every condition's regimes per step (run dirs of a condition pooled), with sentences.

    ``groups`` must hold the run dirs as read (``load_conditions``), not restricted views:
    the chunk gaps are read from their files, by record index (``analysis/diagnostics/regime_gaps.py``).
    """
    base_p50 = functools.cache(lambda: _tpot_p50(groups.get(baseline, [])))
    out = Regimes()
    for label, runs in groups.items():
        out.by_condition[label] = _condition(label, runs, baseline, base_p50)
        if (line := _summary(label, baseline, out.by_condition[label])) is not None:
            out.summaries[label] = line
    return out

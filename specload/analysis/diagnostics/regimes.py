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

import numpy as np

from specload.analysis.diagnostics.regime_cause import regime_telemetry, telemetry_by_run
from specload.analysis.diagnostics.regime_model import (
    MIN_REQUESTS,
    MIN_SECONDS,
    Regime,
    RegimeEffect,
    Regimes,
    RegimeSpread,
    StepKey,
)
from specload.analysis.diagnostics.regime_series import StepData, gather_steps, joined_series
from specload.analysis.diagnostics.regime_split import block_regimes, fast_drift, split_seconds
from specload.analysis.inputs.run_columns import RunColumns
from specload.analysis.inputs.telemetry import (
    TelemetrySecond,
)
from specload.analysis.statistics.stats import quantile_sorted

__all__ = ["find_regimes"]


def _judge(label: str, key: StepKey, data: StepData) -> Regime:
    """One step's series, split into its fast and slow seconds and judged."""
    series = joined_series(data.series)
    r = Regime(
        condition=label,
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
    split = split_seconds(series.ms)
    r.threshold_ms, r.fast_ms, r.slow_ms = split.threshold_ms, split.fast_ms, split.slow_ms
    r.slow_share, r.bimodal = split.slow_share, split.bimodal
    r.drift = fast_drift(series, split)
    r.drifting = r.drift is not None
    r.blocks = block_regimes(series, split)
    return r


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
    """The p50 of a regime's requests (``stats.quantile_sorted``), once it has enough."""
    x = np.sort(x[np.isfinite(x)])
    return quantile_sorted(x, 0.5) if x.shape[0] >= MIN_REQUESTS else None


def _effect(
    regime: Regime, data: StepData, own_p50: float | None, baseline: str, base_p50: float
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


def _spread(label: str, baseline: str, steps: dict[StepKey, Regime]) -> RegimeSpread | None:
    """The condition's spread when it has two regimes at most (more than half) of its steps."""
    decided = [r for r in steps.values() if r.seconds >= MIN_SECONDS]
    two = [r for r in decided if r.bimodal]
    if len(two) < 2 or 2 * len(two) <= len(decided):
        return None
    shares = sorted(r.slow_share for r in two)
    return RegimeSpread(label, baseline, len(two), len(decided), shares[0], shares[-1])


def _condition(
    label: str,
    runs: list[RunColumns],
    baseline: str,
    base_p50: Callable[[], dict[StepKey, float]],
) -> dict[StepKey, Regime]:
    """Every step of one condition judged; the effect and the telemetry (both read only when
    a step is bimodal) where it is."""
    gathered = gather_steps(runs)
    own_p50 = functools.cache(lambda: _tpot_p50(runs))
    telemetry: dict[int, dict[int, TelemetrySecond]] | None = None
    out = {}
    for key in sorted(gathered, key=lambda k: (k[0] != "concurrency", k[1])):
        data = gathered[key]
        r = _judge(label, key, data)
        if r.bimodal:
            if telemetry is None:
                telemetry = telemetry_by_run(runs)
            r.telemetry = regime_telemetry(r.series, r.slow, telemetry)
            if label != baseline and key in base_p50():
                r.effect = _effect(r, data, own_p50().get(key), baseline, base_p50()[key])
        out[key] = r
    return out


def find_regimes(groups: dict[str, list[RunColumns]], baseline: str) -> Regimes:
    """Every condition's regimes per step (run dirs of a condition pooled), keyed by the step's
    load (``StepKey``); the words for them, the steps' names included, are
    ``report.regime_words``'.

    ``groups`` must hold the run dirs as read (``load_conditions``), not restricted views:
    the chunk gaps are read from their files, by record index (``analysis/diagnostics/regime_gaps.py``).
    """
    base_p50 = functools.cache(lambda: _tpot_p50(groups.get(baseline, [])))
    out = Regimes()
    for label, runs in groups.items():
        out.by_condition[label] = _condition(label, runs, baseline, base_p50)
        if (spread := _spread(label, baseline, out.by_condition[label])) is not None:
            out.spread[label] = spread
    return out

"""Each load step's engine-step series for the regime reading: the chunk gaps of its requests
(``regime_gaps``) binned into per-second medians, over every run dir, repeat and block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from specload.analysis.diagnostics.regime_gaps import RunGaps, read_gaps
from specload.analysis.diagnostics.regime_model import MIN_GAPS, SERIES_FIELDS, Series, StepKey
from specload.analysis.inputs.run_columns import RunColumns

__all__ = ["StepData", "gather_steps", "joined_series"]


def _step_keys(cols: dict[str, np.ndarray]) -> list[StepKey]:
    """Each record's step key (compare aligns steps by target QPS, closed loop by level)."""
    qps = np.round(cols["target_qps"], 6).tolist()
    conc = cols["concurrency"].tolist()
    return [
        ("concurrency", c) if q == 0 and math.isfinite(c) else ("qps", q)
        for q, c in zip(qps, conc, strict=True)
    ]


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
class StepData:
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


def gather_steps(runs: list[RunColumns]) -> dict[StepKey, StepData]:
    """Each step's series and sampled requests over the runs (those that recorded ITL)."""
    out: dict[StepKey, StepData] = {}
    for i, run in enumerate(runs):
        gaps = read_gaps(run)
        if gaps is None:
            continue
        keys = _step_keys({k: run.cols[k][gaps.rec] for k in ("target_qps", "concurrency")})
        ids = {k: n for n, k in enumerate(dict.fromkeys(keys))}
        per_gap = np.array([ids[k] for k in keys], dtype=np.int64)[gaps.req]
        for key, n in ids.items():
            keep = per_gap == n
            data = out.setdefault(key, StepData())
            data.series.append(_run_series(i, gaps, run.cols, keep))
            ms, tpot = _requests(gaps, run.cols, keep)
            data.req_ms.append(ms)
            data.req_tpot.append(tpot)
            data.sampled |= not gaps.capped.isdisjoint(
                run.cols["step"][gaps.rec[gaps.req[keep]]].tolist()
            )
    return out


def joined_series(parts: list[Series]) -> Series:
    """One series in time order, executions numbered 0, 1, ... in that order."""
    s = Series(*(np.concatenate([getattr(p, f) for p in parts]) for f in SERIES_FIELDS))
    s = s.take(np.lexsort([s.t, s.run]))
    ids = np.stack([s.run, s.execution, s.block], axis=1)
    new = np.ones(s.t.shape[0], dtype=bool)
    new[1:] = (ids[1:] != ids[:-1]).any(axis=1)
    return Series(s.t, s.ms, s.gaps, s.run, np.cumsum(new) - 1, s.block)

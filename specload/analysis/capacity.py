"""Capacity under a latency SLO, and goodput: how much load each condition carries.

Operators ask "where does speculation stop helping" and "how much can we carry within our
SLO" in the same breath: a config that lowers TPOT at low load may give up a quarter of the
capacity. An SLO (``specload/slo.py``) is a latency percentile and its limit
(``tpot_p95=25ms``); a step *holds* it when the step's percentile is at most the limit.

**Capacity** is the highest load at which every SLO holds at every tested step up to it:
between the last step that holds them all and the first that does not, where the margin
``1 - value / limit`` of the SLO that fails there crosses 0, interpolated linearly in
log(QPS) like the crossover (``crossover.crossing_qps``). Its CI is the same search on every
bootstrap replicate of the step percentiles (two-level when a condition has several server
starts, so the CI includes the variance between starts). Status words, as for the crossover:
``within_slo_at_all_steps`` (the capacity lies above the tested range), ``violates_at_all_steps``
(even the lowest step misses an SLO: below it), ``crosses``. The *limiting* SLO is the one
whose own boundary is lowest. Incomplete steps (error budget, lost worker) are left out.

**Goodput** is vLLM's (``bench serve --goodput``): completed requests per second whose own
TTFT, TPOT and E2E each meet every SLO on that family (a request's own value against the
limit, whatever the percentile; a single-token request has no TPOT and meets a TPOT SLO, as
vLLM's 0 does), over the step's measured window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specload.analysis.crossover import Boundary, boundary_ci, crossing_qps
from specload.analysis.gates import CAPACITY_GATE, Gate, GateFailure, GateResult
from specload.analysis.run_columns import RunColumns
from specload.analysis.stats import Estimate, percentile_ci
from specload.analysis.steps import LATENCY_FIELDS, StepStats, pool_runs
from specload.errors import ConfigError
from specload.slo import Slo

__all__ = [
    "CAPACITY_STATUSES",
    "CROSSES",
    "VIOLATES",
    "WITHIN",
    "Capacity",
    "capacity_change",
    "capacity_gate",
    "capacity_sentence",
    "find_capacity",
    "goodput",
]

WITHIN, VIOLATES, CROSSES = "within_slo_at_all_steps", "violates_at_all_steps", "crosses"
CAPACITY_STATUSES = (WITHIN, VIOLATES, CROSSES)


@dataclass(slots=True)
class Capacity:
    """One condition's SLO capacity (see module doc); ``boundary.qps`` is ±inf beyond."""

    condition: str
    status: str
    boundary: Boundary
    limiting_slo: str | None
    tested_range: tuple[float, float]
    #: each used step's load and whether every SLO held there (point estimates)
    steps: list[float] = field(default_factory=list)
    within: list[bool] = field(default_factory=list)
    #: each SLO's own boundary (req/s; ±inf beyond the tested range)
    per_slo: dict[str, float] = field(default_factory=dict)
    excluded: list[float] = field(default_factory=list)
    replicates: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)

    @property
    def qps(self) -> float | None:
        """The capacity in req/s when it lies inside the tested range."""
        return self.boundary.qps if self.boundary.inside else None

    def qps_text(self) -> str:
        """``17.4``, or ``>24`` / ``<4`` beyond the tested range."""
        return self.boundary.qps_text(self.tested_range)

    def to_dict(self) -> dict[str, Any]:
        b = self.boundary.to_dict()
        return {
            "qps": b["qps"],
            "beyond": b["beyond"],
            "ci": b["ci"],
            "ci_beyond": b["ci_beyond"],
            "status": self.status,
            "limiting_slo": self.limiting_slo,
            "tested_range": list(self.tested_range),
            "steps": [
                {"target_qps": q, "within_slo": w}
                for q, w in zip(self.steps, self.within, strict=True)
            ],
            "per_slo": {m: (q if math.isfinite(q) else None) for m, q in self.per_slo.items()},
            "excluded_qps": self.excluded,
        }


def _first_failure(log_q: np.ndarray, margins: np.ndarray) -> np.ndarray:
    """Per row of ``margins`` (shape (R, S), increasing load): where the margin first drops
    below 0, interpolated from the step before; +inf when it never does, -inf at the first."""
    fails = ~(margins >= 0)  # NaN (no value) fails: nothing shows the SLO holds there
    out = np.full(margins.shape[0], np.inf)
    any_ = fails.any(axis=1)
    k = np.argmax(fails, axis=1)
    out[any_ & (k == 0)] = -np.inf
    rows = np.flatnonzero(any_ & (k > 0))
    if rows.size:
        out[rows] = crossing_qps(log_q, np.nan_to_num(margins, nan=-1.0), rows, k[rows] - 1, 0.0)
    return out


def find_capacity(
    condition: str, steps: list[StepStats], slos: list[Slo], excluded: set[float]
) -> Capacity | None:
    """The condition's capacity within ``slos`` over its complete steps; None without any."""
    used = sorted((s for s in steps if s.target_qps not in excluded), key=lambda s: s.target_qps)
    if not used or not slos:
        return None
    q = np.asarray([s.target_qps for s in used], dtype=np.float64)
    log_q = np.log(q)
    point: dict[str, float] = {}
    reps: dict[str, np.ndarray] = {}
    held = np.ones(q.size, dtype=bool)
    for slo in slos:
        values = [s.latency[slo.metric].value for s in used]
        v = np.asarray([np.nan if x is None else x for x in values], dtype=np.float64)
        margin = 1.0 - v / slo.limit_s
        held &= margin >= 0
        point[slo.metric] = float(_first_failure(log_q, margin[None, :])[0])
        b = max(
            (s.replicates[slo.metric].size for s in used if slo.metric in s.replicates), default=1
        )
        r = np.column_stack([_replicates(s, slo.metric, b) for s in used])
        reps[slo.metric] = _first_failure(log_q, 1.0 - r / slo.limit_s)
    cap = min(point.values())
    rep_cap = np.minimum.reduce(list(reps.values()))
    status = WITHIN if cap == np.inf else VIOLATES if cap == -np.inf else CROSSES
    limiting = None if status == WITHIN else min(point, key=lambda m: point[m])
    ci, beyond = boundary_ci(rep_cap)
    return Capacity(
        condition=condition,
        status=status,
        boundary=Boundary(cap, ci, beyond),
        limiting_slo=limiting,
        tested_range=(float(q[0]), float(q[-1])),
        steps=q.tolist(),
        within=held.tolist(),
        per_slo=point,
        excluded=sorted(x for x in excluded if any(s.target_qps == x for s in steps)),
        replicates=rep_cap,
    )


def _replicates(step: StepStats, metric: str, b: int) -> np.ndarray:
    """The step's ``b`` bootstrap replicates of ``metric`` (its point value where it has none)."""
    r = step.replicates.get(metric)
    if r is None or r.size != b:
        value = step.latency[metric].value
        return np.full(b, np.nan if value is None else value)
    return np.asarray(r, dtype=np.float64)


def capacity_change(cond: Capacity, base: Capacity) -> Estimate:
    """``cond / base - 1`` when both capacities lie inside the tested range, with the
    percentile CI over bootstrap replicates where both are finite; else no value."""
    if cond.qps is None or base.qps is None:
        return Estimate(None)
    n = min(cond.replicates.size, base.replicates.size)
    a, b = cond.replicates[:n], base.replicates[:n]
    ok = np.isfinite(a) & np.isfinite(b) & (b > 0)
    lo, hi = percentile_ci(a[ok] / b[ok] - 1.0) if ok.sum() >= 20 else (None, None)
    return Estimate(cond.qps / base.qps - 1.0, lo, hi)


def goodput(runs: list[RunColumns], slos: list[Slo]) -> dict[float, float | None]:
    """Per target QPS: completed requests per second meeting every per-request SLO."""
    if not runs or not slos:
        return {}
    cols, windows = pool_runs(runs)
    good = cols["ok"].astype(bool).copy()
    for slo in slos:
        x = cols[LATENCY_FIELDS[slo.family]]
        met = x <= slo.limit_s
        if slo.family == "tpot":
            met |= np.isnan(x) & good  # one output token: no TPOT, met (vLLM: 0)
        good &= met
    qps = np.round(cols["target_qps"], 6)
    out: dict[float, float | None] = {}
    for q in np.unique(qps).tolist():
        window, _ = windows.get(float(q), (0.0, 0))
        out[float(q)] = float(good[qps == q].sum()) / window if window > 0 else None
    return out


def capacity_sentence(
    cond: Capacity, base: Capacity, change: Estimate, benefit: str, slos: list[Slo]
) -> str:
    """The verdict's sentence on capacity: what the condition carries within the SLO against
    the baseline, and what it buys for it (``benefit``, from the crossover)."""
    within = ", ".join(s.text() for s in slos)
    head = f"Within the SLO ({within}), {cond.condition}"
    if cond.status == WITHIN and base.status == WITHIN:
        top = f"{cond.tested_range[1]:g}"
        return f"{head} holds it at every tested load (up to {top} req/s), as does the baseline."
    carries = (
        f"carries {cond.qps_text()} req/s against the baseline's {base.qps_text()}"
        if cond.status != VIOLATES
        else f"misses it already at {cond.tested_range[0]:g} req/s (the baseline "
        f"carries {base.qps_text()})"
    )
    if change.value is not None:
        ci = (
            f", CI {change.lo * 100:+.0f}…{change.hi * 100:+.0f} %"
            if change.lo is not None and change.hi is not None
            else ""
        )
        carries += f" ({change.value * 100:+.0f} %{ci})"
    lost = ""
    if change.value is not None and change.value < 0:
        lost = f"{-change.value * 100:.0f} % of the capacity"
    elif cond.status == VIOLATES and base.status != VIOLATES:
        lost = "all the capacity tested"
    if benefit.startswith("it buys") and lost:
        tail = f": {benefit} at the cost of {lost}"
    elif benefit and lost:
        tail = f": {benefit}, and gives up {lost}"
    elif benefit:
        tail = f": {benefit}"
    else:
        tail = f": it gives up {lost}" if lost else ""
    return f"{head} {carries}{tail}."


def capacity_gate(
    gate: Gate,
    capacity: dict[str, Capacity],
    changes: dict[str, Estimate],
    baseline: str,
    result: GateResult | None,
) -> GateResult:
    """``--max-regression capacity=PCT``: fail when a condition carries significantly less
    than the baseline within the SLO, by more than PCT percent. Beyond the tested range the
    loss is bounded by the range: a condition that misses the SLO at the lowest step against
    a baseline that holds it loses at least ``1 - lowest / baseline's``; one that holds it
    everywhere loses nothing that was tested. ConfigError when no condition has a capacity."""
    out = result or GateResult(gates=[gate], operating_qps=None)
    base = capacity.get(baseline)
    for label, cap in capacity.items():
        if label == baseline or base is None:
            continue
        out.checked += 1
        if cap.status == WITHIN or base.status == VIOLATES:
            continue  # nothing tested was lost
        upper = cap.qps if cap.qps is not None else cap.tested_range[0]
        lower = base.qps if base.qps is not None else base.tested_range[1]
        change = changes.get(label, Estimate(None))
        if change.value is not None:  # both inside: the estimate and its CI
            lost = change.value * 100 < -gate.max_pct and (change.hi is None or change.hi < 0)
            pct, ci = change.value * 100, (_pct(change.lo), _pct(change.hi))
        else:  # a bound from the tested range
            pct, ci = (upper / lower - 1) * 100, (None, None)
            hi = cap.boundary.ci[1]
            significant = cap.status == VIOLATES or (hi is not None and hi < lower)
            lost = pct < -gate.max_pct and significant
        if lost:
            out.failures.append(GateFailure(label, CAPACITY_GATE, upper, pct, gate.max_pct, ci))
    if not out.checked:
        raise ConfigError(
            "--max-regression capacity: no condition besides the baseline has a capacity "
            "(no complete step); the gate would check nothing"
        )
    return out


def _pct(x: float | None) -> float | None:
    return None if x is None else x * 100

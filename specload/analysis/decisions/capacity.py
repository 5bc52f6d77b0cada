"""Capacity under a latency SLO, and goodput: how much load each condition carries.

Operators ask "where does speculation stop helping" and "how much can we carry within our
SLO" in the same breath: a config that lowers TPOT at low load may give up a quarter of the
capacity. An SLO (``specload/core/slo.py``) is a latency percentile and its limit
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

from specload.analysis.decisions.crossover import Boundary, boundary_ci, crossing_qps
from specload.analysis.decisions.gates import CAPACITY_GATE, Gate, GateFailure, GateResult, judge
from specload.analysis.inputs.run_columns import RunColumns
from specload.analysis.statistics.stats import Estimate
from specload.analysis.statistics.steps import LATENCY_FIELDS, StepStats, pool_runs
from specload.core.errors import ConfigError
from specload.core.slo import Slo

__all__ = [
    "CAPACITY_STATUSES",
    "CROSSES",
    "VIOLATES",
    "WITHIN",
    "Capacity",
    "CapacityChange",
    "capacity_change",
    "capacity_gate",
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


#: Fewer bootstrap replicates than this give no CI for a capacity change.
MIN_REPLICATES = 20


@dataclass(frozen=True, slots=True)
class CapacityChange:
    """A condition's capacity against the baseline's, ``cond / base - 1``, with its 95 % CI.

    ``value`` is None when either capacity lies beyond the tested range. The CI keeps every
    bootstrap replicate: one whose capacity lies beyond the range stays in, ordered as ±inf
    (``crossover.boundary_ci``), instead of being dropped, which made the interval narrow and
    biased towards the replicates that happened to cross inside. Where such replicates reach
    a CI bound it is open: ``ci_beyond`` says "below"/"above" and the bound shown is the
    least the tested range proves ("<-48 %": the capacity is at most the lowest step there).
    """

    value: float | None
    ci: tuple[float | None, float | None] = (None, None)
    ci_beyond: tuple[str, str] = ("", "")

    def estimate(self) -> Estimate:
        return Estimate(self.value, *self.ci)

    def loss_near_pct(self) -> float | None:
        """The CI's end nearest to no loss, as percent lost (None when that end is open
        upwards or missing): what a capacity gate judged on the CI compares with its limit."""
        hi, side = self.ci[1], self.ci_beyond[1]
        return None if hi is None or side == "above" else -hi * 100

    def to_dict(self) -> dict[str, Any]:
        return {**self.estimate().to_dict(), "ci_beyond": list(self.ci_beyond)}


def _change_replicates(cond: Capacity, base: Capacity) -> tuple[np.ndarray, np.ndarray]:
    """Per bootstrap replicate, ``cond / base - 1`` ordered (±inf where a capacity beyond the
    range leaves it open) and bounded (each capacity clipped to its tested range: the least
    the range proves). Both beyond on the same side: no tested difference, the clipped 0."""
    n = min(cond.replicates.size, base.replicates.size)
    a, b = cond.replicates[:n], base.replicates[:n]
    bounded = np.clip(a, *cond.tested_range) / np.clip(b, *base.tested_range) - 1.0
    up = (a == np.inf) | (b == -np.inf)
    down = (a == -np.inf) | (b == np.inf)
    ordered = bounded.copy()
    ordered[up & ~down] = np.inf
    ordered[down & ~up] = -np.inf
    return ordered, bounded


def capacity_change(cond: Capacity, base: Capacity) -> CapacityChange:
    """``cond / base - 1`` (a value when both capacities lie inside the tested range) and its
    percentile CI over every bootstrap replicate (``CapacityChange``)."""
    value = cond.qps / base.qps - 1.0 if cond.qps is not None and base.qps is not None else None
    ordered, bounded = _change_replicates(cond, base)
    if ordered.size < MIN_REPLICATES:
        return CapacityChange(value)
    ci, beyond = boundary_ci(ordered)
    lo, hi = (_open_bound(i, side, ordered, bounded, ci[i]) for i, side in enumerate(beyond))
    return CapacityChange(value, (lo, hi), beyond)


def _open_bound(
    i: int, side: str, ordered: np.ndarray, bounded: np.ndarray, bound: float | None
) -> float | None:
    """CI bound ``i`` (0 lower, 1 upper); where it is open (``side``), the same percentile
    with the open replicates on that side at their range-bounded value: every value then
    lies on the near side of the truth, so the true bound lies beyond the figure."""
    if side not in ("below", "above"):
        return bound
    open_ = ordered == (-np.inf if side == "below" else np.inf)
    return boundary_ci(np.where(open_, bounded, ordered))[0][i]


def times100(ci: tuple[float | None, float | None]) -> tuple[float | None, float | None]:
    return (None if ci[0] is None else ci[0] * 100, None if ci[1] is None else ci[1] * 100)


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


def capacity_gate(
    gate: Gate,
    capacity: dict[str, Capacity],
    changes: dict[str, CapacityChange],
    baseline: str,
    result: GateResult | None,
) -> GateResult:
    """``--max-regression capacity=PCT``: fail when a condition carries significantly less
    than the baseline within the SLO, with the whole CI of the change beyond PCT percent
    lost (``--gate-on point``: its estimate), by ``gates.judge`` like every gate. Beyond the
    tested range the loss is bounded by the range: a condition that misses the SLO at the
    lowest step against a baseline that holds it loses at least ``1 - lowest / baseline's``;
    one that holds it everywhere loses nothing that was tested. ConfigError when no
    condition has a capacity."""
    out = result or GateResult(gates=[gate], operating_qps=None)
    base = capacity.get(baseline)
    for label, cap in capacity.items():
        if label == baseline or base is None:
            continue
        out.checked += 1
        if cap.status == WITHIN or base.status == VIOLATES:
            continue  # nothing tested was lost
        change = changes.get(label, CapacityChange(None))
        pct, significant = _loss(cap, base, change)
        found = GateFailure(
            label, CAPACITY_GATE, cap.qps if cap.qps is not None else cap.tested_range[0], pct,
            gate.max_pct, times100(change.ci), change.ci_beyond, on=gate.on,
        )  # fmt: skip
        out.record(judge(gate, -pct, change.loss_near_pct(), significant), found)
    if not out.checked:
        raise ConfigError(
            "--max-regression capacity: no condition besides the baseline has a capacity "
            "(no complete step); the gate would check nothing"
        )
    return out


def _loss(cap: Capacity, base: Capacity, change: CapacityChange) -> tuple[float, bool]:
    """The change in percent (both inside: the estimate; else the bound the tested range
    gives) and whether it is significantly a loss (its CI lies below 0; beyond the range,
    the capacity's CI lies below the baseline's, or it misses the SLO at the lowest step)."""
    if change.value is not None:
        hi = change.ci[1]
        return change.value * 100, hi is None or (hi < 0 and change.ci_beyond[1] != "above")
    upper = cap.qps if cap.qps is not None else cap.tested_range[0]
    lower = base.qps if base.qps is not None else base.tested_range[1]
    hi = cap.boundary.ci[1]
    return (upper / lower - 1) * 100, cap.status == VIOLATES or (hi is not None and hi < lower)

"""Where a condition starts and stops helping, with a CI for each boundary.

The input is one classification per step (``analysis.statistics.effect``: helps / hurts / same / undecided /
incomplete) plus the point gains ``1 - condition / baseline`` and their bootstrap
replicates. Incomplete steps are left out first (``excluded``). The pattern of helping steps
over increasing load gives the status:

- ``always_helps``: every step helps.
- ``never_helps``: no step helps (it may hurt, or change nothing significant).
- ``crosses``: helps from the lowest step up to some step, not above: *stops helping* at the
  boundary (speculative decoding on a memory-bound server).
- ``starts_helping``: does not help at the lowest step(s), helps from some step up to the
  highest tested load (prefix caching, whose saved prefill matters more as load grows).
- ``helps_between``: helps in one band of steps with steps that do not help on both sides.
- ``mixed``: helping steps with non-helping steps between them: no boundary is claimed.

A boundary is where the estimated gain crosses ``min_gain``, interpolated linearly in gain
against log(QPS) between two adjacent steps (load steps are usually geometric, and latency
curves are smoother in log-QPS): the stop is the first crossing downwards after the helping
band, the start the last crossing upwards before it (``boundaries``). A step between the two
that does not help significantly but whose estimated gain is still above ``min_gain`` lies
before the stop. Where the gain never crosses inside the tested range, the boundary lies
beyond it (``inf``).

Its CI is the pair of tested loads that bracket it (``bracket``): for a stop, the highest step
up to which every step from the band's first one surely reaches ``min_gain`` (its ratio's CI
lies entirely at or below ``1 - min_gain``) and the first step above the band that surely
does not (its CI lies entirely above). Why not the bootstrap replicates' boundaries: over
server starts their percentile interval held the simulator's true stop in 2 of 11 sessions
(``docs/report.md``). The bracket holds the true boundary whenever
both steps' CIs hold their true ratios on the side that matters and the true gain falls
through the minimum once between them, so it covers at least as often as the steps' CIs do;
its width is the ladder's spacing there, which ``protocol.refine`` narrows with new steps.
A side with no such step is open: the bound is None (JSON null) and ``ci_beyond`` says on
which side of the tested range it lies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from specload.analysis.statistics.effect import (
    HELPS,
    HURTS,
    INCOMPLETE,
    NA,
    SAME,
    UNDECIDED,
    reaches_gain,
)
from specload.analysis.statistics.stats import Estimate

__all__ = [
    "ALWAYS",
    "BETWEEN",
    "CROSSES",
    "MIXED",
    "NEVER",
    "STARTS",
    "STATUSES",
    "Boundary",
    "Crossover",
    "StartEffects",
    "boundary_ci",
    "bracket",
    "crossing_qps",
    "find_crossover",
    "pattern_status",
    "split_steps",
]

ALWAYS, NEVER, CROSSES = "always_helps", "never_helps", "crosses"
STARTS, BETWEEN, MIXED = "starts_helping", "helps_between", "mixed"
STATUSES = (ALWAYS, NEVER, CROSSES, STARTS, BETWEEN, MIXED)


@dataclass(slots=True)
class Boundary:
    """One boundary (start or stop of helping) in req/s, with its CI: the tested loads that
    bracket it (``bracket``)."""

    qps: float
    ci: tuple[float | None, float | None] = (None, None)
    ci_beyond: tuple[str, str] = ("", "")

    @property
    def inside(self) -> bool:
        """False when the gain never crosses inside the tested range (``qps`` is ±inf)."""
        return math.isfinite(self.qps)

    def to_dict(self) -> dict[str, object]:
        """JSON: a boundary beyond the tested range is null with ``beyond`` saying the side."""
        beyond = "" if self.inside else "above" if self.qps > 0 else "below"
        return {
            "qps": self.qps if self.inside else None,
            "beyond": beyond,
            "ci": list(self.ci),
            "ci_beyond": list(self.ci_beyond),
        }


@dataclass(frozen=True, slots=True)
class StartEffects:
    """One server start analysed alone against the baseline (``analysis.decisions.replicates``): its
    status and the effect, by the one rule, at each step it could classify (incomplete steps
    and steps without data left out).

    Starts agree by these effects, step by step, never by their status label: two "mixed"
    starts may help at different loads, and one that helps at 24 req/s while another hurts
    there disagree whatever their labels say.
    """

    run: str
    status: str
    effects: dict[float, str]

    def to_dict(self) -> dict[str, object]:
        return {
            "run": self.run,
            "status": self.status,
            "steps": [{"target_qps": q, "effect": e} for q, e in self.effects.items()],
        }


def split_steps(starts: list[StartEffects]) -> list[float]:
    """The loads at which the starts contradict each other: one helps and another hurts (a
    load one start lacks is not one).

    Starts add up, they do not veto: a start whose own interval shows no change (same, undecided)
    beside one that helps (or hurts) says less, not the opposite, and the interval over the
    starts' pooled units decides. Only effects of opposite signs, each beyond its start's own CI,
    cannot both be right, and then no answer is claimed there.
    """
    loads = sorted({q for s in starts for q in s.effects})
    return [q for q in loads if {HELPS, HURTS} <= {s.effects[q] for s in starts if q in s.effects}]


@dataclass(slots=True)
class Crossover:
    """How ``condition`` compares with ``baseline`` on ``metric`` over the tested loads."""

    metric: str
    condition: str
    baseline: str
    status: str
    tested_range: tuple[float, float]
    #: target QPS of the steps used (incomplete ones left out) and their effects
    steps: list[float]
    effects: list[str]
    #: where helping stops (``crosses``, ``helps_between``) and starts (``starts_helping``,
    #: ``helps_between``)
    stop: Boundary | None = None
    start: Boundary | None = None
    #: gain (1 - ratio) at the lowest used step, and the largest gain among helping steps
    first_gain: Estimate = field(default_factory=lambda: Estimate(None))
    peak_gain: Estimate = field(default_factory=lambda: Estimate(None))
    peak_qps: float | None = None
    #: share of bootstrap replicates that help at exactly the steps the estimate helps at
    #: (so with the same status; two "mixed" patterns on other steps do not agree)
    agreement: float = 0.0
    #: steps left out because their data is incomplete (error budget, lost worker)
    excluded: list[float] = field(default_factory=list)
    #: steps whose ratio CI straddles ``1 - min_gain``: neither surely reaching the minimum
    #: gain nor surely not (``_sure``); more server starts there decide them (``protocol.refine``)
    unsure: list[float] = field(default_factory=list)
    #: each replicate (server start) analysed alone; empty with one replicate
    starts: list[StartEffects] = field(default_factory=list)
    #: the condition's achieved load per target QPS, to name a step as "16 (17.1)"
    achieved: dict[float, float | None] = field(default_factory=dict)

    @property
    def helping(self) -> list[float]:
        return [q for q, e in zip(self.steps, self.effects, strict=False) if e == HELPS]

    @property
    def last_helping_qps(self) -> float | None:
        return self.helping[-1] if self.helping else None

    @property
    def first_helping_qps(self) -> float | None:
        return self.helping[0] if self.helping else None

    @property
    def replicate_statuses(self) -> list[str]:
        """The status of each server start analysed alone (for words, never for agreement)."""
        return [s.status for s in self.starts]

    @property
    def split_qps(self) -> list[float]:
        """Loads where the server starts analysed alone show different effects."""
        return split_steps(self.starts)

    @property
    def replicates_agree(self) -> bool:
        """True when every step has the same effect (the one rule) in every server start."""
        return not self.split_qps

    @property
    def undecided_steps(self) -> list[float]:
        """Steps whose effect is ``undecided`` (``analysis.statistics.effect``)."""
        return [q for q, e in zip(self.steps, self.effects, strict=False) if e == UNDECIDED]

    @property
    def settled(self) -> bool:
        """The steps the status rests on are decided: a boundary has a helping step on one
        side and a step shown not to help (the same, or hurts) on the other, with only
        undecided steps between (the boundary lies among them); "never helps" needs every
        step decided. An undecided step beyond a decided boundary does not unsettle it."""
        decided_no = [e in (SAME, HURTS) for e in self.effects]
        if self.status in (NEVER, MIXED):
            return UNDECIDED not in self.effects
        if self.status == ALWAYS:
            return True
        helps = [e == HELPS for e in self.effects]
        first, last = helps.index(True), len(helps) - 1 - helps[::-1].index(True)
        ok = True
        if self.status in (CROSSES, BETWEEN):
            ok = ok and any(decided_no[last + 1 :])
        if self.status in (STARTS, BETWEEN):
            ok = ok and any(decided_no[:first])
        return ok

    @property
    def decided(self) -> bool:
        """A boundary (or always/never) resting on decided steps that every replicate agrees
        on: safe to act on."""
        return self.replicates_agree and self.status != MIXED and self.settled

    # Back-compatible views of the stop boundary (``qps`` / ``ci`` were the crossover).
    @property
    def qps(self) -> float | None:
        """Where it stops helping (``crosses``), when that lies inside the tested range."""
        s = self.stop
        return s.qps if s is not None and s.inside and self.status == CROSSES else None

    @property
    def ci(self) -> tuple[float | None, float | None]:
        b = self.stop if self.status in (CROSSES, BETWEEN) else self.start
        return b.ci if b is not None else (None, None)

    @property
    def ci_beyond(self) -> tuple[str, str]:
        b = self.stop if self.status in (CROSSES, BETWEEN) else self.start
        return b.ci_beyond if b is not None else ("", "")

    def to_dict(self) -> dict[str, object]:
        return {
            "metric": self.metric,
            "condition": self.condition,
            "baseline": self.baseline,
            "status": self.status,
            "qps": self.qps,
            "ci": list(self.ci),
            "ci_beyond": list(self.ci_beyond),
            "stops_at": self.stop.to_dict() if self.stop is not None else None,
            "starts_at": self.start.to_dict() if self.start is not None else None,
            "tested_range": list(self.tested_range),
            "steps": [
                {"target_qps": q, "effect": e}
                for q, e in zip(self.steps, self.effects, strict=False)
            ],
            "excluded_qps": self.excluded,
            "unsure_qps": self.unsure,
            "undecided_qps": self.undecided_steps,
            "settled": self.settled,
            "last_helping_qps": self.last_helping_qps,
            "first_helping_qps": self.first_helping_qps,
            "first_gain": self.first_gain.to_dict(),
            "peak_gain": self.peak_gain.to_dict(),
            "peak_qps": self.peak_qps,
            "agreement": self.agreement,
            "replicate_statuses": self.replicate_statuses,
            "replicate_starts": [s.to_dict() for s in self.starts],
            "split_qps": self.split_qps,
            "replicates_agree": self.replicates_agree,
            "decided": self.decided,
        }


def _statuses(helps: np.ndarray) -> np.ndarray:
    """The status of each row of helping steps (shape (R, S), increasing load)."""
    n, s = helps.shape
    any_ = helps.any(axis=1)
    first = np.argmax(helps, axis=1)
    last = s - 1 - np.argmax(helps[:, ::-1], axis=1)
    contiguous = helps.sum(axis=1) == last - first + 1
    out = np.full(n, MIXED, dtype=object)
    out[contiguous & (first > 0) & (last < s - 1)] = BETWEEN
    out[contiguous & (first > 0) & (last == s - 1)] = STARTS
    out[contiguous & (first == 0)] = CROSSES
    out[helps.all(axis=1)] = ALWAYS
    out[~any_] = NEVER
    return out


def pattern_status(helps: list[bool]) -> str:
    """The status of a pattern of helping steps, in increasing load."""
    return str(_statuses(np.asarray([helps], dtype=bool))[0])


def crossing_qps(
    log_q: np.ndarray, gains: np.ndarray, rows: np.ndarray, i: np.ndarray, level: float
) -> np.ndarray:
    """QPS between steps i and i+1 of each row where the gain crosses ``level``, log(QPS)."""
    g0, g1 = gains[rows, i], gains[rows, i + 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(g0 == g1, 0.5, (g0 - level) / (g0 - g1))
    t = np.clip(t, 0.0, 1.0)
    qps: np.ndarray = np.exp(log_q[i] + t * (log_q[i + 1] - log_q[i]))
    return qps


def boundaries(
    log_q: np.ndarray, gains: np.ndarray, helps: np.ndarray, level: float
) -> tuple[np.ndarray, np.ndarray]:
    """(start, stop) of each row of gains (shape (R, S)), one search for the point estimate
    and for every bootstrap replicate.

    The stop is the first crossing of ``level`` downwards after the first step that helps
    (the end of the lowest helping band), the start the last crossing upwards before the last
    one (the beginning of the highest band); for a contiguous band, as the point estimate's
    always is, that is after its last and before its first step. ±inf where the gain does
    not cross inside the tested range. A row that never helps: start +inf, stop -inf (beyond the range
    on the side that says so).
    """
    n, s = gains.shape
    cols = np.arange(s)
    starts, stops = np.full(n, np.inf), np.full(n, -np.inf)
    any_ = helps.any(axis=1)
    first = np.argmax(helps, axis=1)
    last = s - 1 - np.argmax(helps[:, ::-1], axis=1)
    below = gains < level
    after = below & (cols[None, :] > first[:, None])
    has_stop = any_ & after.any(axis=1)
    stops[any_] = np.inf
    rows = np.flatnonzero(has_stop)
    stops[rows] = crossing_qps(log_q, gains, rows, np.argmax(after[rows], axis=1) - 1, level)
    before = below & (cols[None, :] < last[:, None])
    has_start = any_ & before.any(axis=1)
    starts[any_] = -np.inf
    rows = np.flatnonzero(has_start)
    k = s - 1 - np.argmax(before[rows, ::-1], axis=1)
    starts[rows] = crossing_qps(log_q, gains, rows, k, level)
    return starts, stops


def boundary_ci(points: np.ndarray) -> tuple[tuple[float | None, float | None], tuple[str, str]]:
    """Percentile CI of replicate boundaries; infinite bounds become None plus their side.

    Outward order statistics, not ``stats.quantile_sorted``'s interpolation: each end is a
    boundary some replicate found, or infinite (no boundary on that side), which no
    interpolation between a finite and an infinite one could give."""
    pts = np.sort(points[~np.isnan(points)])
    if pts.size == 0:
        return (None, None), ("", "")
    lo = pts[math.floor(0.025 * (pts.size - 1))]
    hi = pts[math.ceil(0.975 * (pts.size - 1))]

    def side(v: float) -> str:
        return "" if np.isfinite(v) else "above" if v > 0 else "below"

    return (
        (float(lo) if np.isfinite(lo) else None, float(hi) if np.isfinite(hi) else None),
        (side(lo), side(hi)),
    )


def _replicate_helps(reps: np.ndarray, min_gain: float) -> np.ndarray:
    """The helping steps of every complete bootstrap replicate (rows of ``reps``; a row with a
    missing value left out); a replicate step helps when its gain reaches ``min_gain``."""
    ok = ~np.isnan(reps).any(axis=1)
    helps: np.ndarray = reaches_gain(reps[ok], min_gain)
    return helps


def _sure(ratios: list[Estimate], min_gain: float) -> tuple[list[bool], list[bool]]:
    """Per step: whether its ratio's CI lies entirely on the helping side of the minimum gain
    (the true gain reaches it), and whether it lies entirely on the other side (it does not)."""
    yes = [r.hi is not None and bool(reaches_gain(r.hi, min_gain)) for r in ratios]
    no = [r.lo is not None and not reaches_gain(r.lo, min_gain) for r in ratios]
    return yes, no


def bracket(
    q: list[float], ratios: list[Estimate], helps: list[bool], min_gain: float, side: str
) -> tuple[tuple[float | None, float | None], tuple[str, str]]:
    """The CI of the band's stop (``side="stop"``) or start (``"start"``): the tested loads
    that bracket it (module doc). ``helps`` is the steps' pattern, one contiguous band."""
    yes, no = _sure(ratios, min_gain)
    first = helps.index(True)
    last = len(helps) - 1 - helps[::-1].index(True)
    lo_i: int | None
    hi_i: int | None
    if side == "stop":  # sure from the band's first step up; the first sure miss above it
        up = first
        while up < len(q) and yes[up]:
            up += 1
        lo_i = up - 1 if up > first else None
        hi_i = next((k for k in range(last + 1, len(q)) if no[k]), None)
    else:  # sure from the band's last step down; the first sure miss below it
        down = last
        while down >= 0 and yes[down]:
            down -= 1
        hi_i = down + 1 if down < last else None
        lo_i = next((k for k in range(first - 1, -1, -1) if no[k]), None)
    lo = q[lo_i] if lo_i is not None else None
    hi = q[hi_i] if hi_i is not None else None
    return (lo, hi), ("below" if lo is None else "", "above" if hi is None else "")


def nested(start: Boundary, stop: Boundary) -> tuple[Boundary, Boundary]:
    """A band's two CIs made consistent: helping cannot stop before it starts, so the stop's
    interval does not reach below the start's and the start's not above the stop's (read
    apart, "starts at 8.9 (CI 4–16), stops at 10.6 (CI <4–16)" had the stop possibly first)."""
    (s_lo, s_hi), (s_below, s_above) = start.ci, start.ci_beyond
    (t_lo, t_hi), (t_below, t_above) = stop.ci, stop.ci_beyond
    if s_lo is not None and (t_lo is None or t_lo < s_lo):
        t_lo, t_below = s_lo, ""
    if t_hi is not None and (s_hi is None or s_hi > t_hi):
        s_hi, s_above = t_hi, ""
    return (
        replace(start, ci=(s_lo, s_hi), ci_beyond=(s_below, s_above)),
        replace(stop, ci=(t_lo, t_hi), ci_beyond=(t_below, t_above)),
    )


def _gain(ratio: Estimate) -> Estimate:
    """A ratio's estimate as a gain (1 - ratio): the bounds swap."""
    return Estimate(
        1.0 - ratio.value if ratio.value is not None else None,
        1.0 - ratio.hi if ratio.hi is not None else None,
        1.0 - ratio.lo if ratio.lo is not None else None,
    )


def find_crossover(
    metric: str,
    condition: str,
    baseline: str,
    qps: list[float],
    ratios: list[Estimate],
    effects: list[str],
    reps: np.ndarray,
    min_gain: float,
) -> Crossover | None:
    """Status and boundaries of one condition on one metric; ``reps`` has shape (B, steps).

    ``effects`` are the steps' classifications (``analysis.statistics.effect``); steps without data or
    incomplete are left out. None when no step is left.
    """
    keep = [
        i
        for i, (r, e) in enumerate(zip(ratios, effects, strict=False))
        if r.value is not None and e not in (NA, INCOMPLETE)
    ]
    excluded = [qps[i] for i, e in enumerate(effects) if e == INCOMPLETE]
    if not keep:
        return None
    q = np.asarray([qps[i] for i in keep], dtype=np.float64)
    used = [effects[i] for i in keep]
    helps = [e == HELPS for e in used]
    gains = 1.0 - np.asarray([ratios[i].value for i in keep], dtype=np.float64)
    log_q = np.log(q)
    status = pattern_status(helps)
    rep_helps = _replicate_helps(reps[:, keep], min_gain)
    same = (rep_helps == np.asarray(helps)).all(axis=1)
    x = Crossover(
        metric=metric, condition=condition, baseline=baseline, status=status,
        tested_range=(float(q[0]), float(q[-1])), steps=q.tolist(), effects=used,
        first_gain=_gain(ratios[keep[0]]), excluded=excluded,
        agreement=float(np.mean(same)) if same.size else 0.0,
    )  # fmt: skip
    used_q, used_r = q.tolist(), [ratios[i] for i in keep]
    yes, no = _sure(used_r, min_gain)
    x.unsure = [v for v, y, n in zip(used_q, yes, no, strict=True) if not (y or n)]
    if status in (CROSSES, STARTS, BETWEEN):
        start, stop = boundaries(log_q, gains[None, :], np.asarray([helps]), min_gain)
        if status in (STARTS, BETWEEN):
            ci, beyond = bracket(used_q, used_r, helps, min_gain, "start")
            x.start = Boundary(float(start[0]), ci, beyond)
        if status in (CROSSES, BETWEEN):
            ci, beyond = bracket(used_q, used_r, helps, min_gain, "stop")
            x.stop = Boundary(float(stop[0]), ci, beyond)
        if x.start is not None and x.stop is not None:
            x.start, x.stop = nested(x.start, x.stop)
    helping = [i for i, h in zip(keep, helps, strict=False) if h]
    if helping:
        best = max(helping, key=lambda i: 1.0 - (ratios[i].value or 1.0))
        x.peak_gain, x.peak_qps = _gain(ratios[best]), float(qps[best])
    return x

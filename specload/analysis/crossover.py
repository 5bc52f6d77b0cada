"""The crossover: the lowest load at which a condition stops beating the baseline, with a CI.

Per aligned step the *gain* on a latency metric is ``1 - condition / baseline`` (0.2 = 20 %
faster). A step *helps* when the gain is at least ``min_gain``. The crossover is the first
step that does not help right after one that does, interpolated linearly in gain against
log(QPS) between the two (load steps are usually geometric, and latency curves are smoother
in log-QPS). Statuses: ``always_helps`` (every tested step helps), ``never_helps`` (none
does), ``crosses``. A condition that does not help at the lowest step but does higher up is
reported as crossing at the lowest step, with a note: it stops helping at or below there.

The CI applies the same rule to every bootstrap replicate of the per-step ratios. A
replicate that always helps crosses "above the tested range" and one that never helps
"below it"; a CI bound that lands there is None (JSON null) and ``ci_beyond`` says on which
side ("above" / "below"): the data cannot bound it inside the tested range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from specload.analysis.stats import Estimate

__all__ = ["Crossover", "classify", "classify_significant", "crossover_points", "find_crossover"]

ALWAYS, NEVER, CROSSES = "always_helps", "never_helps", "crosses"


@dataclass(slots=True)
class Crossover:
    """Where ``condition`` stops beating ``baseline`` on ``metric``; QPS in requests/s."""

    metric: str
    condition: str
    baseline: str
    status: str
    qps: float | None
    ci: tuple[float | None, float | None]
    tested_range: tuple[float, float]
    last_helping_qps: float | None
    first_gain: Estimate
    agreement: float
    note: str = ""
    ci_beyond: tuple[str, str] = ("", "")

    def ci_text(self) -> str:
        """ "16–21", "<2–4.7", ">32–>32": a None bound shown as beyond the tested range."""
        parts = []
        for v, side in zip(self.ci, self.ci_beyond):
            if v is not None:
                parts.append(f"{v:.3g}")
            else:
                parts.append(
                    f">{self.tested_range[1]:g}"
                    if side == "above"
                    else f"<{self.tested_range[0]:g}"
                )
        return "–".join(parts)

    def to_dict(self) -> dict[str, object]:
        return {
            "metric": self.metric,
            "condition": self.condition,
            "baseline": self.baseline,
            "qps": self.qps,
            "ci": list(self.ci),
            "status": self.status,
            "tested_range": list(self.tested_range),
            "last_helping_qps": self.last_helping_qps,
            "first_gain": self.first_gain.to_dict(),
            "agreement": self.agreement,
            "note": self.note,
            "ci_beyond": list(self.ci_beyond),
        }


def classify(ratio: float | None, min_gain: float) -> str:
    """``better`` / ``worse`` / ``same`` for a condition/baseline ratio of a latency metric."""
    if ratio is None:
        return "n/a"
    if 1.0 - ratio >= min_gain:
        return "better"
    if ratio - 1.0 >= min_gain:
        return "worse"
    return "same"


#: Smallest change the verdict's side clauses and the p50/p95 flags mention (fraction).
SIDE_MIN = 0.03


def classify_significant(ratio: Estimate, min_gain: float) -> str:
    """Like ``classify``, but only when the 95 % CI excludes 1 and the change is at least
    ``SIDE_MIN``: noise is "same".

    Used for the verdict's side clauses and the p50/p95 flags, which must not fire on noise
    (with ``--min-gain 0`` every wobble would otherwise be "better" or "worse").
    """
    verdict = classify(ratio.value, max(min_gain, SIDE_MIN))
    if verdict == "better" and (ratio.hi is None or ratio.hi >= 1.0):
        return "same"
    if verdict == "worse" and (ratio.lo is None or ratio.lo <= 1.0):
        return "same"
    return verdict


def crossover_points(log_qps: np.ndarray, gains: np.ndarray, min_gain: float) -> np.ndarray:
    """Crossover QPS for each row of ``gains`` (shape (R, S)); +inf always, -inf never helps."""
    helps = gains >= min_gain
    nan_rows = np.isnan(gains).any(axis=1)
    out = np.full(gains.shape[0], np.nan)
    all_help = helps.all(axis=1)
    none_help = ~helps.any(axis=1)
    out[all_help] = np.inf
    out[none_help] = -np.inf
    if gains.shape[1] >= 2:
        trans = helps[:, :-1] & ~helps[:, 1:]
        has = trans.any(axis=1) & ~all_help & ~none_help
        i = np.argmax(trans, axis=1)  # index of the last helping step before the drop
        rows = np.nonzero(has)[0]
        g0, g1 = gains[rows, i[rows]], gains[rows, i[rows] + 1]
        t = (g0 - min_gain) / np.where(g0 == g1, 1.0, g0 - g1)
        x = log_qps[i[rows]] + np.clip(t, 0.0, 1.0) * (log_qps[i[rows] + 1] - log_qps[i[rows]])
        out[rows] = np.exp(x)
        rest = ~has & ~all_help & ~none_help
        out[rest] = math.exp(log_qps[0])
    out[nan_rows] = np.nan
    return out


def _beyond(v: float) -> str:
    return "" if np.isfinite(v) else "above" if v > 0 else "below"


def _ci(points: np.ndarray) -> tuple[tuple[float | None, float | None], tuple[str, str]]:
    """Percentile CI of replicate crossovers; infinite bounds become None plus their side."""
    pts = np.sort(points[~np.isnan(points)])
    if pts.size == 0:
        return (None, None), ("", "")
    lo = pts[math.floor(0.025 * (pts.size - 1))]
    hi = pts[math.ceil(0.975 * (pts.size - 1))]
    return (
        (float(lo) if np.isfinite(lo) else None, float(hi) if np.isfinite(hi) else None),
        (_beyond(lo), _beyond(hi)),
    )


def _status(point: float) -> str:
    return ALWAYS if point == np.inf else NEVER if point == -np.inf else CROSSES


def _last_help_and_note(
    status: str, point: float, q: np.ndarray, gains: np.ndarray, min_gain: float
) -> tuple[float | None, str]:
    """The last helping step before the crossover, and a note on irregular patterns."""
    helps = gains >= min_gain
    if status == ALWAYS:
        return float(q[-1]), ""
    if status != CROSSES:
        return None, ""
    before = q[(q <= point) & helps]
    last_help = float(before[-1]) if before.size else None
    if not helps[0]:
        listed = ", ".join(f"{v:g}" for v in q[helps])
        return (
            last_help,
            f"does not help at the lowest step ({q[0]:g} req/s) but helps at {listed} req/s",
        )
    again = q[(q > point) & helps]
    if again.size:
        return last_help, "helps again at a higher step: " + ", ".join(
            f"{v:g}" for v in again
        ) + " req/s"
    return last_help, ""


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
    reps: np.ndarray,
    min_gain: float,
) -> Crossover | None:
    """Crossover of one condition on one metric; ``reps`` has shape (B, steps). None: no data."""
    keep = [i for i, r in enumerate(ratios) if r.value is not None]
    if not keep:
        return None
    q = np.asarray([qps[i] for i in keep], dtype=np.float64)
    gains = 1.0 - np.asarray([ratios[i].value for i in keep], dtype=np.float64)
    log_q = np.log(q)
    point = float(crossover_points(log_q, gains[None, :], min_gain)[0])
    rep_pts = crossover_points(log_q, 1.0 - reps[:, keep], min_gain)
    status = _status(point)
    last_help, note = _last_help_and_note(status, point, q, gains, min_gain)
    finite = rep_pts[~np.isnan(rep_pts)]
    agreement = float(np.mean([_status(p) == status for p in finite])) if finite.size else 0.0
    ci, beyond = _ci(rep_pts)
    return Crossover(
        metric=metric, condition=condition, baseline=baseline, status=status,
        qps=point if status == CROSSES else None, ci=ci, ci_beyond=beyond,
        tested_range=(float(q[0]), float(q[-1])), last_helping_qps=last_help,
        first_gain=_gain(ratios[keep[0]]), agreement=agreement, note=note,
    )  # fmt: skip

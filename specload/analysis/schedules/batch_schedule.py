"""From "where speculation stops helping" to the batch-size schedule that turns it off there.

vLLM 0.26 chooses k per step from the number of running requests
(``num_speculative_tokens_per_batch_size``), not from the request rate, so a crossover in
req/s has to be translated into a batch size first. Per step of the speculative condition we
know the running batch from ``vllm:num_requests_running`` (the per-step maximum of the
scrapes; without /metrics, Little's law on the client's figures: requests/s × p50 E2E).
The crossover's batch is that curve (made non-decreasing) interpolated linearly in log-QPS at
the crossover QPS, the same interpolation the crossover itself uses; its CI bounds map the
same way (a bound beyond the tested range stays unbounded).

The proposed schedule (all thresholds are ``ScheduleOptions``):

1. **Above the crossover's batch T: k = 0.** T = floor(batch at the crossover), at least 1.
2. **Drop wasted tail positions everywhere.** vLLM's per-position acceptance
   (``accepted_tokens_per_pos[i] / num_drafts``, pooled over the helping steps, weighted by
   drafts) is the share of drafts whose position i was accepted. Only the leading positions
   accepted at least ``min_acceptance`` of the time are kept (20 %, the threshold of the
   report's "lower num_speculative_tokens" advice, ``POSITION_MIN``): a position
   accepted less often costs a draft and a verify slot for little.
3. **Thin margin near the crossover: a lower k.** From the load where the measured gain has
   fallen to half of its best value up to T, verification is no longer free (the batch is
   turning compute-bound), so only positions accepted at least ``thin_acceptance`` (35 %)
   of the time are kept there.
4. **Edge cases.** Always helps: no k = 0 range; the last range ends at ``max_num_seqs``
   (1024 unless told; vLLM would carry the last k up anyway), with a note that the crossover
   lies above the tested loads. Never helps (or only at loads above the lowest, an irregular
   pattern): k = 0 everywhere, with a note to turn speculation off instead.

Adjacent ranges with equal k are merged. The output is the condition's own speculative config
(from run.json) plus the schedule: the exact ``--speculative-config`` JSON to paste, valid by
vLLM's rules (``vllm_schedule.check_schedule``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from specload.analysis.decisions.crossover import BETWEEN, MIXED, NEVER, STARTS, Crossover
from specload.analysis.schedules.schedule_results import (
    BatchCrossover,
    BatchFromClient,
    ComparisonView,
    HelpsApart,
    HelpsAtTop,
    KeptBelow,
    NeverHelped,
    NoPositionKept,
    NoRunningBatch,
    NoSpeculativeTokens,
    NothingDecided,
    PositionsDropped,
    ScatteredHelp,
    ScheduleNote,
    ScheduleProposal,
    StartsDisagree,
    ThinMargin,
)
from specload.analysis.schedules.vllm_schedule_rules import SCHEDULE_KEY, check_schedule, is_dynamic
from specload.analysis.statistics.effect import HURTS

if TYPE_CHECKING:
    from specload.analysis.statistics.ratios import RatioRow
    from specload.analysis.statistics.steps import StepStats

__all__ = [
    "POSITION_MIN",
    "LoadPoint",
    "NotPlaceable",
    "ScheduleOptions",
    "batch_crossovers",
    "derive_schedule",
    "load_points",
    "propose_schedules",
    "running_at",
]

#: A draft position whose acceptance (accepted at i / drafts) is below this rarely pays: the
#: schedule stops drafting there, and the report's advice says to lower k to it.
POSITION_MIN = 0.20


@dataclass(frozen=True, slots=True)
class ScheduleOptions:
    """Knobs of the proposal rule (fractions of drafts; batch sizes in requests)."""

    min_acceptance: float = POSITION_MIN
    thin_acceptance: float = 0.35
    thin_gain_share: float = 0.5
    max_num_seqs: int = 1024


@dataclass(frozen=True, slots=True)
class LoadPoint:
    """One step of a speculative condition, as the schedule rule needs it.

    ``gain`` = 1 - condition/baseline on the crossover metric; ``running`` in requests;
    ``per_position`` shares of drafts accepted at each position; ``drafts`` their count.
    """

    qps: float
    gain: float | None
    running: float | None
    per_position: tuple[float, ...] = ()
    drafts: float | None = None


class NotPlaceable(ValueError):
    """A crossing that cannot be placed in batch terms: no running-batch figures there."""


def _running_curve(points: list[LoadPoint]) -> tuple[np.ndarray, np.ndarray] | None:
    pts = [(p.qps, p.running) for p in points if p.running is not None and p.qps > 0]
    if not pts:
        return None
    pts.sort()
    q = np.log(np.asarray([p[0] for p in pts], dtype=np.float64))
    r = np.maximum.accumulate(np.asarray([p[1] for p in pts], dtype=np.float64))
    return q, r


def running_at(points: list[LoadPoint], qps: float | None) -> float | None:
    """Running batch at ``qps`` (req/s), interpolated in log-QPS; None outside the tested range."""
    curve = _running_curve(points)
    if curve is None or qps is None or not qps > 0:
        return None
    q, r = curve
    x = math.log(qps)
    if x < q[0] - 1e-9 or x > q[-1] + 1e-9:
        return None
    return float(np.interp(x, q, r))


def load_points(steps: list[StepStats], rows: list[RatioRow]) -> tuple[list[LoadPoint], str]:
    """A condition's steps with their gain on one metric; and where ``running`` came from."""
    gains = {r.target_qps: (1.0 - r.ratio.value if r.ratio.value is not None else None)
             for r in rows}  # fmt: skip
    server = any(s.server is not None and s.server.running_max is not None for s in steps)
    out = []
    for s in steps:
        srv = s.server
        if server:
            running = srv.running_max if srv is not None else None
        else:
            # Little's law on requests, not on conversation starts: every turn holds a slot
            e2e = s.latency["e2e_p50"].value
            rate = s.requests_per_s if s.requests_per_s is not None else s.achieved_qps
            running = rate * e2e if rate and e2e is not None else None
        out.append(
            LoadPoint(
                qps=s.target_qps,
                gain=gains.get(s.target_qps),
                running=running,
                per_position=tuple(srv.per_position) if srv is not None else (),
                drafts=srv.drafts if srv is not None else None,
            )
        )
    source = "server" if server else "client" if any(p.running for p in out) else ""
    return out, source


def _batch(condition: str, x: Crossover, points: list[LoadPoint], source: str) -> BatchCrossover:
    """Where it stops helping, also as a running batch (no stop: nothing to place)."""
    stop = x.stop if x.stop is not None and x.stop.inside else None
    qps_ci = stop.ci if stop is not None else (None, None)
    ci = tuple(running_at(points, v) for v in qps_ci)
    return BatchCrossover(
        condition=condition,
        metric=x.metric,
        status=x.status,
        qps=stop.qps if stop is not None else None,
        qps_ci=qps_ci,
        running=running_at(points, stop.qps) if stop is not None else None,
        running_ci=(ci[0], ci[1]),
        source=source,
    )


def _acceptance(points: list[LoadPoint], up_to_qps: float) -> list[float]:
    """Per-position acceptance pooled (drafts-weighted) over steps at or below ``up_to_qps``."""
    use = [p for p in points if p.per_position and p.drafts and p.qps <= up_to_qps + 1e-9]
    if not use:
        use = [p for p in points if p.per_position and p.drafts]
    if not use:
        return []
    n = min(len(p.per_position) for p in use)
    total = sum(float(p.drafts or 0.0) for p in use)
    return [sum(p.per_position[i] * float(p.drafts or 0.0) for p in use) / total for i in range(n)]


def _kept(acceptance: list[float], k_max: int, threshold: float) -> int:
    """Leading positions accepted at least ``threshold`` of the time.

    Positions the server reports nothing for (no data at all, or fewer positions than
    ``k_max``) are kept: there is no evidence that they are wasted.
    """
    k = 0
    while k < min(k_max, len(acceptance)):
        if acceptance[k] < threshold:
            return k
        k += 1
    return k_max


def _thin_qps(points: list[LoadPoint], until_qps: float, share: float) -> float | None:
    """First load after the best gain where the gain has fallen to ``share`` of it (log-QPS)."""
    pts = sorted((p.qps, p.gain) for p in points if p.gain is not None)
    below = [i for i, (q, _) in enumerate(pts) if q <= until_qps]
    if not below:
        return None
    best_i = max(below, key=lambda i: pts[i][1])
    level = pts[best_i][1] * share
    if level <= 0:
        return None
    for (q0, g0), (q1, g1) in zip(pts[best_i:], pts[best_i + 1 :], strict=False):
        if g1 <= level < g0:
            t = (g0 - level) / (g0 - g1)
            q = math.exp(math.log(q0) + t * (math.log(q1) - math.log(q0)))
            return q if q <= until_qps else None
    return None


def _merge(ranges: list[list[int]]) -> list[list[int]]:
    out: list[list[int]] = []
    for start, end, k in ranges:
        if start > end:
            continue
        if out and out[-1][2] == k and out[-1][1] + 1 == start:
            out[-1][1] = end
        else:
            out.append([start, end, k])
    return out


def _irregular(x: Crossover) -> bool:
    """A helping range a k-by-batch schedule cannot express: a load below the range where
    speculation *hurts* (not merely changes nothing). Scattered loads (``mixed``) get no
    proposal at all (``_proposal``)."""
    first = x.first_helping_qps
    return any(
        e == HURTS
        for q, e in zip(x.steps, x.effects, strict=False)
        if first is not None and q < first
    )


def _below_note(x: Crossover) -> list[ScheduleNote]:
    """A range that starts above the lowest load: said, since k stays on down there."""
    if x.status not in (STARTS, BETWEEN):
        return []
    return [KeptBelow(x.tested_range[0], tuple(x.helping))]


def _off(max_num_seqs: int, why: ScheduleNote) -> tuple[list[list[int]], list[ScheduleNote]]:
    return [[1, max_num_seqs, 0]], [why]


def derive_schedule(
    points: list[LoadPoint], x: Crossover | None, k_max: int, opts: ScheduleOptions
) -> tuple[list[list[int]], list[float], list[ScheduleNote]]:
    """Ranges ``[[start, end, k], ...]``, the pooled per-position acceptance, and notes.

    ``x`` is the condition's crossover on the chosen metric (None: no usable step).
    Raises ``NotPlaceable`` when a crossing cannot be placed in batch terms (no running
    figures).
    """
    top = opts.max_num_seqs
    if x is None or x.status == NEVER:
        ranges, notes = _off(top, NeverHelped())
        return ranges, [], notes
    if _irregular(x):
        ranges, notes = _off(top, HelpsApart(tuple(x.helping)))
        return ranges, [], notes
    stop = x.stop.qps if x.stop is not None and x.stop.inside else None
    up_to = stop if stop is not None else x.tested_range[1]
    acceptance = _acceptance(points, up_to)
    k_low = _kept(acceptance, k_max, opts.min_acceptance)
    k_thin = min(k_low, _kept(acceptance, k_max, opts.thin_acceptance))
    notes = _below_note(x)
    if stop is not None:
        run = running_at(points, stop)
        if run is None:
            raise NotPlaceable("no running-batch figures at the crossover load")
        end = min(top, max(1, math.floor(run + 1e-9)))
    else:
        end = top
        notes.append(HelpsAtTop(x.tested_range[1]))
    thin_q = _thin_qps(points, up_to, opts.thin_gain_share)
    thin_run = running_at(points, thin_q)
    thin = None if thin_run is None else max(0, math.floor(thin_run + 1e-9))
    if k_thin < k_low and thin is not None and thin_q is not None and thin < end:
        ranges = [[1, thin, k_low], [thin + 1, end, k_thin]]
        notes.append(ThinMargin(opts.thin_gain_share, thin_q, thin, opts.thin_acceptance, k_thin))
    else:
        ranges = [[1, end, k_low]]
    if k_low < k_max:
        notes.append(PositionsDropped(k_low + 1, k_max, opts.min_acceptance, k_low))
    if k_low == 0:
        notes.append(NoPositionKept())
    if end < top:
        ranges.append([end + 1, top, 0])
    return _merge(ranges), acceptance, notes


def batch_crossovers(comparison: ComparisonView) -> list[BatchCrossover]:
    """Every crossover of the comparison, also in running-batch terms."""
    out = []
    for x in comparison.crossovers:
        rows = comparison.ratios.get(x.condition, {}).get(x.metric, [])
        points, source = load_points(comparison.steps[x.condition], rows)
        out.append(_batch(x.condition, x, points, source))
    return out


def _proposal(
    comparison: ComparisonView, label: str, spec: dict[str, Any], opts: ScheduleOptions
) -> ScheduleProposal:
    metric = comparison.metric
    x = comparison.crossover(label, metric)
    points, source = load_points(comparison.steps[label], comparison.ratios[label][metric])
    batch = (
        _batch(label, x, points, source)
        if x is not None
        else BatchCrossover(label, metric, NEVER, None, (None, None), None, (None, None), source)
    )
    k_max = spec.get("num_speculative_tokens")
    prop = ScheduleProposal(
        condition=label, baseline=comparison.baseline, metric=metric,
        status=x.status if x is not None else NEVER, k_max=k_max if isinstance(k_max, int) else 0,
        ranges=[], config={}, batch=batch,
    )  # fmt: skip
    if not isinstance(k_max, int) or isinstance(k_max, bool) or k_max < 1:
        prop.errors.append(NoSpeculativeTokens())
        return prop
    if x is not None and not x.replicates_agree:
        prop.errors.append(StartsDisagree())
        return prop
    if x is not None and not x.settled and not x.helping:
        prop.errors.append(NothingDecided(tuple(x.undecided_steps)))
        return prop
    if x is not None and x.status == MIXED:
        prop.errors.append(ScatteredHelp(tuple(x.helping)))
        return prop
    try:
        prop.ranges, prop.acceptance, prop.notes = derive_schedule(points, x, k_max, opts)
    except NotPlaceable:
        prop.errors.append(NoRunningBatch())
        return prop
    if source == "client":
        prop.notes.append(BatchFromClient())
    prop.config = {**spec, SCHEDULE_KEY: prop.ranges}
    prop.errors += check_schedule(prop.config).errors
    return prop


def propose_schedules(
    comparison: ComparisonView, options: ScheduleOptions | None = None
) -> list[ScheduleProposal]:
    """A proposal for each fixed-k speculative condition of the comparison (not the baseline,
    not a condition that already runs a schedule)."""
    opts = options or ScheduleOptions()
    return [
        _proposal(comparison, info.label, info.speculative, opts)
        for info in comparison.conditions
        if info.label != comparison.baseline
        and info.speculative
        and not is_dynamic(info.speculative)
        and info.label in comparison.ratios
        and comparison.ratios[info.label].get(comparison.metric)
    ]

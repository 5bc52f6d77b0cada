"""What to do next: recommendations drawn from a compare result, each with its figures.

The compare report ends with these lines. They follow the measurement protocol: keep
speculation on up to the load where it stops helping (and say what that means at the user's
operating point); turn a feature on only above the load where it starts helping; fewer
drafted tokens when acceptance falls off after some position; off when acceptance is low or
it never helps; watch p95 where p50 helps and p95 hurts; no decision while server starts
disagree; and, with prefix-only / spec-only / both runs, which feature explains the TTFT
change (prefill) and which the TPOT change (decode).

Nothing here re-judges a step: each step arrives with its effect by the one rule of
``analysis.statistics.effect`` and each condition with its crossover status (``analysis.decisions.crossover``),
so the advice says what the verdict and the tables say. What a condition *is* comes from its
features (declared or read from the server, ``analysis.inputs.features``): a condition whose
features are unknown gets advice about the condition (keep it, or keep the baseline), never
about a feature it may not have.

The input is ``AdviceInput``, a small set of figures, not the compare module's own types, so
the rules can be tested on constructed figures; ``report.advice`` adapts a comparison to it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from specload.analysis.decisions.crossover import (
    ALWAYS,
    BETWEEN,
    CROSSES,
    MIXED,
    NEVER,
    STARTS,
)
from specload.analysis.schedules.batch_schedule import POSITION_MIN
from specload.analysis.statistics.effect import HELPS, HURTS, UNDECIDED
from specload.analysis.statistics.stats import Estimate
from specload.core.gain import DEFAULT_MIN_GAIN
from specload.report.crossover_words import fmt_qps
from specload.report.wording import change_words, load_ci_text, pct, to_decide_text

__all__ = [
    "LOW_ACCEPTANCE",
    "Advice",
    "AdviceInput",
    "Bound",
    "ConditionFigures",
    "StepFigures",
    "advise",
]

#: Below this overall acceptance rate (accepted / drafted tokens) drafting mostly costs.
LOW_ACCEPTANCE = 0.30


@dataclass(frozen=True, slots=True)
class StepFigures:
    """One load step of one condition against the baseline, on the chosen metric.

    ``p50_ratio``/``p95_ratio``: condition / baseline of that metric's p50 and p95 at this
    step; ``effect``/``p95_effect``: their classifications (``analysis.statistics.effect``).
    """

    target_qps: float
    p50_ratio: float | None
    p95_ratio: float | None = None
    effect: str = "undecided"
    p95_effect: str = "undecided"
    #: an undecided step: more measured seconds that would likely decide it
    to_decide_s: float | None = None


@dataclass(frozen=True, slots=True)
class Bound:
    """A boundary of the helping range in req/s with its CI; a None bound lies beyond the
    tested range on the side ``beyond`` says ("above"/"below", as ``crossover.Boundary``)."""

    qps: float
    lo: float | None = None
    hi: float | None = None
    beyond: tuple[str, str] = ("", "")

    def ci(self, tested_range: tuple[float, float]) -> str:
        return f"95 % CI {load_ci_text((self.lo, self.hi), self.beyond, tested_range)}"


@dataclass(frozen=True, slots=True)
class ConditionFigures:
    """One non-baseline condition: what was on, its steps, acceptance, status, memory.

    ``speculative`` / ``prefix_caching``: True, False, or None when unknown.
    ``per_position``: acceptance per draft position, 0-based. ``status``: the crossover status
    on the metric; ``start``/``stop``: its boundaries; ``starts``: server starts analysed
    alone (0 with one start); ``split_qps``: loads where their effects differ (they
    disagree), ``split`` the same in words (``crossover_words.split_text``). ``ttft_ratio``/``tpot_ratio``:
    p50 condition / baseline at the lowest common load, for attribution.
    """

    label: str
    speculative: bool | None
    prefix_caching: bool | None = None
    method: str | None = None
    num_speculative_tokens: int | None = None
    steps: tuple[StepFigures, ...] = ()
    acceptance_rate: float | None = None
    per_position: tuple[float, ...] = ()
    status: str = NEVER
    start: Bound | None = None
    stop: Bound | None = None
    starts: int = 0
    split_qps: tuple[float, ...] = ()
    split: str = ""
    #: the steps the status rests on are decided (``Crossover.settled``)
    settled: bool = True
    ttft_ratio: float | None = None
    tpot_ratio: float | None = None
    gpu_memory_peak_mib: float | None = None
    #: loads where p50 TTFT helps (a feature that never helps the metric may still pay there)
    ttft_helps: tuple[float, ...] = ()
    #: the load ``ttft_ratio`` / ``tpot_ratio`` were measured at
    ratio_qps: float | None = None


@dataclass(frozen=True, slots=True)
class AdviceInput:
    """Everything the rules read. ``metric``: display name of the crossover metric."""

    baseline: str
    conditions: tuple[ConditionFigures, ...]
    metric: str = "p50 TPOT"
    operating_qps: float | None = None
    min_gain: float = DEFAULT_MIN_GAIN
    baseline_gpu_memory_peak_mib: float | None = None


@dataclass(frozen=True, slots=True)
class Advice:
    """One recommendation. ``kind``: ``keep``, ``starts``, ``off``, ``undecided``,
    ``lower_k``, ``watch_p95``, ``attribution``, ``memory`` or ``by_class`` (report/advice.py);
    ``figures`` are the numbers it rests on."""

    kind: str
    condition: str | None
    text: str
    figures: dict[str, Any] = field(default_factory=dict)


def _feature(c: ConditionFigures) -> str | None:
    """What the condition turns on, or None when that is unknown or nothing is on."""
    if c.speculative and c.prefix_caching:
        return "speculative decoding with prefix caching"
    if c.speculative:
        return "speculative decoding"
    if c.speculative is False and c.prefix_caching:
        return "prefix caching"
    return None


def _tested(c: ConditionFigures) -> tuple[float, float]:
    qs = [s.target_qps for s in c.steps if s.p50_ratio is not None]
    return (min(qs), max(qs)) if qs else (math.nan, math.nan)


def _where_hurts(c: ConditionFigures) -> str:
    hurt = [s.target_qps for s in c.steps if s.effect == HURTS]
    return f"; it hurt at {', '.join(f'{q:g}' for q in hurt)} req/s" if hurt else ""


def _undecided(c: ConditionFigures, inp: AdviceInput) -> list[Advice]:
    if c.split_qps:
        where = c.split or f"at {', '.join(f'{q:g}' for q in c.split_qps)} req/s"
        return [
            Advice(
                "undecided",
                c.label,
                f"{c.label}: no decision yet: server starts disagree on {inp.metric} {where}, "
                f"each of the {c.starts} starts analysed alone. Run more replicates (specload "
                f"sweep --replicates {max(c.starts + 2, 3)}) before acting.",
                {"starts": float(c.starts), "split_qps": list(c.split_qps)},
            )
        ]
    if not c.settled and not _helping(c):
        return _measure_more(c, inp, "no decision yet on ")
    if c.status == MIXED:
        on = ", ".join(f"{s.target_qps:g}" for s in c.steps if s.effect == HELPS)
        return [
            Advice(
                "undecided",
                c.label,
                f"{c.label}: it helps {inp.metric} at {on} req/s only, with loads in between "
                "where it does not help: no consistent range. Lengthen the steps or add replicates "
                "before acting.",
            )
        ]
    return []


def _measure_more(c: ConditionFigures, inp: AdviceInput, head: str = "") -> list[Advice]:
    """Undecided steps and their time to decide (``wording.to_decide_text``)."""
    undecided = [(s.target_qps, s.to_decide_s) for s in c.steps if s.effect == UNDECIDED]
    if not undecided:
        return []
    return [
        Advice(
            "undecided",
            c.label,
            f"{c.label}: {head}{inp.metric}: {to_decide_text(undecided)}. "
            "Measure more there before acting on those loads.",
            {"to_decide_s": sum(s or 0.0 for _, s in undecided)},
        )
    ]


def _never(c: ConditionFigures, inp: AdviceInput) -> list[Advice]:
    lo, hi = _tested(c)
    feature = _feature(c)
    act = (
        f"turn {feature} off and keep the baseline ({inp.baseline})"
        if feature
        else f"keep the baseline ({inp.baseline})"
    )
    if c.ttft_helps and "TTFT" not in inp.metric:
        where = ", ".join(f"{q:g}" for q in c.ttft_helps)
        act = f"it lowered TTFT at {where} req/s, so keep it only if TTFT matters more; else {act}"
    return [
        Advice(
            "off",
            c.label,
            f"{c.label}: {feature or 'it'} never helped {inp.metric} at a tested load "
            f"({lo:g}–{hi:g} req/s){_where_hurts(c)}: {act}.",
            {"max_tested_qps": hi},
        )
    ]


def _low_acceptance(c: ConditionFigures) -> list[Advice]:
    if not c.speculative or c.acceptance_rate is None or c.acceptance_rate >= LOW_ACCEPTANCE:
        return []
    return [
        Advice(
            "off",
            c.label,
            f"{c.label}: turn speculation off (or change drafter): only "
            f"{pct(c.acceptance_rate)} % of drafted tokens were accepted (< "
            f"{pct(LOW_ACCEPTANCE)} %), so drafting and verification both cost and little is "
            "saved.",
            {"acceptance_rate": c.acceptance_rate},
        )
    ]


def _where_op(op: float, b: Bound) -> int:
    """-1 below the boundary's CI, +1 above it, 0 within (too close to call)."""
    lo = b.lo if b.lo is not None else b.qps
    hi = b.hi if b.hi is not None else b.qps
    return -1 if op < lo else 1 if op > hi else 0


def _operating_clause(c: ConditionFigures, op: float | None) -> str:
    if op is None:
        return " No operating point was given (--operating-qps): read the range against yours."
    helping = _helping(c)
    hi = _tested(c)[1]
    if op > hi and c.status in (ALWAYS, STARTS):
        return f" Your operating point, {op:g} req/s, is above the tested range: measure there."
    # each side: a boundary with its CI, or (none inside the tested range) the helping steps
    start = (
        c.start
        if c.start is not None
        else (Bound(helping[0], helping[0], helping[0]) if c.status in (STARTS, BETWEEN) else None)
    )
    stop = (
        c.stop
        if c.stop is not None
        else (
            Bound(helping[-1], helping[-1], helping[-1]) if c.status in (CROSSES, BETWEEN) else None
        )
    )
    sides = [("start", _where_op(op, b)) for b in [start] if b is not None]
    sides += [("stop", _where_op(op, b)) for b in [stop] if b is not None]
    if any(where == 0 for _, where in sides) and (c.start or c.stop):
        return (
            f" Your operating point, {op:g} req/s, lies within a boundary's CI: too close to call."
        )
    inside = all(
        (where >= 0) if side == "start" else (where <= 0) for side, where in sides
    )  # fmt: skip
    if inside:
        return f" At your operating point, {op:g} req/s, it helps: keep it on there."
    return f" At your operating point, {op:g} req/s, it does not help: leave it off there."


def _helping(c: ConditionFigures) -> list[float]:
    return [s.target_qps for s in c.steps if s.effect == HELPS]


def _keep(c: ConditionFigures, inp: AdviceInput) -> list[Advice]:
    """Where it helps, from the status: always, up to, from, between. A boundary the data
    place beyond the tested range arrives as None: the advice then names the steps."""
    feature = _feature(c) or c.label
    hi = _tested(c)[1]
    helping = _helping(c)
    figures: dict[str, float | None] = {"operating_qps": inp.operating_qps, "max_tested_qps": hi}
    kind = "keep"
    if c.status == ALWAYS:
        head = (
            f"{c.label}: keep {feature} on: it helped {inp.metric} at every tested load up to "
            f"{hi:g} req/s."
        )
    elif c.status == CROSSES and c.stop is not None:
        head = (
            f"{c.label}: keep {feature} on up to ≈ {fmt_qps(c.stop.qps)} req/s "
            f"({c.stop.ci(_tested(c))}), where its gain on {inp.metric} falls below the minimum; it helps "
            f"significantly up to {helping[-1]:g} req/s."
        )
        figures.update(stop_qps=c.stop.qps, stop_ci_low=c.stop.lo, stop_ci_high=c.stop.hi)
    elif c.status == CROSSES:
        head = (
            f"{c.label}: keep {feature} on up to {helping[-1]:g} req/s, where it helps "
            f"{inp.metric} significantly; above that it is not shown to help up to "
            f"{hi:g} req/s (measure longer there)."
        )
        figures.update(last_helping_qps=helping[-1])
    elif c.status == STARTS:
        since = (
            f"from ≈ {fmt_qps(c.start.qps)} req/s ({c.start.ci(_tested(c))})"
            if c.start is not None
            else f"from {helping[0]:g} req/s"
        )
        head = (
            f"{c.label}: {feature} helps {inp.metric} only {since} up to at least {hi:g} req/s, "
            "the highest tested load; below that it is not shown to help."
        )
        if c.start is not None:
            figures.update(start_qps=c.start.qps, start_ci_low=c.start.lo, start_ci_high=c.start.hi)
        kind = "starts"
    elif c.status == BETWEEN:
        since = (
            f"≈ {fmt_qps(c.start.qps)} ({c.start.ci(_tested(c))})"
            if c.start is not None
            else f"{helping[0]:g}"
        )
        until = (
            f"≈ {fmt_qps(c.stop.qps)} req/s ({c.stop.ci(_tested(c))})"
            if c.stop is not None
            else f"{helping[-1]:g} req/s"
        )
        head = f"{c.label}: {feature} helps {inp.metric} only between {since} and {until}."
        figures.update(
            start_qps=c.start.qps if c.start else None, stop_qps=c.stop.qps if c.stop else None
        )
    else:
        return []
    return [Advice(kind, c.label, head + _operating_clause(c, inp.operating_qps), figures)]


def _lower_k_rule(c: ConditionFigures) -> list[Advice]:
    """Fewer drafted tokens when acceptance per position falls off after position i."""
    if not c.speculative or not c.per_position:
        return []
    k = c.num_speculative_tokens or len(c.per_position)
    keep = 0
    while keep < len(c.per_position) and c.per_position[keep] >= POSITION_MIN:
        keep += 1
    if keep == 0 or keep >= k:
        return []
    rates = ", ".join(f"{pct(r)} %" for r in c.per_position)
    return [
        Advice(
            "lower_k",
            c.label,
            f"{c.label}: lower num_speculative_tokens from {k} to {keep}: acceptance by draft "
            f"position is {rates}; after position {keep - 1} it falls below "
            f"{pct(POSITION_MIN)} %, so later drafts are mostly verified for nothing (and "
            "shrink the KV budget).",
            {"num_speculative_tokens": float(k), "suggested": float(keep)},
        )
    ]


def _p95_rule(c: ConditionFigures, inp: AdviceInput) -> list[Advice]:
    """p50 helps while p95 hurts: some requests wait on the drafting path."""
    out = []
    for s in c.steps:
        if s.effect != HELPS or s.p95_effect != HURTS:
            continue
        assert s.p50_ratio is not None and s.p95_ratio is not None
        out.append(
            Advice(
                "watch_p95",
                c.label,
                f"{c.label} at {s.target_qps:g} req/s: p50 is {pct(1 - s.p50_ratio)} % lower "
                f"but p95 is {pct(s.p95_ratio - 1)} % higher; some requests wait on the "
                "drafting path. Adopt it only where p95 is stable.",
                {"target_qps": s.target_qps, "p50_ratio": s.p50_ratio, "p95_ratio": s.p95_ratio},
            )
        )
    return out


def _memory_rule(c: ConditionFigures, inp: AdviceInput) -> list[Advice]:
    base, peak = inp.baseline_gpu_memory_peak_mib, c.gpu_memory_peak_mib
    if base is None or peak is None or abs(peak - base) < 0.01 * base:
        return []
    return [
        Advice(
            "memory",
            c.label,
            f"{c.label}: peak GPU memory {peak:,.0f} MiB vs {base:,.0f} MiB for {inp.baseline} "
            f"({peak - base:+,.0f} MiB): less headroom for KV cache under load.",
            {"peak_mib": peak, "baseline_peak_mib": base},
        )
    ]


def _role(inp: AdviceInput, spec: bool, prefix: bool) -> ConditionFigures | None:
    for c in inp.conditions:
        if c.speculative is spec and c.prefix_caching is prefix:
            return c
    return None


def _explain(family: str, phase: str, roles: dict[str, ConditionFigures], g: float) -> str | None:
    attr = "ttft_ratio" if family == "TTFT" else "tpot_ratio"
    r = {name: getattr(c, attr) for name, c in roles.items()}
    if any(v is None for v in r.values()):
        return None
    both, pre, spec = r["both"], r["prefix"], r["spec"]
    q = roles["both"].ratio_qps
    at = f" at {q:g} req/s" if q is not None else ""
    effect = {"prefix caching": abs(math.log(pre)), "speculative decoding": abs(math.log(spec))}
    floor = math.log1p(max(g, 0.02))
    if abs(math.log(both)) < floor and max(effect.values()) < floor:
        return f"{family} ({phase}){at} did not change by {pct(max(g, 0.02))} % in any condition."
    lead = max(effect, key=lambda k: effect[k])
    return (
        f"{family} ({phase}){at}, with both on ({change_words(Estimate(both), ci=False)}), is explained by {lead}: "
        f"prefix caching alone {change_words(Estimate(pre), ci=False)}, speculative decoding alone {change_words(Estimate(spec), ci=False)} (the "
        "attribution table has every load)."
    )


def _attribution_rule(inp: AdviceInput) -> list[Advice]:
    """With prefix-only, spec-only and both: which feature moves TTFT, which TPOT."""
    found = {
        "prefix": _role(inp, False, True),
        "spec": _role(inp, True, False),
        "both": _role(inp, True, True),
    }
    roles = {k: v for k, v in found.items() if v is not None}
    if len(roles) < 3:
        return []
    out = []
    for family, phase in (("TTFT", "prefill"), ("TPOT", "decode")):
        text = _explain(family, phase, roles, inp.min_gain)
        if text:
            attr = "ttft_ratio" if family == "TTFT" else "tpot_ratio"
            figs = {f"{k}_ratio": getattr(c, attr) for k, c in roles.items()}
            out.append(Advice("attribution", None, text, figs))
    return out


def advise(inp: AdviceInput) -> list[Advice]:
    """All recommendations for a compare result, per condition, then the attribution."""
    out: list[Advice] = []
    for c in inp.conditions:
        undecided = _undecided(c, inp)
        out.extend(_low_acceptance(c))
        if undecided:
            out.extend(undecided)
        elif c.status == NEVER:
            out.extend(_never(c, inp))
        else:
            out.extend(_keep(c, inp))
        if not undecided and not c.settled:  # what it rests on is decided; the rest is not
            out.extend(_measure_more(c, inp))
        out.extend(_lower_k_rule(c))
        out.extend(_p95_rule(c, inp))
        out.extend(_memory_rule(c, inp))
    out.extend(_attribution_rule(inp))
    return out

"""What to do next: recommendations drawn from a compare result, each with its figures.

The compare report ends with these lines. They follow the measurement protocol
(``../shared/PROTOCOL.md``): keep speculation on up to the load where it stops helping (and
say what that means at the user's operating point); fewer drafted tokens when acceptance falls
off after some position; off when acceptance is low or it never helps; watch p95 where p50
improves and p95 worsens; and, with prefix-only / spec-only / both runs, which feature explains
the TTFT change (prefill) and which the TPOT change (decode).

The input is ``AdviceInput``, a small set of figures, not the compare module's own types, so
the rules can be tested on constructed figures and the compare code can change freely; the
compare side adapts its result to it. Ratios are condition / baseline of a latency (below 1 is
faster); a change counts only beyond ``min_gain`` (default 2 %), so noise gives no advice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = [
    "LOW_ACCEPTANCE",
    "POSITION_MIN",
    "Advice",
    "AdviceInput",
    "ConditionFigures",
    "StepFigures",
    "advise",
]

#: Below this overall acceptance rate (accepted / drafted tokens) drafting mostly costs.
LOW_ACCEPTANCE = 0.30
#: A draft position whose acceptance (accepted at i / drafts) is below this rarely pays.
POSITION_MIN = 0.20


@dataclass(frozen=True, slots=True)
class StepFigures:
    """One load step of one condition against the baseline, on the chosen metric.

    ``p50_ratio``/``p95_ratio``: condition / baseline of that metric's p50 and p95 at this
    step; ``*_ci``: their 95 % bootstrap intervals when known.
    """

    target_qps: float
    p50_ratio: float | None
    p95_ratio: float | None = None
    p50_ci: tuple[float, float] | None = None
    p95_ci: tuple[float, float] | None = None


@dataclass(frozen=True, slots=True)
class ConditionFigures:
    """One non-baseline condition: what was on, its steps, acceptance, crossover, memory.

    ``per_position``: acceptance per draft position, 0-based (Δaccepted at position i /
    Δdrafts; vLLM's ``spec_decode_num_accepted_tokens_per_pos``). ``crossover_qps``: the load
    at which it stops helping on the metric (``None``: not found in the tested range), with
    its CI. ``ttft_ratio``/``tpot_ratio``: p50 condition / baseline at the lowest common load,
    for attribution. ``gpu_memory_peak_mib``: peak over the run, when sampled.
    """

    label: str
    speculative: bool
    prefix_caching: bool | None = None
    method: str | None = None
    num_speculative_tokens: int | None = None
    steps: tuple[StepFigures, ...] = ()
    acceptance_rate: float | None = None
    per_position: tuple[float, ...] = ()
    crossover_qps: float | None = None
    crossover_ci: tuple[float | None, float | None] | None = None
    ttft_ratio: float | None = None
    tpot_ratio: float | None = None
    gpu_memory_peak_mib: float | None = None


@dataclass(frozen=True, slots=True)
class AdviceInput:
    """Everything the rules read. ``metric``: display name of the crossover metric."""

    baseline: str
    conditions: tuple[ConditionFigures, ...]
    metric: str = "p50 TPOT"
    operating_qps: float | None = None
    min_gain: float = 0.02
    baseline_gpu_memory_peak_mib: float | None = None


@dataclass(frozen=True, slots=True)
class Advice:
    """One recommendation. ``kind``: ``keep``, ``off``, ``lower_k``, ``watch_p95``,
    ``attribution``, ``memory`` or ``range``; ``figures`` are the numbers it rests on."""

    kind: str
    condition: str | None
    text: str
    figures: dict[str, float | None] = field(default_factory=dict)


def _pct(ratio: float) -> str:
    """A ratio as a signed change: 0.8 -> '-20%'."""
    return f"{(ratio - 1) * 100:+.0f}%"


def _qps(x: float | None) -> str:
    return "?" if x is None else f"{x:g}"


def _feature(c: ConditionFigures) -> str:
    if c.speculative and c.prefix_caching:
        return "speculative decoding with prefix caching"
    return "speculative decoding" if c.speculative else "prefix caching"


def _helps(s: StepFigures, min_gain: float) -> bool:
    if s.p50_ratio is None:
        return False
    if s.p50_ci is not None:
        return s.p50_ci[1] < 1.0 and s.p50_ratio <= 1 - min_gain
    return s.p50_ratio <= 1 - min_gain


def _off_rules(c: ConditionFigures, inp: AdviceInput) -> list[Advice]:
    """Turn it off: acceptance too low, or no step where it helped."""
    out: list[Advice] = []
    if c.speculative and c.acceptance_rate is not None and c.acceptance_rate < LOW_ACCEPTANCE:
        out.append(
            Advice(
                "off",
                c.label,
                f"{c.label}: turn speculation off (or change drafter): only "
                f"{c.acceptance_rate:.0%} of drafted tokens were accepted "
                f"(< {LOW_ACCEPTANCE:.0%}), so drafting and verification both cost and little "
                "is saved.",
                {"acceptance_rate": c.acceptance_rate},
            )
        )
    measured = [s for s in c.steps if s.p50_ratio is not None]
    if measured and not any(_helps(s, inp.min_gain) for s in measured):
        best = min(measured, key=lambda s: s.p50_ratio or math.inf)
        assert best.p50_ratio is not None
        out.append(
            Advice(
                "off",
                c.label,
                f"{c.label}: {_feature(c)} never helped {inp.metric} by {inp.min_gain:.0%} or more "
                f"at any tested load (best {_pct(best.p50_ratio)} at {_qps(best.target_qps)} QPS): "
                f"turn it off and keep the baseline ({inp.baseline}).",
                {"best_ratio": best.p50_ratio, "best_qps": best.target_qps},
            )
        )
    return out


def _operating_clause(c: ConditionFigures, op: float | None, top: float) -> str:
    lo, hi = c.crossover_ci or (None, None)
    x = c.crossover_qps
    if op is None:
        return " No operating point was given (--operating-qps): read the crossover against yours."
    if x is None:
        if op > top:
            return f" Your operating point, {op:g} QPS, is above the tested range: measure there."
        return f" At your operating point, {op:g} QPS, keep it on."
    if op < (lo if lo is not None else x):
        return f" Your operating point, {op:g} QPS, is below the crossover: keep it on."
    if op > (hi if hi is not None else x):
        return (
            f" Your operating point, {op:g} QPS, is above the crossover: there it is slower; "
            "turn it off or switch it by load."
        )
    return f" Your operating point, {op:g} QPS, lies within the crossover's CI: too close to call."


def _keep_rule(c: ConditionFigures, inp: AdviceInput) -> list[Advice]:
    """Keep it on up to the crossover, read against the operating point."""
    helping = [s for s in c.steps if _helps(s, inp.min_gain)]
    if not helping:
        return []
    top = max(s.target_qps for s in c.steps)
    figures: dict[str, float | None] = {
        "crossover_qps": c.crossover_qps,
        "operating_qps": inp.operating_qps,
        "max_tested_qps": top,
    }
    if c.crossover_qps is None:
        measured = [s for s in c.steps if s.p50_ratio is not None]
        where = (
            f"at every tested load up to {top:g} QPS"
            if len(helping) == len(measured)
            else "at " + ", ".join(f"{s.target_qps:g}" for s in helping) + " QPS only"
        )
        head = f"{c.label}: {_feature(c)} helped {inp.metric} {where}; no crossover found."
    else:
        lo, hi = c.crossover_ci or (None, None)
        ci = f" (95% CI {_qps(lo)}-{_qps(hi)})" if c.crossover_ci else ""
        head = (
            f"{c.label}: keep {_feature(c)} on up to about {c.crossover_qps:.3g} QPS{ci}; above "
            f"that it no longer helps {inp.metric}."
        )
        figures.update({"crossover_ci_low": lo, "crossover_ci_high": hi})
    text = head + _operating_clause(c, inp.operating_qps, top)
    return [Advice("keep", c.label, text, figures)]


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
    rates = ", ".join(f"{r:.0%}" for r in c.per_position)
    return [
        Advice(
            "lower_k",
            c.label,
            f"{c.label}: lower num_speculative_tokens from {k} to {keep}: acceptance by draft "
            f"position is {rates}; after position {keep - 1} it falls below {POSITION_MIN:.0%}, so "
            "later drafts are mostly verified for nothing (and shrink the KV budget).",
            {"num_speculative_tokens": float(k), "suggested": float(keep)},
        )
    ]


def _p95_rule(c: ConditionFigures, inp: AdviceInput) -> list[Advice]:
    """p50 improves while p95 worsens: some requests wait on the drafting path."""
    out = []
    for s in c.steps:
        if s.p95_ratio is None or not _helps(s, inp.min_gain) or s.p95_ratio <= 1 + inp.min_gain:
            continue
        assert s.p50_ratio is not None
        out.append(
            Advice(
                "watch_p95",
                c.label,
                f"{c.label} at {s.target_qps:g} QPS: p50 improves {_pct(s.p50_ratio)} but p95 "
                f"worsens {_pct(s.p95_ratio)}; some requests wait on the drafting path. Adopt it "
                "only where p95 is stable.",
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
        if c.speculative == spec and bool(c.prefix_caching) == prefix:
            return c
    return None


def _explain(family: str, phase: str, roles: dict[str, ConditionFigures], g: float) -> str | None:
    attr = "ttft_ratio" if family == "TTFT" else "tpot_ratio"
    r = {name: getattr(c, attr) for name, c in roles.items()}
    if any(v is None for v in r.values()):
        return None
    both, pre, spec = r["both"], r["prefix"], r["spec"]
    effect = {"prefix caching": abs(math.log(pre)), "speculative decoding": abs(math.log(spec))}
    if abs(math.log(both)) < math.log1p(g) and max(effect.values()) < math.log1p(g):
        return f"{family} ({phase}) did not change beyond {g:.0%} in any condition."
    lead = max(effect, key=lambda k: effect[k])
    return (
        f"{family} ({phase}) change with both on ({_pct(both)}) is explained by {lead}: "
        f"prefix caching alone {_pct(pre)}, speculative decoding alone {_pct(spec)}."
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
        out.extend(_off_rules(c, inp))
        out.extend(_keep_rule(c, inp))  # empty when no step helped
        out.extend(_lower_k_rule(c))
        out.extend(_p95_rule(c, inp))
        out.extend(_memory_rule(c, inp))
    out.extend(_attribution_rule(inp))
    return out

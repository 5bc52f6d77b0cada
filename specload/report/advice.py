"""Adapt a ``Comparison`` to the recommendation rules' small input (``report.advice_rules``).

The rules read a few figures per condition (ratios on the chosen metric per step with CIs,
pooled acceptance, per-position acceptance, the crossover, TTFT/TPOT ratios at the lowest
common load) so that they can be tested on constructed figures; this module is the one
place that knows both shapes.
"""

from __future__ import annotations

from specload.analysis.comparison import Comparison, ConditionInfo
from specload.analysis.decisions.class_split import class_split
from specload.analysis.decisions.crossover import NEVER, Boundary
from specload.analysis.statistics.effect import HELPS
from specload.analysis.statistics.ratios import RatioRow
from specload.analysis.statistics.steps import StepStats
from specload.report.advice_rules import (
    Advice,
    AdviceInput,
    Bound,
    ConditionFigures,
    StepFigures,
    advise,
)
from specload.report.crossover_words import split_text
from specload.report.wording import metric_label

__all__ = ["advice_for", "advice_input"]


def _acceptance(steps: list[StepStats]) -> tuple[float | None, tuple[float, ...]]:
    """Acceptance pooled over steps: Σaccepted / Σdrafted; per position weighted by drafts."""
    servers = [s.server for s in steps if s.server is not None and s.server.draft_tokens]
    if not servers:
        return None, ()
    accepted = sum(s.accepted_tokens or 0.0 for s in servers)
    drafted = sum(s.draft_tokens or 0.0 for s in servers)
    drafts = sum(s.drafts or 0.0 for s in servers if s.per_position)
    width = max((len(s.per_position) for s in servers), default=0)
    per_pos = (
        tuple(
            sum(s.per_position[i] * (s.drafts or 0.0) for s in servers if len(s.per_position) > i)
            / drafts
            for i in range(width)
        )
        if drafts
        else ()
    )
    return (accepted / drafted if drafted else None), per_pos


def _bound(b: Boundary | None) -> Bound | None:
    """The rules' boundary; None when there is none inside the tested range."""
    return None if b is None or not b.inside else Bound(b.qps, b.ci[0], b.ci[1], b.ci_beyond)


def _figures(c: Comparison, info: ConditionInfo) -> ConditionFigures:
    rows: dict[str, list[RatioRow]] = c.ratios[info.label]
    fam = c.metric.rpartition("_")[0]
    steps = tuple(
        StepFigures(
            r50.target_qps,
            r50.ratio.value,
            r95.ratio.value,
            r50.effect,
            r95.effect,
            r50.to_decide_s,
        )
        for r50, r95 in zip(rows[f"{fam}_p50"], rows[f"{fam}_p95"], strict=True)
    )
    x = c.crossover(info.label, c.metric)
    spec = info.features.spec_config()
    rate, per_pos = _acceptance(c.steps[info.label])
    k = spec.get("num_speculative_tokens")
    return ConditionFigures(
        label=info.label,
        speculative=info.features.spec_on,
        prefix_caching=info.prefix_caching,
        method=spec.get("method"),
        num_speculative_tokens=int(k) if isinstance(k, (int, float)) else None,
        steps=steps,
        acceptance_rate=rate,
        per_position=per_pos,
        status=x.status if x is not None else NEVER,
        start=_bound(x.start) if x is not None else None,
        stop=_bound(x.stop) if x is not None else None,
        starts=len(x.starts) if x is not None else 0,
        split_qps=tuple(x.split_qps) if x is not None else (),
        split=split_text(x) if x is not None and x.split_qps else "",
        settled=x.settled if x is not None else True,
        ttft_ratio=rows["ttft_p50"][0].ratio.value if rows["ttft_p50"] else None,
        tpot_ratio=rows["tpot_p50"][0].ratio.value if rows["tpot_p50"] else None,
        gpu_memory_peak_mib=_gpu_peak(c.steps[info.label]),
        ttft_helps=tuple(r.target_qps for r in rows["ttft_p50"] if r.effect == HELPS),
        ratio_qps=rows["ttft_p50"][0].target_qps if rows["ttft_p50"] else None,
    )


def _gpu_peak(steps: list[StepStats]) -> float | None:
    peaks = [s.server.gpu_memory_mib_max for s in steps if s.server and s.server.gpu_memory_mib_max]
    return max(peaks) if peaks else None


def advice_input(c: Comparison) -> AdviceInput:
    """The rules' input for ``c`` (conditions without a step in common are left out)."""
    conds = tuple(
        _figures(c, i) for i in c.conditions if i.label in c.ratios and c.ratios[i.label][c.metric]
    )
    return AdviceInput(
        baseline=c.baseline,
        conditions=conds,
        metric=metric_label(c.metric),
        operating_qps=c.operating_qps,
        min_gain=c.min_gain,
        baseline_gpu_memory_peak_mib=_gpu_peak(c.steps[c.baseline]),
    )


def _class_advice(c: Comparison) -> list[Advice]:
    """Where classes of request disagree (``analysis.decisions.class_split``: some gain, others do
    not): draft for the gaining classes only (route them to a speculative pool), whatever the
    overall verdict says."""
    out = []
    for label in c.ratios:
        split = class_split(label, c.baseline, c.classes, c.metric)
        if split is None:
            continue
        gain = [(e.name, max(e.helping_qps)) for e in split.gain]
        helps = ", ".join(f"`{n}` (up to {q:g} req/s tested)" for n, q in gain)
        rest = ", ".join(f"`{e.name}`" for e in split.rest)
        text = (
            f"{label}: {metric_label(c.metric)} gains for {helps} and never for {rest}: draft "
            f"for {', '.join(f'`{n}`' for n, _ in gain)} requests only (route them to a "
            "pool with speculative decoding on) and serve the rest without it."
        )
        figures = {"helps": dict(gain), "never": [e.name for e in split.rest]}
        out.append(Advice("by_class", label, text, figures))
    return out


def advice_for(c: Comparison) -> list[Advice]:
    """Recommendations for ``c``: per class first (when classes disagree), then the rules'.
    A condition whose classes disagree gets no "turn it off" from the overall figures: the
    per-class answer keeps it for the classes that gain."""
    if not c.ratios:
        return []
    by_class = _class_advice(c)
    split = {a.condition for a in by_class}
    rules = [a for a in advise(advice_input(c)) if not (a.kind == "off" and a.condition in split)]
    return [*by_class, *rules]

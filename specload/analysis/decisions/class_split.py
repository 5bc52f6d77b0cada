"""When classes of request disagree, the answer is per class: "spec helps code (p50 TPOT
-27 %) and hurts questions (+17 %) at every tested load: route code to a spec pool and the
rest to baseline".

One overall verdict averages a class that gains and a class that loses into "no significant
difference", and advice built on it says to turn off what the per-class answer says to keep.
So the classes' own answers (``analysis.decisions.classes``, the same rule per step) decide first:
``class_split`` finds, per condition, the classes with a helping step and those without one;
when both exist the classes disagree, the verdict leads with their split
(``report.verdict_words.split_headline``) and
the advice follows it (``report/advice.py``: route the gaining classes, never "turn it off").
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from specload.analysis.decisions.classes import ClassAnswer
from specload.analysis.statistics.effect import HELPS, HURTS
from specload.analysis.statistics.ratios import RatioRow
from specload.analysis.statistics.steps import MIN_DECIDE_N

__all__ = ["ClassEffect", "ClassSplit", "class_split"]


@dataclass(frozen=True, slots=True)
class ClassEffect:
    """One class's answer for one condition: its decidable steps (``rows``: the report words
    where it helps and hurts from them, ``report.crossover_words.where_effect``) and its
    largest significant change each way (ratio - 1)."""

    name: str
    rows: tuple[RatioRow, ...]
    best: float | None
    worst: float | None
    #: the loads (req/s) where it helps
    helping_qps: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class ClassSplit:
    """Classes that gain (a helping step) and classes that do not, for one condition."""

    condition: str
    baseline: str
    metric: str
    gain: tuple[ClassEffect, ...]
    rest: tuple[ClassEffect, ...]
    #: what the gaining classes go to: "a drafting pool" for speculative decoding
    pool: str = ""
    #: classes too small to decide at any step: (name, requests of the smaller side)
    small: tuple[tuple[str, int], ...] = ()


def _decidable(answer: ClassAnswer, condition: str, baseline: str, metric: str) -> list[RatioRow]:
    """The class's rows at steps where both sides have ``MIN_DECIDE_N`` successful requests
    (fewer: too small to decide), without the class's achieved
    load: that is its share of the step's load, not the load (a "4 (1.3) req/s" read as if
    the step ran at 1.3)."""
    rows = answer.ratios.get(condition, {}).get(metric) or []
    n_of = {
        label: {st.target_qps: st.n_ok for st in answer.steps.get(label, [])}
        for label in (condition, baseline)
    }
    return [
        replace(r, achieved_qps=None)
        for r in rows
        if min(n_of[condition].get(r.target_qps, 0), n_of[baseline].get(r.target_qps, 0))
        >= MIN_DECIDE_N
    ]


def _effect(name: str, rows: list[RatioRow]) -> ClassEffect:
    def changes(effect: str) -> list[float]:
        return [r.ratio.value - 1 for r in rows if r.effect == effect and r.ratio.value]

    helped, hurt = changes(HELPS), changes(HURTS)
    return ClassEffect(
        name,
        tuple(rows),
        min(helped) if helped else None,
        max(hurt) if hurt else None,
        tuple(r.target_qps for r in rows if r.effect == HELPS),
    )


def class_split(
    condition: str, baseline: str, classes: list[ClassAnswer], metric: str, pool: str = ""
) -> ClassSplit | None:
    """The classes' answers for ``condition`` on ``metric``; None unless they disagree (a
    class helps at some tested load and another at none). ``pool``: what the gaining classes
    are routed to (default "a pool running CONDITION")."""
    effects, small = [], []
    for a in classes:
        rows = a.ratios.get(condition, {}).get(metric) or []
        if not any(r.ratio.value is not None for r in rows):
            continue
        use = _decidable(a, condition, baseline, metric)
        if any(r.ratio.value is not None for r in use):
            effects.append(_effect(a.name, use))
        else:  # said, with its size, never routed on
            small.append((a.name, min(a.n.get(condition, 0), a.n.get(baseline, 0))))
    gain = tuple(e for e in effects if e.helping_qps)
    rest = tuple(e for e in effects if not e.helping_qps)
    if not (gain and rest):
        return None
    return ClassSplit(condition, baseline, metric, gain, rest, pool, tuple(small))

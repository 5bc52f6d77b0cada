"""The one rule in words: an effect as a reader sees it, and the rule in one sentence, shown
in every report next to the figures it classifies (the terminal, Markdown, HTML,
report.json's ``rule`` and the web UI's ``effects``).

``analysis/statistics/effect.py`` applies the rule and returns its answers as facts
(``helps``, ``hurts``, ``same``, ``undecided``, ``incomplete``); they are worded here only,
and so is why a step is incomplete (``analysis/statistics/completeness.py``'s facts).
"""

from __future__ import annotations

from specload.analysis.statistics.completeness import Incomplete, OverBudget, WorkerLost
from specload.analysis.statistics.effect import INCOMPLETE
from specload.report.wording import pct

__all__ = ["effect_text", "incomplete_text", "rule_text"]


def effect_text(effect: str) -> str:
    """How a reader sees an effect: ``helps``, ``hurts``, ``same``, ``undecided``."""
    return {INCOMPLETE: "left out (incomplete)"}.get(effect, effect)


def incomplete_text(why: Incomplete) -> str:
    """Why a step is left out: "spec: errors 19/200 (10 %) over the 5 % budget", "spec2: a
    worker was lost"."""
    match why:
        case OverBudget():
            return (
                f"{why.condition}: errors {why.errors}/{why.requests} ({pct(why.error_rate)} %) "
                f"over the {pct(why.budget)} % budget"
            )
        case WorkerLost(run=run):
            return f"{run}: a worker was lost" if run else "a worker was lost"


def rule_text(metric_label: str, min_gain: float) -> str:
    """The rule in one sentence, shown in every report next to the figures it classifies."""
    if min_gain > 0:
        by = f"at least {min_gain * 100:g} % "
        return (
            f"A step helps when {metric_label} is {by}lower than the baseline's and the 95 % CI "
            f"of the change lies entirely below 0; it hurts when it is {by}higher and the CI "
            f"lies entirely above 0; it is the same when the whole CI lies within ±{min_gain * 100:g} %; "
            "otherwise it is undecided (more measurement would decide it)."
        )
    return (
        f"A step helps when {metric_label} is lower than the baseline's with the 95 % CI of "
        "the change entirely below 0; it hurts when the CI lies entirely above 0; otherwise "
        "it is undecided (with --min-gain 0 no step can be shown the same)."
    )

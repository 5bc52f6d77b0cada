"""The one rule in words: an effect as a reader sees it, and the rule in one sentence, shown
in every report next to the figures it classifies (the terminal, Markdown, HTML,
report.json's ``rule`` and the web UI's ``effects``).

``analysis/statistics/effect.py`` applies the rule and returns its answers as facts
(``helps``, ``hurts``, ``same``, ``undecided``, ``incomplete``); they are worded here only.
"""

from __future__ import annotations

from specload.analysis.statistics.effect import INCOMPLETE

__all__ = ["effect_text", "rule_text"]


def effect_text(effect: str) -> str:
    """How a reader sees an effect: ``helps``, ``hurts``, ``same``, ``undecided``."""
    return {INCOMPLETE: "left out (incomplete)"}.get(effect, effect)


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

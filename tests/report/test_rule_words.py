"""The one rule's words (``report/rule_words.py``), golden: every report states the rule in
these words next to the figures, and the web UI shows the effects by them."""

from __future__ import annotations

from specload.analysis.statistics.completeness import OverBudget, WorkerLost
from specload.analysis.statistics.effect import EFFECTS, HELPS, INCOMPLETE
from specload.report.rule_words import effect_text, incomplete_text, rule_text


def test_an_effect_reads_as_itself_and_incomplete_as_left_out() -> None:
    assert effect_text(HELPS) == "helps"
    assert effect_text(INCOMPLETE) == "left out (incomplete)"
    assert [effect_text(e) for e in EFFECTS] == [
        "helps", "hurts", "same", "undecided", "n/a", "left out (incomplete)",
    ]  # fmt: skip


def test_the_rule_in_one_sentence_with_and_without_a_margin() -> None:
    assert rule_text("the latency", 0.05) == (
        "A step helps when the latency is at least 5 % lower than the baseline's and the 95 % "
        "CI of the change lies entirely below 0; it hurts when it is at least 5 % higher and "
        "the CI lies entirely above 0; it is the same when the whole CI lies within ±5 %; "
        "otherwise it is undecided (more measurement would decide it)."
    )
    assert rule_text("p50 TPOT", 0.0) == (
        "A step helps when p50 TPOT is lower than the baseline's with the 95 % CI of the change "
        "entirely below 0; it hurts when the CI lies entirely above 0; otherwise it is "
        "undecided (with --min-gain 0 no step can be shown the same)."
    )


def test_why_a_step_is_left_out() -> None:
    assert incomplete_text(OverBudget("spec", 19, 200, 0.095, 0.05)) == (
        "spec: errors 19/200 (10 %) over the 5 % budget"
    )
    assert incomplete_text(OverBudget("spec", 1, 200, 0.005, 0.004)) == (
        "spec: errors 1/200 (0.5 %) over the 0.4 % budget"
    )
    assert incomplete_text(WorkerLost("spec2")) == "spec2: a worker was lost"
    assert incomplete_text(WorkerLost("")) == "a worker was lost"

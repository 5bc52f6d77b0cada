"""The attribution's lines, worded from its facts (ratios per step, whether they add up)."""

from __future__ import annotations

from specload.analysis.decisions.attribution import Attribution, AttributionStep
from specload.analysis.statistics.stats import Estimate
from specload.report.attribution_words import attribution_lines

LABELS = {"baseline": "base", "prefix": "pc", "spec": "sd", "both": "pc+sd"}


def _step(
    qps: float, ttft: tuple[float | None, ...], tpot: tuple[float, ...], adds: bool
) -> AttributionStep:
    """One step: the prefix, spec and both ratios of each family; TPOT adds up or not."""
    ratios = {
        fam: {role: Estimate(v) for role, v in zip(("prefix", "spec", "both"), vals, strict=True)}
        for fam, vals in (("ttft", ttft), ("tpot", tpot))
    }
    return AttributionStep(qps, ratios, {"ttft": Estimate(1.0), "tpot": Estimate(1.0)},
                           {"ttft": True, "tpot": adds})  # fmt: skip


def test_each_family_reads_as_its_changes_and_whether_they_add_up() -> None:
    att = Attribution(LABELS, [_step(2, (0.6, 1.05, 0.63), (1.0, 0.75, 0.75), True),
                               _step(8.5, (0.62, None, 0.64), (0.996, 0.74, 0.75), True)])  # fmt: skip
    assert attribution_lines(att) == [
        "TTFT (prefill) vs base at 2, 8.5 req/s: pc -40 %, -38 %; sd +5 %, n/a; "
        "pc+sd -37 %, -36 %; the combination adds up",
        "TPOT (decode) vs base at 2, 8.5 req/s: pc +0 %, -0 %; sd -25 %, -26 %; "
        "pc+sd -25 %, -25 %; the combination adds up",
    ]


def test_features_that_interact_at_one_step_do_not_add_up() -> None:
    att = Attribution(LABELS, [_step(2, (0.6, 1.0, 0.6), (1.0, 0.75, 0.75), True),
                               _step(8, (0.6, 1.0, 0.6), (1.0, 0.75, 1.0), False)])  # fmt: skip
    assert not att.adds_up("tpot") and att.adds_up("ttft")
    assert attribution_lines(att)[1] == (
        "TPOT (decode) vs base at 2, 8 req/s: pc +0 %, +0 %; sd -25 %, -25 %; pc+sd -25 %, +0 %; "
        "the combination does NOT add up (the features interact)"
    )

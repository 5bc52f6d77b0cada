"""The dynamic-schedule facts in words (``report/schedule_words.py``), golden: the analysis
returns which rule, which loads, which thresholds; every output prints these sentences."""

from __future__ import annotations

import pytest

from specload.analysis.schedules.schedule_results import (
    BatchFromClient,
    BestOfBoth,
    BestOfBothRow,
    HelpsApart,
    HelpsAtTop,
    KeptBelow,
    NeverHelped,
    NoPositionKept,
    NoRunningBatch,
    NoSpeculativeTokens,
    NothingDecided,
    PositionsDropped,
    ProposalError,
    ScatteredHelp,
    ScheduleNote,
    StartsDisagree,
    ThinMargin,
)
from specload.analysis.schedules.vllm_schedule_rules import (
    EndsBelowMax,
    FirstNotAtOne,
    Gap,
    KAboveMax,
    NegativeK,
    NoMaxK,
    NotAList,
    NotATriple,
    RangeNotPositive,
    RangesOverlap,
    RuleError,
    RuleNote,
    StartAfterEnd,
    Unsorted,
)
from specload.analysis.statistics.stats import Estimate
from specload.report.schedule_words import (
    best_of_both_verdict,
    proposal_error_text,
    proposal_note_text,
    schedule_rule_text,
)

K = "num_speculative_tokens_per_batch_size"


@pytest.mark.parametrize(
    "fact, text",
    [
        (NoMaxK(), "num_speculative_tokens must be an integer >= 1 with a schedule"),
        (NotAList(), f"{K} must be a non-empty list of [start, end, k]"),
        (NotATriple(2), f"{K}[2] must be [start, end, k], three integers"),
        (RangeNotPositive(0), f"{K}[0]: batch-size range must be positive"),
        (StartAfterEnd(1, 8, 6), f"{K}[1]: start 8 > end 6"),
        (NegativeK(0, -1), f"{K}[0]: k -1 must be >= 0"),
        (RangesOverlap(8), f"{K}: ranges overlap at batch size 8 (ranges must be non-overlapping)"),
        (FirstNotAtOne(), f"{K}: the first range must start at 1"),
        (Unsorted(), f"{K} is not sorted by start (vLLM sorts it)"),
        (Gap(5, 8), f"{K}: gap 5-8 (vLLM uses the previous range's k there)"),
        (KAboveMax(1, 4, 6, 4), f"{K}: k 6 for 1-4 is above num_speculative_tokens 4 (vLLM clamps it to 4)"),
        (EndsBelowMax(16, 256), f"{K} ends at 16: vLLM uses the last range's k up to max_num_seqs 256"),
    ],
)  # fmt: skip
def test_vllms_rules_in_words(fact: RuleError | RuleNote, text: str) -> None:
    assert schedule_rule_text(fact) == text


@pytest.mark.parametrize(
    "note, text",
    [
        (NeverHelped(), "speculation never helped at a tested load: k = 0 everywhere; better still, turn speculation off (drop the config)"),
        (HelpsApart((8.0, 16.0, 32.0)), "speculation helps at 8, 16, 32 req/s only, and not (or it hurts) at loads below or between: k = 0 everywhere; better still, turn speculation off (drop the config)"),
        (KeptBelow(2.0, (8.0, 16.0)), "does not help at the lowest step (2 req/s) but helps at 8, 16 req/s; not shown to help below, so k is kept there"),
        (HelpsAtTop(32.0), "still helps at the highest tested load (32 req/s): no k = 0 range; extend the sweep to find where it stops"),
        (ThinMargin(0.5, 8.1437, 6, 0.35, 0), "gain below 50% of its best from ≈ 8.14 req/s (batch > 6): positions accepted < 35% dropped there (k = 0)"),
        (PositionsDropped(4, 4, 0.2, 3), "draft position 4 accepted < 20% of the time: dropped (k = 3)"),
        (PositionsDropped(1, 4, 0.2, 0), "draft position 1-4 accepted < 20% of the time: dropped (k = 0)"),
        (NoPositionKept(), "no draft position is accepted often enough: turn speculation off"),
        (BatchFromClient(), "no vllm:num_requests_running from the server: batch sizes estimated from the client's figures (requests/s × p50 E2E)"),
    ],
)  # fmt: skip
def test_a_proposals_notes_in_words(note: ScheduleNote, text: str) -> None:
    assert proposal_note_text(note) == text


@pytest.mark.parametrize(
    "error, text",
    [
        (NoSpeculativeTokens(), "the config has no num_speculative_tokens >= 1 to schedule"),
        (StartsDisagree(), "the server starts disagree on where speculation helps; run more replicates before scheduling it"),
        (NothingDecided((4.0, 8.0, 16.0)), "no step is decided yet where speculation would be scheduled (undecided at 4, 8, 16 req/s): measure more before scheduling it"),
        (ScatteredHelp((2.0, 8.0)), "speculation helps at 2, 8 req/s only, with loads in between where it does not: no consistent range to schedule (lengthen the steps or add replicates)"),
        (NoRunningBatch(), "cannot place the crossover in batch terms: no running-batch figures at the crossover load"),
        (FirstNotAtOne(), f"{K}: the first range must start at 1"),  # vLLM refusing the result
    ],
)  # fmt: skip
def test_why_no_schedule_was_proposed_in_words(error: ProposalError, text: str) -> None:
    assert proposal_error_text(error) == text


def _row(qps: float, best_of: str, ratio: float, verdict: str) -> BestOfBothRow:
    e = Estimate(0.01)
    return BestOfBothRow(qps, e, e, best_of, Estimate(ratio, ratio - 0.02, ratio + 0.02), verdict)


def _check(rows: list[BestOfBothRow], status: str, **kw: float) -> BestOfBoth:
    return BestOfBoth("dyn", "spec", "baseline", "tpot_p50", [[1, 4, 4]], rows, status, **kw)


def test_best_of_both_verdicts_in_words() -> None:
    delivered = _check([_row(2, "spec", 1.0, "delivered"), _row(32, "baseline", 0.99, "better")],
                       "delivered")  # fmt: skip
    assert best_of_both_verdict(delivered) == (
        "dyn delivered the better of both on p50 TPOT: within the noise or faster than "
        "min(baseline, spec) at every step (2–32 req/s)"
    )
    rows = [
        _row(2, "spec", 1.3, "costs"),
        _row(8, "spec", 1.32, "costs"),
        _row(16, "spec", 1.0, "delivered"),
        _row(32, "baseline", 1.27, "costs"),
    ]
    costs = _check(rows, "costs", cost_low=0.32, cost_high=0.27)
    assert best_of_both_verdict(costs) == (
        "dyn did not deliver the better of both on p50 TPOT: costs 32 % at low load (vs spec, "
        "2–8 req/s) and costs 27 % at high load (vs baseline, 32 req/s)"
    )
    low_only = _check(rows[:3], "costs", cost_low=0.32)
    assert best_of_both_verdict(low_only).endswith(": costs 32 % at low load (vs spec, 2–8 req/s)")


def test_a_best_of_both_check_without_a_partner_or_a_common_step_says_why() -> None:
    alone = BestOfBoth("dyn", None, "baseline", "tpot_p50", [], status="n/a")
    assert best_of_both_verdict(alone) == (
        "dyn: no fixed-k speculative condition to compare it with"
    )
    apart = BestOfBoth("dyn", "spec", "baseline", "tpot_p50", [], status="n/a")
    assert best_of_both_verdict(apart) == "dyn: no step shared with baseline and spec"

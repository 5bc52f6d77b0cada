"""The dynamic-schedule facts in words: vLLM's rules, a proposal's notes and errors, and the
best-of-both verdict.

``analysis/schedules/`` returns them as dataclasses and figures (which entry, which loads,
which thresholds); the tables and lines (``schedule_tables.py``) and report.json's ``notes``,
``errors`` and ``verdict`` (``jsonout.py``) all read them from here, so every output says
the same.
"""

from __future__ import annotations

from collections.abc import Sequence

from specload.analysis.schedules.schedule_results import (
    COSTS,
    DELIVERED,
    BatchFromClient,
    BestOfBoth,
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
    SCHEDULE_KEY,
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
from specload.report.wording import metric_label

__all__ = [
    "best_of_both_verdict",
    "proposal_error_text",
    "proposal_note_text",
    "schedule_rule_text",
]

#: what a proposal that turns speculation off everywhere adds to its reason
_OFF = ": k = 0 everywhere; better still, turn speculation off (drop the config)"


def _loads(qps: Sequence[float]) -> str:
    """ "2, 8" (req/s left to the sentence)."""
    return ", ".join(f"{q:g}" for q in qps)


def schedule_rule_text(fact: RuleError | RuleNote) -> str:
    """What vLLM 0.26 refuses or reinterprets in a schedule, as one line naming the entry."""
    if isinstance(fact, Unsorted | Gap | KAboveMax | EndsBelowMax):
        return _reinterpreted(fact)
    return _refused(fact)


def _refused(error: RuleError) -> str:
    k = SCHEDULE_KEY
    match error:
        case NoMaxK():
            return "num_speculative_tokens must be an integer >= 1 with a schedule"
        case NotAList():
            return f"{k} must be a non-empty list of [start, end, k]"
        case NotATriple(index=i):
            return f"{k}[{i}] must be [start, end, k], three integers"
        case RangeNotPositive(index=i):
            return f"{k}[{i}]: batch-size range must be positive"
        case StartAfterEnd(index=i, start=start, end=end):
            return f"{k}[{i}]: start {start} > end {end}"
        case NegativeK(index=i, k=bad):
            return f"{k}[{i}]: k {bad} must be >= 0"
        case RangesOverlap(at=at):
            return f"{k}: ranges overlap at batch size {at} (ranges must be non-overlapping)"
        case FirstNotAtOne():
            return f"{k}: the first range must start at 1"


def _reinterpreted(note: RuleNote) -> str:
    k = SCHEDULE_KEY
    match note:
        case Unsorted():
            return f"{k} is not sorted by start (vLLM sorts it)"
        case Gap(first=first, last=last):
            return f"{k}: gap {first}-{last} (vLLM uses the previous range's k there)"
        case KAboveMax(start=start, end=end, k=big, k_max=top):
            return (
                f"{k}: k {big} for {start}-{end} is above num_speculative_tokens {top} "
                f"(vLLM clamps it to {top})"
            )
        case EndsBelowMax(last_end=last, max_num_seqs=top):
            return f"{k} ends at {last}: vLLM uses the last range's k up to max_num_seqs {top}"


def proposal_note_text(note: ScheduleNote) -> str:
    """What shaped a proposed schedule's ranges, as one clause."""
    match note:
        case NeverHelped():
            return "speculation never helped at a tested load" + _OFF
        case HelpsApart(helping=helping):
            return (
                f"speculation helps at {_loads(helping)} req/s only, and not (or it hurts) at "
                "loads below or between" + _OFF
            )
        case KeptBelow(lowest=lowest, helping=helping):
            return (
                f"does not help at the lowest step ({lowest:g} req/s) but helps at "
                f"{_loads(helping)} req/s; not shown to help below, so k is kept there"
            )
        case HelpsAtTop(highest=highest):
            return (
                f"still helps at the highest tested load ({highest:g} req/s): no k = 0 range; "
                "extend the sweep to find where it stops"
            )
        case ThinMargin():
            return (
                f"gain below {note.gain_share:.0%} of its best from ≈ {note.from_qps:.3g} req/s "
                f"(batch > {note.batch}): positions accepted < {note.acceptance:.0%} dropped "
                f"there (k = {note.k})"
            )
        case PositionsDropped(first=first, last=last, min_acceptance=share, k=k):
            dropped = f"{first}" if first == last else f"{first}-{last}"
            return f"draft position {dropped} accepted < {share:.0%} of the time: dropped (k = {k})"
        case NoPositionKept():
            return "no draft position is accepted often enough: turn speculation off"
        case BatchFromClient():
            return (
                "no vllm:num_requests_running from the server: batch sizes estimated from the "
                "client's figures (requests/s × p50 E2E)"
            )


def proposal_error_text(error: ProposalError) -> str:
    """Why no schedule was proposed, as one clause (vLLM's refusals in its rules' words)."""
    match error:
        case NoSpeculativeTokens():
            return "the config has no num_speculative_tokens >= 1 to schedule"
        case StartsDisagree():
            return (
                "the server starts disagree on where speculation helps; run more replicates "
                "before scheduling it"
            )
        case NothingDecided(undecided=undecided):
            return (
                "no step is decided yet where speculation would be scheduled (undecided at "
                f"{_loads(undecided)} req/s): measure more before scheduling it"
            )
        case ScatteredHelp(helping=helping):
            return (
                f"speculation helps at {_loads(helping)} req/s only, with loads in between "
                "where it does not: no consistent range to schedule (lengthen the steps or "
                "add replicates)"
            )
        case NoRunningBatch():
            return (
                "cannot place the crossover in batch terms: no running-batch figures at the "
                "crossover load"
            )
        case _:
            return schedule_rule_text(error)


def best_of_both_verdict(b: BestOfBoth) -> str:
    """ "dyn delivered the better of both on p50 TPOT: ..."; "dyn did not deliver ...: costs
    32 % at low load (vs spec, 2–16 req/s) ..."; or why it could not be judged."""
    if b.static is None:
        return f"{b.condition}: no fixed-k speculative condition to compare it with"
    if not b.rows:
        return f"{b.condition}: no step shared with {b.baseline} and {b.static}"
    label = metric_label(b.metric)
    if b.status == DELIVERED:
        span = f"{b.rows[0].target_qps:g}–{b.rows[-1].target_qps:g} req/s"
        return (
            f"{b.condition} delivered the better of both on {label}: within the noise or "
            f"faster than min({b.baseline}, {b.static}) at every step ({span})"
        )
    parts = []
    for side, cost, who in (("low", b.cost_low, b.static), ("high", b.cost_high, b.baseline)):
        if cost is not None:
            qs = [r.target_qps for r in b.rows if r.verdict == COSTS and r.best_of == who]
            where = f"{min(qs):g}–{max(qs):g}" if len(qs) > 1 else f"{qs[0]:g}"
            parts.append(f"costs {cost * 100:.0f} % at {side} load (vs {who}, {where} req/s)")
    return f"{b.condition} did not deliver the better of both on {label}: " + " and ".join(parts)

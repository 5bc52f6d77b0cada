"""vLLM's rules for ``num_speculative_tokens_per_batch_size``, checked before a server starts.

vLLM 0.26 takes a batch-size schedule inside ``--speculative-config``:
``"num_speculative_tokens_per_batch_size": [[start, end, k], ...]`` (inclusive ranges of the
number of requests scheduled in a step). Its checks live in
``vllm/v1/spec_decode/dynamic/utils.py`` (``validate_and_normalize_dynamic_sd_schedule`` and
``build_dynamic_sd_schedule_lookup``; the field is declared in ``vllm/config/speculative.py``
with ``uses_dynamic_speculative_decoding()``). What vLLM rejects, this module reports as
errors: not a non-empty list; an entry that is not three integers; a start or end < 1;
start > end; k < 0; overlapping ranges (after vLLM sorts them by start); a first range not
starting at 1; and ``num_speculative_tokens`` < 1 (the lookup needs a positive maximum).

What vLLM accepts but quietly reinterprets is a *note*, not an error: entries out of order
(vLLM sorts them), a gap between ranges (vLLM carries the previous range's k across it),
batches above the last range (vLLM carries the last k up to ``max_num_seqs``), and
k > ``num_speculative_tokens`` (vLLM clamps it down). specload's own proposals have none of
these: sorted, contiguous from 1, every k in ``0..num_speculative_tokens``.

Errors and notes are facts (which entry, which figures); ``report/schedule_words.py`` words
them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "SCHEDULE_KEY",
    "EndsBelowMax",
    "FirstNotAtOne",
    "Gap",
    "KAboveMax",
    "NegativeK",
    "NoMaxK",
    "NotAList",
    "NotATriple",
    "RangeNotPositive",
    "RangesOverlap",
    "RuleError",
    "RuleNote",
    "ScheduleCheck",
    "StartAfterEnd",
    "Unsorted",
    "check_schedule",
    "is_dynamic",
    "k_for_batch",
]

SCHEDULE_KEY = "num_speculative_tokens_per_batch_size"


# -- what vLLM refuses (report/schedule_words.py words each) --------------------------------


@dataclass(frozen=True, slots=True)
class NoMaxK:
    """``num_speculative_tokens`` is not an integer >= 1: the lookup needs a positive maximum."""


@dataclass(frozen=True, slots=True)
class NotAList:
    """The schedule is not a non-empty list."""


@dataclass(frozen=True, slots=True)
class NotATriple:
    """Entry ``index`` is not three integers."""

    index: int


@dataclass(frozen=True, slots=True)
class RangeNotPositive:
    """Entry ``index`` has a start or an end below 1."""

    index: int


@dataclass(frozen=True, slots=True)
class StartAfterEnd:
    """Entry ``index`` starts after it ends."""

    index: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class NegativeK:
    """Entry ``index`` drafts a negative number of tokens."""

    index: int
    k: int


@dataclass(frozen=True, slots=True)
class RangesOverlap:
    """Two ranges (sorted by start) overlap at batch size ``at``."""

    at: int


@dataclass(frozen=True, slots=True)
class FirstNotAtOne:
    """The first range (sorted by start) does not start at batch size 1."""


RuleError = (
    NoMaxK | NotAList | NotATriple | RangeNotPositive | StartAfterEnd | NegativeK
    | RangesOverlap | FirstNotAtOne
)  # fmt: skip


# -- what vLLM accepts but reinterprets -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Unsorted:
    """The entries are not sorted by start (vLLM sorts them)."""


@dataclass(frozen=True, slots=True)
class Gap:
    """No range covers batch sizes ``first``..``last`` (vLLM carries the previous k)."""

    first: int
    last: int


@dataclass(frozen=True, slots=True)
class KAboveMax:
    """The range ``start``..``end`` drafts ``k`` > ``k_max`` tokens (vLLM clamps it)."""

    start: int
    end: int
    k: int
    k_max: int


@dataclass(frozen=True, slots=True)
class EndsBelowMax:
    """The last range ends at ``last_end`` < ``max_num_seqs`` (vLLM carries the last k up)."""

    last_end: int
    max_num_seqs: int


RuleNote = Unsorted | Gap | KAboveMax | EndsBelowMax


@dataclass(slots=True)
class ScheduleCheck:
    """``errors``: vLLM would refuse to start; ``notes``: it starts but reinterprets."""

    errors: list[RuleError] = field(default_factory=list)
    notes: list[RuleNote] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def is_dynamic(speculative: dict[str, Any] | None) -> bool:
    """True when a speculative config carries a batch-size schedule (vLLM's own test)."""
    return bool(speculative) and (speculative or {}).get(SCHEDULE_KEY) is not None


def _entries(schedule: Any, check: ScheduleCheck) -> list[tuple[int, int, int]]:
    if not isinstance(schedule, list) or not schedule:
        check.errors.append(NotAList())
        return []
    out = []
    for i, entry in enumerate(schedule):
        if not (
            isinstance(entry, (list, tuple))
            and len(entry) == 3
            and all(isinstance(v, int) and not isinstance(v, bool) for v in entry)
        ):
            check.errors.append(NotATriple(i))
            continue
        start, end, k = entry
        if start < 1 or end < 1:
            check.errors.append(RangeNotPositive(i))
        elif start > end:
            check.errors.append(StartAfterEnd(i, start, end))
        if k < 0:
            check.errors.append(NegativeK(i, k))
        out.append((start, end, k))
    return out


def _order(entries: list[tuple[int, int, int]], check: ScheduleCheck) -> None:
    if [e[0] for e in entries] != sorted(e[0] for e in entries):
        check.notes.append(Unsorted())
    ranges = sorted(entries)
    prev_end = 0
    for start, end, _ in ranges:
        if start <= prev_end:
            check.errors.append(RangesOverlap(start))
        elif start > prev_end + 1 and prev_end:
            check.notes.append(Gap(prev_end + 1, start - 1))
        prev_end = max(prev_end, end)
    if ranges and ranges[0][0] != 1:
        check.errors.append(FirstNotAtOne())


def check_schedule(speculative: dict[str, Any], max_num_seqs: int | None = None) -> ScheduleCheck:
    """vLLM 0.26's verdict on a speculative config with a batch-size schedule.

    ``max_num_seqs``, when known, adds a note if the last range ends below it (vLLM then
    keeps the last k up to ``max_num_seqs``).
    """
    check = ScheduleCheck()
    k_max = speculative.get("num_speculative_tokens")
    if not isinstance(k_max, int) or isinstance(k_max, bool) or k_max < 1:
        check.errors.append(NoMaxK())
        k_max = None
    entries = _entries(speculative.get(SCHEDULE_KEY), check)
    if check.errors:
        return check
    _order(entries, check)
    for start, end, k in entries:
        if k_max is not None and k > k_max:
            check.notes.append(KAboveMax(start, end, k, k_max))
    last_end = max(e[1] for e in entries)
    if max_num_seqs is not None and last_end < max_num_seqs:
        check.notes.append(EndsBelowMax(last_end, max_num_seqs))
    return check


def k_for_batch(speculative: dict[str, Any], batch: int) -> int:
    """The k vLLM 0.26 drafts for a step of ``batch`` requests (its dense lookup's rule):
    the covering range's k, else the last range before it, clamped to num_speculative_tokens.
    """
    k_max = int(speculative["num_speculative_tokens"])
    k = 0
    for start, end, rk in sorted(tuple(e) for e in speculative[SCHEDULE_KEY]):
        if start > batch:
            break
        k = rk
        if batch <= end:
            break
    return min(k, k_max)

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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["SCHEDULE_KEY", "ScheduleCheck", "check_schedule", "is_dynamic", "k_for_batch"]

SCHEDULE_KEY = "num_speculative_tokens_per_batch_size"


@dataclass(slots=True)
class ScheduleCheck:
    """``errors``: vLLM would refuse to start; ``notes``: it starts but reinterprets."""

    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def is_dynamic(speculative: dict[str, Any] | None) -> bool:
    """True when a speculative config carries a batch-size schedule (vLLM's own test)."""
    return bool(speculative) and (speculative or {}).get(SCHEDULE_KEY) is not None


def _entries(schedule: Any, check: ScheduleCheck) -> list[tuple[int, int, int]]:
    if not isinstance(schedule, list) or not schedule:
        check.errors.append(f"{SCHEDULE_KEY} must be a non-empty list of [start, end, k]")
        return []
    out = []
    for i, entry in enumerate(schedule):
        if not (
            isinstance(entry, (list, tuple))
            and len(entry) == 3
            and all(isinstance(v, int) and not isinstance(v, bool) for v in entry)
        ):
            check.errors.append(f"{SCHEDULE_KEY}[{i}] must be [start, end, k], three integers")
            continue
        start, end, k = entry
        if start < 1 or end < 1:
            check.errors.append(f"{SCHEDULE_KEY}[{i}]: batch-size range must be positive")
        elif start > end:
            check.errors.append(f"{SCHEDULE_KEY}[{i}]: start {start} > end {end}")
        if k < 0:
            check.errors.append(f"{SCHEDULE_KEY}[{i}]: k {k} must be >= 0")
        out.append((start, end, k))
    return out


def _order(entries: list[tuple[int, int, int]], check: ScheduleCheck) -> None:
    if [e[0] for e in entries] != sorted(e[0] for e in entries):
        check.notes.append(f"{SCHEDULE_KEY} is not sorted by start (vLLM sorts it)")
    ranges = sorted(entries)
    prev_end = 0
    for start, end, _ in ranges:
        if start <= prev_end:
            check.errors.append(
                f"{SCHEDULE_KEY}: ranges overlap at batch size {start} "
                "(ranges must be non-overlapping)"
            )
        elif start > prev_end + 1 and prev_end:
            check.notes.append(
                f"{SCHEDULE_KEY}: gap {prev_end + 1}-{start - 1} "
                "(vLLM uses the previous range's k there)"
            )
        prev_end = max(prev_end, end)
    if ranges and ranges[0][0] != 1:
        check.errors.append(f"{SCHEDULE_KEY}: the first range must start at 1")


def check_schedule(speculative: dict[str, Any], max_num_seqs: int | None = None) -> ScheduleCheck:
    """vLLM 0.26's verdict on a speculative config with a batch-size schedule.

    ``max_num_seqs``, when known, adds a note if the last range ends below it (vLLM then
    keeps the last k up to ``max_num_seqs``).
    """
    check = ScheduleCheck()
    k_max = speculative.get("num_speculative_tokens")
    if not isinstance(k_max, int) or isinstance(k_max, bool) or k_max < 1:
        check.errors.append("num_speculative_tokens must be an integer >= 1 with a schedule")
        k_max = None
    entries = _entries(speculative.get(SCHEDULE_KEY), check)
    if check.errors:
        return check
    _order(entries, check)
    for start, end, k in entries:
        if k_max is not None and k > k_max:
            check.notes.append(
                f"{SCHEDULE_KEY}: k {k} for {start}-{end} is above num_speculative_tokens "
                f"{k_max} (vLLM clamps it to {k_max})"
            )
    last_end = max(e[1] for e in entries)
    if max_num_seqs is not None and last_end < max_num_seqs:
        check.notes.append(
            f"{SCHEDULE_KEY} ends at {last_end}: vLLM uses the last range's k up to "
            f"max_num_seqs {max_num_seqs}"
        )
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

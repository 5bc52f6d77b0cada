"""Live per-step figures on the master, from the full-precision records as they arrive.

Feeds the progress line of ``specload run``, the web UI's specload tab (``snapshot()`` is its
JSON) and the run's error budget (``budget_reasons``). Only measured (non-warm-up) successful
requests enter the percentiles; errors are counted for every request of the step, and
separately for the measured window. Achieved QPS uses the workers' own count of requests
sent inside the step's measured window that count as load (``records.counts_as_load``: a
conversation's first turn, every open-loop request; compare counts records the same way), so
it is right at the step's end, before in-flight requests have returned their records; the
progress line sets that count beside the measured requests that have finished, so "errors
0/110 finished (168 sent)" compares like with like. A step is *settled* (``StepTally.settled``,
for the live comparison) when its measured records reach the workers' count of measured
arrivals they queued for it: both count the same thing (step, ``warmup`` false, any turn),
so a request still waiting in a queue keeps its step open.
"""

from __future__ import annotations

import bisect
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from specload.analysis.statistics.stats import quantile_sorted
from specload.core.records import LATE_S, behind_words, fell_behind
from specload.report.wording import step_name

__all__ = ["SETTLE_S", "LiveStats", "StepTally", "budget_reasons"]

#: Seconds after a step's end before its sent counts are taken as final (workers report
#: every 0.5 s).
SETTLE_S = 1.5


@dataclass
class StepTally:
    """What arrived so far for one step. Times in seconds."""

    index: int
    repeat: int
    target_qps: float
    start: float
    warmup_end: float
    end: float
    records: int = 0
    measured: int = 0
    errors: int = 0
    measured_errors: int = 0
    #: measured successful requests' figures, each list kept in ascending order
    ttft_s: list[float] = field(default_factory=list)
    tpot_s: list[float] = field(default_factory=list)
    e2e_s: list[float] = field(default_factory=list)
    tokens_per_chunk: list[float] = field(default_factory=list)
    sent_in_window: dict[str, int] = field(default_factory=dict)
    #: per worker, measured arrivals queued for this step (each ends as one measured record)
    due: dict[str, int] = field(default_factory=dict)
    #: per worker, every arrival queued for this step (warm-up and cool-down included)
    queued: dict[str, int] = field(default_factory=dict)
    #: per worker, when its last counts for this step arrived (unix s)
    counted_at: dict[str, float] = field(default_factory=dict)
    #: an interleaved block's condition ("" outside a session)
    condition: str = ""
    #: a closed-loop step's requests in flight (0: open loop at target_qps)
    concurrency: int = 0
    #: how late each measured request was sent against its schedule (seconds, ascending)
    queue_delay_s: list[float] = field(default_factory=list)

    def add(self, r: dict[str, Any]) -> None:
        self.records += 1
        if not r.get("ok"):
            self.errors += 1
        if r.get("warmup"):
            return
        self.measured += 1
        late = r.get("queue_delay_s")
        if late is not None:
            bisect.insort(self.queue_delay_s, float(late))
        if not r.get("ok"):
            self.measured_errors += 1
            return
        for key, dest in (("ttft_s", self.ttft_s), ("tpot_s", self.tpot_s), ("e2e_s", self.e2e_s)):
            v = r.get(key)
            if v is not None:
                bisect.insort(dest, float(v))
        chunks, tokens = r.get("content_chunks"), r.get("output_tokens")
        if chunks and tokens:
            bisect.insort(self.tokens_per_chunk, tokens / chunks)

    @property
    def late_share(self) -> float:
        """Share of the measured requests sent past ``LATE_S`` (``queue_delay_s`` is sorted)."""
        q = self.queue_delay_s
        return (len(q) - bisect.bisect_right(q, LATE_S)) / len(q) if q else 0.0

    @property
    def sent(self) -> int:
        """Measured-window requests sent so far, over all workers."""
        return sum(self.sent_in_window.values())

    def settled(self, now: float, grace_s: float) -> bool:
        """The step's figures are final: it ended at least ``SETTLE_S`` ago (the workers' last
        counts have arrived) and every measured arrival queued for it has its record, or it
        ended more than ``grace_s`` ago (whatever is missing will not come). The one
        definition the live comparison waits for (``LiveStats.settled``)."""
        if now < self.end + SETTLE_S:
            return False
        return self.measured >= sum(self.due.values()) or now >= self.end + grace_s

    @property
    def measured_in(self) -> bool:
        """Every measured arrival queued so far has its record: nothing measured in flight."""
        return self.measured >= sum(self.due.values())

    @property
    def idle(self) -> bool:
        """Every arrival queued so far has its record: nothing of this step in flight."""
        return self.records >= sum(self.queued.values())

    @property
    def achieved_qps(self) -> float | None:
        window = self.end - self.warmup_end
        if window <= 0 or not self.sent_in_window:
            return None
        return sum(self.sent_in_window.values()) / window

    def summary(self) -> dict[str, Any]:
        """JSON-ready figures for this step (latencies in seconds)."""
        out: dict[str, Any] = {
            "index": self.index,
            "repeat": self.repeat,
            "target_qps": self.target_qps,
            "concurrency": self.concurrency,
            "start": self.start,
            "warmup_end": self.warmup_end,
            "end": self.end,
            "achieved_qps": self.achieved_qps,
            "records": self.records,
            "measured": self.measured,
            "errors": self.errors,
        }
        for key, values in (
            ("ttft_s", self.ttft_s),
            ("tpot_s", self.tpot_s),
            ("e2e_s", self.e2e_s),
        ):
            out[key] = {
                "p50": quantile_sorted(values, 0.50),
                "p95": quantile_sorted(values, 0.95),
                "n": len(values),
            }
        out["tokens_per_chunk"] = quantile_sorted(self.tokens_per_chunk, 0.50)
        return out


class LiveStats:
    """All steps of the current run, plus the latest server-metric figures per step."""

    def __init__(self) -> None:
        self.steps: dict[int, StepTally] = {}
        self.current: int | None = None
        self.server: dict[int, dict[str, Any]] = defaultdict(dict)

    def begin_step(
        self,
        index: int,
        repeat: int,
        target_qps: float,
        start: float,
        warmup_end: float,
        end: float,
        concurrency: int = 0,
        condition: str = "",
    ) -> None:
        self.steps[index] = StepTally(
            index,
            repeat,
            target_qps,
            start,
            warmup_end,
            end,
            concurrency=concurrency,
            condition=condition,
        )
        self.current = index

    def add(self, r: dict[str, Any]) -> None:
        tally = self.steps.get(int(r.get("step", -1)))
        if tally is not None:
            tally.add(r)

    def set_sent_in_window(self, worker: str, counts: dict[int, int]) -> None:
        for step, n in counts.items():
            tally = self.steps.get(step)
            if tally is not None:
                tally.sent_in_window[worker] = n

    def set_due(
        self, worker: str, due: dict[int, int], queued: dict[int, int] | None = None
    ) -> None:
        now = time.time()
        for counts, attr in ((due, "due"), (queued or {}, "queued")):
            for step, n in counts.items():
                tally = self.steps.get(step)
                if tally is not None:
                    getattr(tally, attr)[worker] = n
                    tally.counted_at[worker] = now

    def rewindow(self, index: int, warmup_end: float, end: float) -> None:
        """A block whose warm-up was held longer (``locust/blocks.py``)."""
        tally = self.steps.get(index)
        if tally is not None:
            tally.warmup_end, tally.end = warmup_end, end

    def settled(self, now: float, grace_s: float) -> set[int]:
        """Steps whose figures are final (``StepTally.settled``)."""
        return {i for i, t in self.steps.items() if t.settled(now, grace_s)}

    def progress_line(self, index: int, total_steps: int, left_s: float | None = None) -> str:
        """One line for the terminal: step, target/achieved QPS, live p50 TPOT, errors.

        All figures are the measured window's (after warm-up): errors over the requests that
        have finished, then how many were sent (the rest are still in flight).
        """
        t = self.steps[index]
        achieved = t.achieved_qps
        tpot = quantile_sorted(t.tpot_s, 0.50)
        load = step_name(0.0, t.concurrency) if t.concurrency else f"target {t.target_qps:g} qps"
        behind = (
            f"; fell behind: {behind_words(t.late_share, quantile_sorted(t.queue_delay_s, 0.95))}"
            if fell_behind(t.late_share) and not t.concurrency
            else ""
        )
        head = f"step {index + 1}/{total_steps} (repeat {t.repeat})"
        if t.condition:
            head = f"block {index + 1}/{total_steps} ({t.condition})"
        left = "" if left_s is None else f"; about {left_s / 60:.1f} min left"
        return (
            f"{head}: {load}, "
            f"achieved {'-' if achieved is None else f'{achieved:.2f}'} qps, "
            f"p50 TPOT {'-' if tpot is None else f'{tpot * 1000:.2f}'} ms, "
            f"errors {t.measured_errors}/{t.measured} finished ({t.sent} sent){behind}{left}"
        )

    def snapshot(self) -> dict[str, Any]:
        """Everything known so far, JSON-ready (the web UI tab's data)."""
        return {
            "current_step": self.current,
            "steps": [
                {**t.summary(), "server": self.server.get(i) or None}
                for i, t in sorted(self.steps.items())
            ],
        }


def _pct(fraction: float) -> str:
    return f"{fraction * 100:.3g} %"


def _step_at(tallies: list[StepTally], t: float) -> str:
    """Where in the schedule time ``t`` fell: "at 8 req/s", or before/after the steps."""
    for tally in tallies:
        if tally.start <= t < tally.end:
            return f"at {tally.target_qps:g} req/s"
    if tallies and t < tallies[0].start:
        return "before the first step"
    return "after the last step"


def budget_reasons(
    steps: dict[int, StepTally],
    lost_workers: list[dict[str, Any]],
    max_error_rate: float,
    unrecorded: dict[str, int] | None = None,
) -> list[str]:
    """Why a run that went to its end is ``degraded``: one sentence per step whose error
    rate (errors / records, warm-up included) exceeds ``max_error_rate``, one for the whole
    run, one per worker with requests sent but not recorded (``unrecorded``: worker → count),
    one per lost worker. Empty when the run kept its budget."""
    tallies = [steps[i] for i in sorted(steps)]
    budget = f"exceed --max-error-rate {_pct(max_error_rate)}"
    per_qps: dict[float, int] = defaultdict(int)
    for t in tallies:
        per_qps[t.target_qps] += 1
    out: list[str] = []
    total, errors = sum(t.records for t in tallies), sum(t.errors for t in tallies)
    if total and errors / total > max_error_rate:
        out.append(f"errors {errors}/{total} ({_pct(errors / total)}) over the whole run {budget}")
    for t in tallies:
        if t.records and t.errors / t.records > max_error_rate:
            where = f"at {t.target_qps:g} req/s"
            if per_qps[t.target_qps] > 1:
                where += f" (step {t.index + 1}, repeat {t.repeat})"
            out.append(
                f"errors {t.errors}/{t.records} ({_pct(t.errors / t.records)}) {where} {budget}"
            )
    for worker, n in sorted((unrecorded or {}).items()):
        out.append(f"worker {worker}: {n} requests sent without a record")
    for lost in lost_workers:
        out.append(f"worker {lost.get('worker')} lost {_step_at(tallies, float(lost['at']))}")
    return out

"""Live per-step figures on the master, from the full-precision records as they arrive.

Feeds the progress line of ``specload run`` and the web UI's specload tab (``snapshot()``
is its JSON). Only measured (non-warm-up) successful requests enter the percentiles; errors
are counted for every request of the step. Achieved QPS uses the workers' own count of
requests sent inside the step's measured window, so it is right at the step's end, before
in-flight requests have returned their records.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LiveStats", "StepTally", "percentile"]


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile (``q`` in 0..100) of unsorted ``values``; None if empty."""
    if not values:
        return None
    s = sorted(values)
    k = (len(s) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


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
    ttft_s: list[float] = field(default_factory=list)
    tpot_s: list[float] = field(default_factory=list)
    e2e_s: list[float] = field(default_factory=list)
    tokens_per_chunk: list[float] = field(default_factory=list)
    sent_in_window: dict[str, int] = field(default_factory=dict)

    def add(self, r: dict[str, Any]) -> None:
        self.records += 1
        if not r.get("ok"):
            self.errors += 1
        if r.get("warmup"):
            return
        self.measured += 1
        if not r.get("ok"):
            return
        for key, dest in (("ttft_s", self.ttft_s), ("tpot_s", self.tpot_s), ("e2e_s", self.e2e_s)):
            v = r.get(key)
            if v is not None:
                dest.append(float(v))
        chunks, tokens = r.get("content_chunks"), r.get("output_tokens")
        if chunks and tokens:
            self.tokens_per_chunk.append(tokens / chunks)

    @property
    def achieved_qps(self) -> float | None:
        window = self.end - self.warmup_end
        if window <= 0 or not self.sent_in_window:
            return None
        return sum(self.sent_in_window.values()) / window

    def summary(self) -> dict[str, Any]:
        """JSON-ready figures for this step (latencies in seconds)."""
        out: dict[str, Any] = {
            "index": self.index, "repeat": self.repeat, "target_qps": self.target_qps,
            "start": self.start, "warmup_end": self.warmup_end, "end": self.end,
            "achieved_qps": self.achieved_qps, "records": self.records,
            "measured": self.measured, "errors": self.errors,
        }
        for key, values in (("ttft_s", self.ttft_s), ("tpot_s", self.tpot_s), ("e2e_s", self.e2e_s)):
            out[key] = {"p50": percentile(values, 50), "p95": percentile(values, 95), "n": len(values)}
        out["tokens_per_chunk"] = percentile(self.tokens_per_chunk, 50)
        return out


class LiveStats:
    """All steps of the current run, plus the latest server-metric figures per step."""

    def __init__(self) -> None:
        self.steps: dict[int, StepTally] = {}
        self.current: int | None = None
        self.server: dict[int, dict[str, Any]] = defaultdict(dict)

    def begin_step(self, index: int, repeat: int, target_qps: float, start: float,
                   warmup_end: float, end: float) -> None:
        self.steps[index] = StepTally(index, repeat, target_qps, start, warmup_end, end)
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

    def progress_line(self, index: int, total_steps: int) -> str:
        """One line for the terminal: step, target/achieved QPS, live p50 TPOT, errors."""
        t = self.steps[index]
        achieved = t.achieved_qps
        tpot = percentile(t.tpot_s, 50)
        return (
            f"step {index + 1}/{total_steps} (repeat {t.repeat}): target {t.target_qps:g} qps, "
            f"achieved {'-' if achieved is None else f'{achieved:.2f}'} qps, "
            f"p50 TPOT {'-' if tpot is None else f'{tpot * 1000:.2f}'} ms, "
            f"errors {t.errors}/{t.records}"
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

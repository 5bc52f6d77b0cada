"""A scenario's steps laid on the clock: absolute, back-to-back windows (unix seconds).

Fixed when the run starts, so every process agrees on every boundary and no message latency
or tick granularity moves one. ``prompt_offset`` is where each step starts in the prompt set
(the expected number of arrivals before it), so runs of different conditions send the same
prompts in the same order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["TimedStep", "timed_steps"]


@dataclass(frozen=True, slots=True)
class TimedStep:
    """A scheduled step: ``[start, end)``, warm-up until ``warmup_end`` (unix seconds)."""

    index: int
    repeat: int
    target_qps: float
    start: float
    warmup_end: float
    end: float
    prompt_offset: int
    #: a closed-loop step's requests in flight (0: an open-loop QPS step)
    concurrency: int = 0
    #: an interleaved block (``locust/blocks.py``): its condition, its number in the session,
    #: its arrival seed; its load goes on past ``end`` until the next block (``open_end``)
    condition: str = ""
    block: int | None = None
    seed: int | None = None
    origin: float | None = None
    #: the block whose load this one takes over with no warm-up (same server and cell:
    #: ``protocol.interleave.continues``); its closed-loop requests in flight count as this
    #: block's
    continues: int | None = None

    @property
    def open_end(self) -> bool:
        return self.block is not None

    def window(self) -> tuple[int, int, float, float, float, float]:
        """``(index, repeat, target_qps, start, warmup_end, end)``: the step as the live
        figures and every worker's ``StepChange`` begin with it."""
        return (self.index, self.repeat, self.target_qps, self.start, self.warmup_end, self.end)


def timed_steps(plans: Sequence[Any], t0: float, *, replay: bool = False) -> list[TimedStep]:
    """``Scenario.schedule()`` plans (index, repeat, target_qps, warmup_s, duration_s) from ``t0``.

    Each step goes on through the prompt set where the last one stopped (``prompt_offset``),
    except a trace replay (``replay``), whose every step sends the trace's requests in order."""
    steps: list[TimedStep] = []
    t, offset = t0, 0
    for p in plans:
        total = p.warmup_s + p.duration_s
        steps.append(
            TimedStep(
                p.index,
                p.repeat,
                p.target_qps,
                t,
                t + p.warmup_s,
                t + total,
                offset,
                getattr(p, "concurrency", 0),
            )
        )
        offset = 0 if replay else offset + round(p.target_qps * total)
        t += total
    return steps

"""Which steps' data are complete enough to conclude from: the error budget and lost workers.

A step whose error rate passed the run's error budget (``--max-error-rate``, recorded in
run.json as ``max_error_rate``) has latencies from the requests that survived, a biased
sample; a step in which a worker was lost ran below its target load. Such a step keeps its
figures in the tables but is left out of every conclusion (``analysis.statistics.effect.INCOMPLETE``),
and the verdict names it with the reason: a fact here (``OverBudget``, ``WorkerLost``),
worded by ``report/rule_words.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specload.analysis.inputs.run_columns import RunColumns
from specload.analysis.statistics.steps import StepStats
from specload.core.budget import DEFAULT_MAX_ERROR_RATE

__all__ = ["Incomplete", "OverBudget", "WorkerLost", "error_budget", "incomplete_steps"]


@dataclass(frozen=True, slots=True)
class OverBudget:
    """A step of ``condition`` whose error rate passed the budget: ``errors`` of ``requests``."""

    condition: str
    errors: int
    requests: int
    error_rate: float
    budget: float


@dataclass(frozen=True, slots=True)
class WorkerLost:
    """A step in which a worker of run ``run`` (its name; "" when unnamed) was lost."""

    run: str


#: why a step is incomplete
Incomplete = OverBudget | WorkerLost


def error_budget(runs: list[RunColumns], override: float | None = None) -> float:
    """``override``, else the strictest ``max_error_rate`` the runs recorded, else 5 %."""
    if override is not None:
        return override
    recorded = [float(r.meta.max_error_rate) for r in runs if r.meta.max_error_rate is not None]
    return min(recorded) if recorded else DEFAULT_MAX_ERROR_RATE


def incomplete_steps(
    steps: list[StepStats], lost_workers: list[dict[str, Any]], budget: float
) -> dict[float, Incomplete]:
    """Target QPS → why that step of one condition is incomplete (the budget first)."""
    out: dict[float, Incomplete] = {}
    for s in steps:
        if s.n and s.error_rate > budget:
            out[s.target_qps] = OverBudget(s.condition, s.n - s.n_ok, s.n, s.error_rate, budget)
    for w in lost_workers:
        q = w.get("target_qps")
        if isinstance(q, (int, float)):
            out.setdefault(float(q), WorkerLost(str(w.get("run") or "")))
    return out

"""Closed-loop steps (``{concurrency: N}``): the single-request case, apart from QPS steps.

Practitioners record one request at a time (``concurrency: 1``) next to concurrent load: it
is the latency a lone user sees, with no batching at all, where speculative decoding gains
most. Such a step has no target rate (its records carry ``target_qps`` 0 and
``concurrency`` N), so it is kept out of the QPS ladder (``ladder_only``: the crossover and
the verdict are about open-loop load) and compared on its own here, by the same statistics
and rule (``analysis.steps``, ``analysis.ratios``), level by level.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from specload.analysis.classes import restrict
from specload.analysis.ratios import RatioRow, step_ratios
from specload.analysis.run_columns import RunColumns
from specload.analysis.steps import StepStats, condition_steps

__all__ = ["ClosedLoop", "closed_loop", "has_closed_loop", "ladder_only"]


@dataclass(slots=True)
class ClosedLoop:
    """One concurrency level: each condition's figures and its ratios to the baseline."""

    concurrency: int
    steps: dict[str, StepStats] = field(default_factory=dict)
    #: condition -> metric -> the one row at this level
    ratios: dict[str, dict[str, RatioRow]] = field(default_factory=dict)


def _closed(run: RunColumns) -> np.ndarray:
    return np.asarray(run.cols["target_qps"] == 0, dtype=bool)


def has_closed_loop(runs: list[RunColumns]) -> bool:
    return any(_closed(r).any() for r in runs)


def ladder_only(run: RunColumns) -> RunColumns:
    """The run without its closed-loop steps (records and steps.json entries)."""
    cut = restrict(run, ~_closed(run))
    return replace(
        cut,
        steps=[s for s in run.steps if not s.get("concurrency")],
        warnings=run.warnings,
    )


def _level(run: RunColumns, c: int) -> RunColumns:
    cut = restrict(run, _closed(run) & (run.cols["concurrency"] == c))
    return replace(cut, steps=[s for s in run.steps if s.get("concurrency") == c])


def closed_loop(
    groups: dict[str, list[RunColumns]], baseline: str, min_gain: float, b: int, seed: int
) -> list[ClosedLoop]:
    """Per concurrency level present in every condition: figures and ratios."""
    levels = None
    for rs in groups.values():
        have = {int(c) for r in rs for c in r.cols["concurrency"][_closed(r)] if np.isfinite(c)}
        levels = have if levels is None else levels & have
    out = []
    for c in sorted(levels or ()):
        level = ClosedLoop(c)
        for label, rs in groups.items():
            (s,) = condition_steps(label, [_level(r, c) for r in rs], b=b, seed=seed)
            level.steps[label] = s
        for label, s in level.steps.items():
            if label != baseline:
                rows, _ = step_ratios([s], [level.steps[baseline]], min_gain)
                level.ratios[label] = {m: r[0] for m, r in rows.items() if r}
        out.append(level)
    return out

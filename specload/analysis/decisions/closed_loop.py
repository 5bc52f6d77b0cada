"""Closed-loop steps (``{concurrency: N}``): the single-request case, apart from QPS steps.

Practitioners record one request at a time (``concurrency: 1``) next to concurrent load: it
is the latency a lone user sees, with no batching at all, where speculative decoding gains
most. Such a step has no target rate (its records carry ``target_qps`` 0 and
``concurrency`` N), so it is kept out of the QPS ladder (``ladder_only``: the crossover and
the verdict are about open-loop load) and compared on its own here, by the same statistics
and rule (``analysis.statistics.steps``, ``analysis.statistics.ratios``), level by level.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from specload.analysis.decisions.classes import restrict
from specload.analysis.inputs.run_columns import RunColumns
from specload.analysis.statistics.ratios import RatioRow, step_ratios
from specload.analysis.statistics.steps import StepStats, condition_steps

__all__ = [
    "LOCKSTEP_S",
    "LOCKSTEP_SHARE",
    "ClosedLoop",
    "closed_loop",
    "has_closed_loop",
    "ladder_only",
    "lockstep_share",
]

#: Two sends closer than this are "together": a closed-loop step's users in lockstep.
LOCKSTEP_S = 0.020
#: A closed-loop step with more than this share of sends together ran in lockstep: its
#: TTFT measured bursts of N simultaneous prefills, not N requests in flight.
LOCKSTEP_SHARE = 0.5


@dataclass(slots=True)
class ClosedLoop:
    """One concurrency level: each condition's figures and its ratios to the baseline."""

    concurrency: int
    steps: dict[str, StepStats] = field(default_factory=dict)
    #: condition -> metric -> the one row at this level
    ratios: dict[str, dict[str, RatioRow]] = field(default_factory=dict)
    #: condition -> share of its measured sends within ``LOCKSTEP_S`` of another send of
    #: the same step execution (``lockstep_share``)
    lockstep: dict[str, float] = field(default_factory=dict)

    @property
    def in_lockstep(self) -> dict[str, float]:
        """The conditions whose users ran in lockstep at this level (more than
        ``LOCKSTEP_SHARE`` of sends together; one user cannot), with their share
        (``report.compare_words`` warns of them)."""
        return {
            label: share
            for label, share in self.lockstep.items()
            if self.concurrency > 1 and share > LOCKSTEP_SHARE
        }


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
    for rs in groups.values():  # levels with measured requests in every condition
        have = {
            int(c)
            for r in rs
            for c in r.cols["concurrency"][_closed(r) & ~r.cols["warmup"]]
            if np.isfinite(c)
        }
        levels = have if levels is None else levels & have
    out = []
    for c in sorted(levels or ()):
        level = ClosedLoop(c)
        for label, rs in groups.items():
            cut = [_level(r, c) for r in rs]
            (s,) = condition_steps(label, cut, b=b, seed=seed)
            level.steps[label] = s
            level.lockstep[label] = lockstep_share(cut)
        for label, s in level.steps.items():
            if label != baseline:
                rows, _ = step_ratios([s], [level.steps[baseline]], min_gain)
                level.ratios[label] = {m: r[0] for m, r in rows.items() if r}
        out.append(level)
    return out


def lockstep_share(runs: list[RunColumns]) -> float:
    """Share of measured sends within ``LOCKSTEP_S`` of another send of the same step
    execution (run dir and step index), over ``runs``; 0 without two sends."""
    together = total = 0
    for run in runs:
        keep = ~run.cols["warmup"] & np.isfinite(run.cols["sent_at"])
        sent, step = run.cols["sent_at"][keep], run.cols["step"][keep]
        for index in np.unique(step):
            t = np.sort(sent[step == index])
            if t.size < 2:
                total += int(t.size)
                continue
            gap = np.diff(t) < LOCKSTEP_S
            near = np.zeros(t.size, dtype=bool)
            near[1:] |= gap
            near[:-1] |= gap
            together += int(near.sum())
            total += int(t.size)
    return together / total if total else 0.0

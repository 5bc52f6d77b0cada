"""``sweep --interleave --until-decided``: more blocks where a step is undecided, until every
step is decided or the budget is spent.

After the session's blocks, a **look**: compare reads the run dirs (``analysis``) and each
step of the verdict metric is helps, hurts, the same or undecided (``analysis.statistics.effect``).
Undecided steps get a **round** of more blocks on the same servers (``interleave.Round``:
one more ``specload run`` whose blocks continue the run dirs), as many as their
``to_decide_s`` asks (the measured time that would likely decide them), the step that needs
least first while the budget lasts; then another look, at most ``looks`` in all.

Why the intervals stay honest when the data decides when to stop: looking again after more
data and stopping once an interval clears a line would, with plain 95 % intervals, say
"helps" wrongly more often than 1 time in 40. Every interval of such a run is widened for
its planned number of looks (``stats.for_looks``: each look at 1 - 0.05 / looks, Bonferroni),
and run.json says how many (``interleave.looks``), so the final report and any later
``specload compare`` read the same intervals the sweep stopped on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specload.analysis.statistics.effect import HELPS, HURTS, SAME, UNDECIDED
from specload.analysis.statistics.stats import look_stretch
from specload.core.gain import DEFAULT_MIN_GAIN
from specload.protocol.interleave import Cell, Round, blocks_per_cell, next_round
from specload.recorder.rundir import RunMeta, update_run_meta
from specload.report.wording import time_text, to_decide_text

__all__ = [
    "DEFAULT_BUDGET_S",
    "LOOKS",
    "Look",
    "UntilDecided",
    "look_at",
    "plan_round",
    "stamp_looks",
]

#: ``--budget-s`` of ``--until-decided`` when not given: half an hour of wall time.
DEFAULT_BUDGET_S = 1800.0

#: Looks at the data a sweep plans (the session, then at most three rounds): each interval is
#: then a 98.75 % one, 1.27 times as wide as 95 % (``stats.look_stretch``).
LOOKS = 4
#: Fewest and most block pairs a round adds to one step: fewer than two moves no interval;
#: more than ``MAX_UNITS`` is a sign the estimate sits near a line, better measured again at
#: the next look. The last round has no next look: it takes what the steps ask, within the
#: budget (capped there, the runs of ``benchmarks/time_to_decide.py`` stopped after their
#: last look with 42-74 % of their budget left).
MIN_UNITS, MAX_UNITS = 2, 24


@dataclass(frozen=True, slots=True)
class UntilDecided:
    """The stopping rule's settings: the wall-time budget of the sweep (servers' starts,
    every session and round), the looks planned, and the rule's metric and minimum gain
    (compare's defaults unless given)."""

    budget_s: float = DEFAULT_BUDGET_S
    looks: int = LOOKS
    metric: str = "tpot_p50"
    min_gain: float = DEFAULT_MIN_GAIN


@dataclass(slots=True)
class Look:
    """What one look found: each step's answer on the metric (the worst over the conditions:
    undecided if any is) and the time that would likely decide the undecided ones."""

    index: int
    effects: dict[Cell, str] = field(default_factory=dict)
    to_decide_s: dict[Cell, float | None] = field(default_factory=dict)

    @property
    def undecided(self) -> list[Cell]:
        return [c for c, e in self.effects.items() if e == UNDECIDED]

    def line(self, looks: int) -> str:
        """The look in one line: what is decided, what is not and how long it would take."""
        decided = len(self.effects) - len(self.undecided)
        said = "; ".join(
            f"{word} at {', '.join(c.label for c in cells)}"
            for word, e in (("helps", HELPS), ("the same", SAME), ("hurts", HURTS))
            if (cells := [c for c, x in self.effects.items() if x == e])
        )
        head = (
            f"[until-decided] look {self.index} of {looks} (intervals widened x"
            f"{look_stretch(looks):.2f} for {looks} looks): {decided} of {len(self.effects)} "
            "steps decided" + (f" ({said})" if said else "")
        )
        rest = to_decide_text(
            [
                (c.label if c.concurrency else c.target_qps, self.to_decide_s.get(c))
                for c in self.undecided
            ]
        )
        return head + (f"; {rest}" if rest else "")


def stamp_looks(run_dirs: Sequence[Path], looks: int) -> None:
    """run.json ``interleave.looks``: every interval of these runs is widened for it."""

    def stamp(meta: RunMeta) -> None:
        meta.interleave = {**(meta.interleave or {}), "looks": looks}

    for run_dir in run_dirs:
        update_run_meta(run_dir, stamp)


def look_at(
    run_dirs: Sequence[Path], baseline: str, rule: UntilDecided, cells: list[Cell], index: int
) -> Look:
    """Compare the run dirs as they are and read each cell's answer (``Look``)."""
    from specload.analysis.compare import compare_runs

    cmp = compare_runs(
        list(run_dirs), baseline=baseline, metric=rule.metric, min_gain=rule.min_gain
    )
    look = Look(index)
    for cell in cells:
        rows = _rows_at(cmp, cell, rule.metric)
        if not rows:
            continue
        effects = [r.effect for r in rows]
        look.effects[cell] = UNDECIDED if UNDECIDED in effects else _worst(effects)
        if UNDECIDED in effects:
            times = [r.to_decide_s for r in rows if r.effect == UNDECIDED]
            look.to_decide_s[cell] = None if None in times else max(t or 0.0 for t in times)
    return look


def _worst(effects: list[str]) -> str:
    """One answer for a cell with several conditions: the first of hurts, helps, same."""
    return next((e for e in (HURTS, HELPS, SAME) if e in effects), effects[0])


def _rows_at(cmp: Any, cell: Cell, metric: str) -> list[Any]:
    """Every condition's ratio row of ``metric`` at the cell (QPS step or closed-loop level)."""
    if cell.concurrency:
        level = next((lv for lv in cmp.closed_loop if lv.concurrency == cell.concurrency), None)
        return [] if level is None else [r[metric] for r in level.ratios.values() if metric in r]
    return [
        r
        for rows in cmp.ratios.values()
        for r in rows.get(metric, [])
        if math.isclose(r.target_qps, cell.target_qps)
    ]


def plan_round(
    look: Look,
    cells: list[Cell],
    design: dict[str, Any],
    conditions: int,
    block_s: float,
    per_block_s: float,
    budget_left_s: float,
    last: bool = False,
) -> Round | None:
    """The next round: block pairs per undecided cell from its ``to_decide_s`` (one pair
    measures ``conditions * block_s`` seconds; no time known: as many as a cell had), at most
    ``MAX_UNITS`` unless it is the ``last`` round before the last look, the cell that needs
    least first, while ``budget_left_s`` lasts at ``per_block_s`` wall seconds a block. None
    when no cell gets ``MIN_UNITS``."""
    had = blocks_per_cell(design)
    cap = math.inf if last else MAX_UNITS
    need: list[tuple[float, int, int]] = []
    for cell in look.undecided:
        i = cells.index(cell)
        more = look.to_decide_s.get(cell)
        units = had.get(i, MIN_UNITS) if more is None else math.ceil(more / (2 * block_s))
        need.append((math.inf if more is None else more, i, int(min(max(units, MIN_UNITS), cap))))
    blocks: dict[int, int] = {}
    left = budget_left_s
    for _, i, units in sorted(need):
        fits = int(left // (per_block_s * conditions))
        take = min(units, fits)
        if take < MIN_UNITS:
            continue
        blocks[i] = take
        left -= take * per_block_s * conditions
    if not blocks:
        return None
    index = int(design.get("rounds") or 1)
    return next_round(design, blocks, index)


def round_line(r: Round, cells: list[Cell], est_s: float, spent_s: float, budget_s: float) -> str:
    """The round about to run, in one line."""
    at = ", ".join(f"{cells[c].label} ({n})" for c, n in sorted(r.blocks.items()))
    return (
        f"[until-decided] round {r.index + 1}: more block pairs at {at}, about "
        f"{time_text(est_s)}; {time_text(spent_s)} of {time_text(budget_s)} spent"
    )

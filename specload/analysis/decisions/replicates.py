"""Replicates: each run directory of a condition is one server start, one sample of the config.

The same vLLM config on two hosts, or two fresh starts on one host, gave p50 TPOT 30 % apart
(one start had a ~15 s window where the speculative step ran 50 % slower; docs/simulator.md,
"Hosts and server starts"). Pooled figures
with a hierarchical bootstrap (``analysis.statistics.stats``) put that variance into the CIs; this
module says what pooling hides:

- **Level differences per step**: two starts of one condition whose within-start 95 % CIs
  of a latency do not overlap at a step ran at different levels, beyond sampling noise. The
  report says so, with the per-start figures side by side; the pooled CIs include that
  variance. It is worded as a level ("server starts differ in level"), not as disagreement:
  two starts can run at different speeds and still agree on the effect at every step.
- **Per-start effects**: each start of a condition analysed alone against the baseline (its
  interleaved partner start when both have the same number, else the pooled baseline), every
  step classified by the one rule (``analysis.statistics.effect``). Starts add up, they do not veto:
  the pooled interval decides, and the starts disagree only where one helps and another
  hurts at a step (``crossover.split_steps``); there the verdict claims no boundary. Their
  status labels are never compared: a "mixed" start helping where another hurts disagrees.

Starts are ordered by ``run.json`` ``replicate`` (written by ``specload sweep
--replicates``), else by start time.
"""

from __future__ import annotations

from dataclasses import dataclass

from specload.analysis.decisions.crossover import Crossover, StartEffects, find_crossover
from specload.analysis.inputs.run_columns import RunColumns
from specload.analysis.statistics.effect import INCOMPLETE, NA
from specload.analysis.statistics.ratios import RatioRow, step_ratios
from specload.analysis.statistics.stats import Estimate
from specload.analysis.statistics.steps import StepStats, condition_steps, start_order_key

__all__ = [
    "DISAGREE_METRICS",
    "Disagreement",
    "PerStart",
    "StartComparison",
    "disagreements",
    "ladder",
    "order_starts",
    "per_start_comparisons",
    "per_start_effects",
    "per_start_steps",
]

#: Metrics checked for disagreement between starts (the verdict's and TTFT's p50).
DISAGREE_METRICS = ("tpot_p50", "ttft_p50")


@dataclass(slots=True)
class PerStart:
    """One server start (run dir) of a condition analysed alone."""

    run: str
    steps: list[StepStats]


@dataclass(slots=True)
class Disagreement:
    """Starts of ``condition`` whose within-start CIs of a level at one step do not overlap."""

    condition: str
    metric: str
    target_qps: float
    figures: list[tuple[str, Estimate]]


def order_starts(runs: list[RunColumns]) -> list[RunColumns]:
    """Runs in replicate order (``run.json`` ``replicate``, else start time, else name:
    ``steps.start_order_key``)."""
    return sorted(runs, key=start_order_key)


def ladder(run: RunColumns) -> tuple[float, ...]:
    """The loads a run stepped through (its ``steps.json``), in order."""
    return tuple(
        sorted(
            {round(float(s["target_qps"]), 6) for s in run.steps if s.get("target_qps") is not None}
        )
    )


def per_start_steps(
    label: str, runs: list[RunColumns], bootstrap: int, seed: int
) -> list[PerStart]:
    """Each start's own step statistics (within-start bootstrap), for the starts of one
    ladder: the one most runs share (the first such). Starts on other ladders (the passes of
    ``sweep --refine``) are not replicates of it: they add loads, not a second sample of the
    same ones. Empty without two starts on one ladder."""
    groups: dict[tuple[float, ...], list[RunColumns]] = {}
    for r in order_starts(runs):
        groups.setdefault(ladder(r), []).append(r)
    same = max(groups.values(), key=len, default=[])
    if len(same) < 2:
        return []
    return [
        PerStart(name, condition_steps(label, [r], b=bootstrap, seed=seed))
        for name, r in zip(start_names(same), same, strict=True)
    ]


def start_names(runs: list[RunColumns]) -> list[str]:
    """A name per start that tells them apart in a sentence: the run dir's name, numbered in
    start order where two share it (sessions of the GPU kit are each ``.../sweep/spec``, so
    "hurts in spec; no change in spec, spec" would name nothing)."""
    names = [r.path.name for r in runs]
    if len(set(names)) == len(names):
        return names
    return [f"{n} #{i}" for i, n in enumerate(names, 1)]


def _overlap(ests: list[Estimate]) -> bool:
    los = [e.lo for e in ests if e.lo is not None]
    his = [e.hi for e in ests if e.hi is not None]
    return not los or not his or max(los) <= min(his)


def disagreements(label: str, starts: list[PerStart]) -> list[Disagreement]:
    """Steps where this condition's starts disagree beyond their within-start CIs."""
    out: list[Disagreement] = []
    if len(starts) < 2:
        return out
    qps = sorted({s.target_qps for p in starts for s in p.steps})
    for metric in DISAGREE_METRICS:
        for q in qps:
            figs = [
                (p.run, s.latency[metric])
                for p in starts
                for s in p.steps
                if s.target_qps == q and s.latency[metric].value is not None
            ]
            if len(figs) >= 2 and not _overlap([e for _, e in figs]):
                out.append(Disagreement(label, metric, q, figs))
    return out


@dataclass(slots=True)
class StartComparison:
    """One start of a condition against its baseline start: the per-step rows of ``metric``
    and the crossover they give (None without a usable step)."""

    start: PerStart
    rows: list[RatioRow]
    crossover: Crossover | None


def per_start_comparisons(
    cond: list[PerStart],
    base: list[PerStart],
    base_pooled: list[StepStats],
    metric: str,
    min_gain: float,
    incomplete: frozenset[float] = frozenset(),
) -> list[StartComparison]:
    """Each start of a condition against its partner baseline start (same position when both
    have as many starts: interleaved neighbours), else against the pooled baseline."""
    paired = len(base) == len(cond)
    out = []
    for i, start in enumerate(cond):
        against = base[i].steps if paired else base_pooled
        rows, reps = step_ratios(start.steps, against, min_gain, incomplete)
        r = rows.get(metric, [])
        x = find_crossover(
            metric,
            start.run,
            "",
            [row.target_qps for row in r],
            [row.ratio for row in r],
            [row.effect for row in r],
            reps[metric],
            min_gain,
        )
        out.append(StartComparison(start, r, x))
    return out


def per_start_effects(
    cond: list[PerStart],
    base: list[PerStart],
    base_pooled: list[StepStats],
    metric: str,
    min_gain: float,
    incomplete: frozenset[float],
) -> list[StartEffects]:
    """Each start's status and per-step effects (``per_start_comparisons``), where it has a
    usable step: what ``Crossover.replicates_agree`` compares, step by step."""
    comparisons = per_start_comparisons(cond, base, base_pooled, metric, min_gain, incomplete)
    return [
        StartEffects(
            c.start.run,
            c.crossover.status,
            {r.target_qps: r.effect for r in c.rows if r.effect not in (NA, INCOMPLETE)},
        )
        for c in comparisons
        if c.crossover is not None
    ]

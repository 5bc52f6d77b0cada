"""Adaptive search: spend server time where the answer is, not on a fixed ladder.

A fixed ladder spends most of its server time far from the boundary it is meant to find. The
search runs a coarse ladder (the scenario's steps), estimates the boundary and its CI with
``specload compare``'s own analysis, then adds steps around it, every condition at the same
new rates on fresh server starts (interleaved, as replicates are), until the boundary's 95 %
CI is narrower than ``precision`` req/s or the next pass would overrun the budget of
server-seconds. The boundary is the verdict metric's crossover of each non-baseline condition
(``crossover``), or each condition's capacity within the SLOs (``capacity``,
``analysis/decisions/capacity.py``).

Where the rates go. A crossover's CI is the two tested steps whose own CIs decide it
(``crossover.bracket``), so a pass bisects it: one rate at its middle in log load. Where a
tested load lies within 5 % of that middle, the pass measures that load again instead, on
fresh server starts, so its starts accumulate until its CI decides it; the decided ends are
never measured again. A CI side left open (no step there decided yet) gets more starts at its
undecided step nearest the estimate; an open side with no undecided step (its steps help, but
none yet surely by the minimum gain) has the step bracketing the estimate there stand in for
its end, and the pass bisects as usual. Where no step is decided at all ("never helps" only
for want of starts) the undecided steps are measured
again rather than called beyond the tested range. The middle, not the estimate: at the
estimate the true gain is near the minimum by construction, the one load no number of starts
decides. A pass of any number of starts per condition (``--replicates``) measures a tested
step again: a step's units pool over every start that measured it (the interval about these
starts), so each pass narrows it. Capacity: each CI bound and the estimate (a bound left open is the tested step on that
side), each snapped to an already tested rate within 5 %, so starts accumulate there and
the CI narrows with the variance between them. Capacity's CI is interpolated between
steps (``analysis.decisions.capacity``): where the next tested load beyond a CI bound is more than 25 %
away, a load 12 % beyond the bound is added, since interpolating across a wide gap would make
the CI narrower than the truth, and the search stops only once the loads around each
boundary are at most 25 % apart. A mixed pattern (helps, not, helps again: no single
boundary yet) measures again the loads where it flips. A
boundary beyond the tested range cannot be refined inside it: the search stops and says so
(extend the ladder instead). The proposed per-batch-size schedule (``num_speculative_tokens_
per_batch_size``) follows from the refined crossover, because compare maps it onto the running
batch (``vllm:num_requests_running``) at that load.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from specload.analysis.decisions.crossover import MIXED
from specload.analysis.statistics.effect import HELPS
from specload.core.errors import ConfigError

__all__ = [
    "REFINE_TARGETS",
    "Bound",
    "RefinePass",
    "converged",
    "current_bounds",
    "next_rates",
    "pass_cost_s",
]

REFINE_TARGETS = ("crossover", "capacity")
#: A rate within this fraction of a tested one is that tested rate (its starts accumulate).
SAME_RATE = 0.05
#: Tested loads around a boundary at most this far apart (ratio), else a pass adds one
#: between: an interpolation across a wide gap gives a CI narrower than the truth.
MAX_SPACING = 1.25
#: Why a search stops with no new load to measure: each crossover's CI is two loads within
#: about 10 % of each other, as narrow as steps can make it.
NOTHING_FITS = (
    "the CI is two tested loads about 10 % apart or less: no new load fits between them, "
    "so a narrower --precision cannot be reached"
)
#: Where that load goes: this factor beyond the CI bound, toward the far step.
GAP_STEP = 1.12


@dataclass(frozen=True, slots=True)
class Bound:
    """One boundary being refined: which, its estimate and 95 % CI (None where beyond the
    tested range), and the tested steps just around the estimate."""

    name: str
    qps: float | None
    lo: float | None
    hi: float | None
    bracket: tuple[float, float] | None = None
    #: its CI bounds are tested steps (a crossover's: ``crossover.bracket``), already decided
    stepwise: bool = False
    #: no single boundary yet (a mixed pattern): the loads where it flips, to measure again
    unsettled: tuple[float, ...] = ()
    #: tested steps the rule leaves undecided (``Crossover.undecided_steps``, the verdict's
    #: own answer): more starts decide them
    undecided: tuple[float, ...] = ()

    @property
    def beyond(self) -> bool:
        """The boundary lies outside the tested range: no pass inside it can find it."""
        return self.qps is None and not self.unsettled and not self.undecided

    @property
    def width(self) -> float | None:
        """CI width in req/s; None while a bound lies beyond the tested range."""
        return None if self.lo is None or self.hi is None else self.hi - self.lo

    def text(self) -> str:
        if self.unsettled:
            flips = ", ".join(f"{q:g}" for q in self.unsettled)
            return f"{self.name}: no single boundary yet (flips within {flips} req/s)"
        if self.qps is None and self.undecided:
            steps = ", ".join(f"{q:g}" for q in self.undecided)
            return f"{self.name}: no step decided yet (more starts at {steps} req/s)"
        if self.qps is None:
            return f"{self.name}: beyond the tested range"
        ci = f"{self.lo:.3g}–{self.hi:.3g}" if self.width is not None else "open"
        return f"{self.name}: ≈{self.qps:.3g} req/s (CI {ci})"


@dataclass
class RefinePass:
    """What one pass ran and what the boundaries were after it."""

    index: int
    rates: list[float]
    server_s: float
    bounds: list[Bound] = field(default_factory=list)
    run_dirs: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pass": self.index,
            "rates": self.rates,
            "server_s": round(self.server_s, 1),
            "bounds": [{**asdict(b), "width": b.width} for b in self.bounds],
            "run_dirs": self.run_dirs,
        }


def _bracket(q: float, tested: Sequence[float]) -> tuple[float, float] | None:
    below = [t for t in tested if t <= q]
    above = [t for t in tested if t >= q]
    return (max(below), min(above)) if below and above else None


def current_bounds(comparison: Any, target: str) -> list[Bound]:
    """The boundaries ``target`` refines, from a ``Comparison`` (``analysis.compare``)."""
    if target not in REFINE_TARGETS:
        raise ConfigError(f"--refine {target!r}: expected one of {', '.join(REFINE_TARGETS)}")
    out: list[Bound] = []
    if target == "capacity":
        for label, cap in comparison.capacity.items():
            lo, hi = cap.boundary.ci
            qps = cap.qps
            out.append(Bound(f"{label} capacity", qps, lo, hi, _bracket_of(qps, cap.steps)))
        return out
    for label in comparison.ratios:
        x = comparison.crossover(label, comparison.metric)
        b = None if x is None else (x.stop if x.stop is not None else x.start)
        if x is not None and x.status == MIXED:
            out.append(Bound(f"{label} crossover", None, None, None, unsettled=_flips(x)))
            continue
        if x is None or b is None or not b.inside:
            # "never helps" with steps no CI decides is a want of starts, not a boundary beyond
            undecided = tuple(x.undecided_steps) if x is not None and not x.helping else ()
            out.append(Bound(f"{label} crossover", None, None, None, undecided=undecided))
            continue
        lo, hi = b.ci
        out.append(Bound(f"{label} crossover", b.qps, lo, hi, _bracket_of(b.qps, x.steps),
                         stepwise=True, undecided=tuple(x.undecided_steps)))  # fmt: skip
    return out


def _flips(x: Any) -> tuple[float, ...]:
    """The loads of a mixed pattern from the first step that stops helping to the last that
    helps, with the step on each side: where more starts decide between the patterns."""
    helps = [e == HELPS for e in x.effects]
    first_off = next((i for i in range(1, len(helps)) if helps[i - 1] and not helps[i]), 0)
    last_on = max((i for i, h in enumerate(helps) if h), default=len(helps) - 1)
    lo, hi = max(0, first_off - 1), min(len(helps) - 1, last_on + 1)
    return tuple(float(q) for q in x.steps[lo : hi + 1])


def _bracket_of(qps: float | None, steps: Sequence[float]) -> tuple[float, float] | None:
    return None if qps is None else _bracket(qps, sorted(steps))


def converged(bounds: Sequence[Bound], precision: float) -> bool:
    """Every boundary inside the tested range with a CI narrower than ``precision`` req/s,
    between tested loads at most ``MAX_SPACING`` apart."""

    def close(b: Bound) -> bool:
        return b.bracket is not None and b.bracket[1] <= b.bracket[0] * MAX_SPACING + 1e-9

    return bool(bounds) and all(
        b.width is not None and b.width <= precision and close(b) for b in bounds
    )


def _round_rate(q: float) -> float:
    """One decimal (two below 1 req/s): 13.37 → 13.4, 0.856 → 0.86."""
    return round(q, 1) if q >= 1 else round(q, 2)


def _snap(q: float, tested: Sequence[float]) -> float:
    """A tested rate within ``SAME_RATE`` of ``q`` (so its starts accumulate), else ``q``
    rounded."""
    near = [t for t in tested if abs(t - q) <= SAME_RATE * t]
    return min(near, key=lambda t: abs(t - q)) if near else _round_rate(q)


def next_rates(bounds: Sequence[Bound], tested: Sequence[float]) -> list[float]:
    """The next pass's rates (see module doc): one inside a crossover's CI; a capacity's CI
    bounds and estimate, each snapped to a tested rate when one is within 5 %, so passes
    measure its neighbourhood again on fresh starts and its CI narrows; for a boundary that
    is not settled yet, the loads where its pattern flips; where no step is decided, the
    undecided steps."""
    rates: set[float] = set()
    for b in bounds:
        if b.unsettled:
            rates.update(b.unsettled)
            continue
        if b.qps is None:
            rates.update(b.undecided)
            continue
        if b.stepwise:
            rates.update(_inside(b, tested))
            continue
        lo, hi = b.lo, b.hi
        if b.bracket is not None:  # an open CI bound: the tested step on that side
            lo = b.bracket[0] if lo is None else lo
            hi = b.bracket[1] if hi is None else hi
        for q in (lo, b.qps, hi):
            if q is not None and q > 0:
                rates.add(_snap(q, tested))
        rates.update(_gap_rates(lo, hi, tested))
    return sorted(rates)


def _inside(b: Bound, tested: Sequence[float]) -> list[float]:
    """The next rate for a stepwise CI (module doc): its middle in log load, or the tested load
    within 5 % of it (measured again on fresh starts); for an open side, its undecided step
    nearest the estimate, and where that side has none, the tested step that brackets the
    estimate there stands in for the missing end (its own CI does not reach past the minimum
    gain yet). None where the CI's ends are so close that the middle is within 5 % of one of
    them: the ends are decided, and nothing new fits between them."""
    assert b.qps is not None
    q = b.qps
    lo, hi = b.lo, b.hi
    if lo is None or hi is None:
        out = []
        below = [t for t in b.undecided if t <= q]
        above = [t for t in b.undecided if t >= q]
        if lo is None and below:
            out.append(max(below))
        if hi is None and above:
            out.append(min(above))
        if out or b.bracket is None:
            return out
        lo = b.bracket[0] if lo is None else lo
        hi = b.bracket[1] if hi is None else hi
    mid = _snap(math.sqrt(lo * hi), tested)
    return [] if mid in (lo, hi) else [mid]


def _gap_rates(lo: float | None, hi: float | None, tested: Sequence[float]) -> list[float]:
    """A load just beyond each CI bound whose next tested load is more than ``MAX_SPACING``
    away (see ``MAX_SPACING``)."""
    out = []
    if hi is not None:
        above = [t for t in tested if t > hi * (1 + SAME_RATE)]
        if not above or min(above) > hi * MAX_SPACING:
            out.append(_round_rate(hi * GAP_STEP))
    if lo is not None:
        below = [t for t in tested if t < lo * (1 - SAME_RATE)]
        if below and max(below) < lo / MAX_SPACING:
            out.append(_round_rate(lo / GAP_STEP))
    return out


def pass_cost_s(rates: Sequence[float], step_s: float, runs: int, start_s: float) -> float:
    """Server-seconds a pass of ``rates`` takes: ``runs`` server starts (conditions ×
    replicates), each starting (``start_s``, as measured so far) and running every rate."""
    return runs * (start_s + len(rates) * step_s)


def refine_log_lines(passes: Sequence[RefinePass]) -> list[str]:
    """One line per pass: what it added, its server time, and the boundaries after it."""
    lines = []
    total = 0.0
    for p in passes:
        total += p.server_s
        added = ", ".join(f"{r:g}" for r in p.rates)
        bounds = "; ".join(b.text() for b in p.bounds)
        lines.append(
            f"pass {p.index}: {added} req/s, {p.server_s:.0f} server-s (total {total:.0f}): {bounds}"
        )
    return lines


Say = Callable[[str], None]


def write_refine_json(out: Path, passes: Sequence[RefinePass], target: str, precision: float,
                      stopped: str) -> Path:  # fmt: skip
    """``OUT/refine.json``: every pass, the total server-seconds and why the search stopped."""
    import json

    path = out / "refine.json"
    path.write_text(
        json.dumps(
            {
                "target": target,
                "precision_qps": precision,
                "passes": [p.to_dict() for p in passes],
                "server_s": round(sum(p.server_s for p in passes), 1),
                "stopped": stopped,
            },
            indent=2,
        )
        + "\n"
    )
    return path


@dataclass
class Refinement:
    """The search's outcome: the runs of every pass after the first, the passes (the first
    included) and why it stopped."""

    results: list[Any]
    passes: list[RefinePass]
    stopped: str


def _compare(out: Path, baseline: str, slos: Sequence[Any] | None) -> Any:
    from specload.analysis.compare import compare_runs
    from specload.protocol.sweep_compare import sweep_run_dirs

    dirs: list[str | Path] = list(sweep_run_dirs(out))
    return compare_runs(dirs, baseline=baseline, bootstrap=500, slos=list(slos or []) or None)


def _pass_scenario(plan: Any, rates: Sequence[float], index: int) -> Path:
    """The scenario with ``steps`` replaced by this pass's rates, beside the runs."""
    import yaml

    from specload.scenario import load_scenario

    d = load_scenario(plan.scenario).to_dict()
    d["steps"] = list(rates)
    d.pop("source", None)
    path = Path(plan.out) / "refine" / f"pass-{index}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    return path


def run_refinement(
    plan: Any,
    first: Sequence[Any],
    target: str,
    precision: float,
    budget_s: float | None,
    slos: Sequence[Any] | None,
    say: Say = print,
    *,
    max_passes: int = 8,
    run_pass: Callable[[list[float], int], list[Any]] | None = None,
) -> Refinement:
    """Passes after the coarse ladder (``first``, already run) until the boundaries are
    precise, the budget is spent or the boundary lies beyond the tested range.

    ``run_pass(rates, index)`` runs one pass and returns its results (each with ``server_s``
    and ``run_dir``, its run dir under ``plan.out``); by default a sweep of fresh servers
    (``sweep.run_sweep``). ``benchmarks/adaptive.py`` gives a virtual-time one.
    """
    import dataclasses

    from specload.protocol.sweep import run_sweep
    from specload.scenario import load_scenario

    def sweep_pass(rates: list[float], index: int) -> list[Any]:
        scenario = _pass_scenario(plan, rates, index)
        return run_sweep(dataclasses.replace(plan, scenario=scenario, dir_tag=f"-p{index}"))

    execute = run_pass or sweep_pass

    sc = load_scenario(plan.scenario)
    step_s = (sc.warmup_s + sc.step_duration_s) * sc.repeats
    baseline = plan.baseline
    tested = sorted(set(sc.steps))
    runs = list(first)
    used = sum(r.server_s for r in runs)
    start_s = max(0.0, sum(r.server_s for r in runs) / max(1, len(runs)) - len(tested) * step_s)
    passes = [
        RefinePass(
            1, list(tested), used, current_bounds(_compare(plan.out, baseline, slos), target)
        )
    ]
    extra: list[Any] = []
    for index in range(2, max_passes + 1):
        say("[refine] " + refine_log_lines(passes)[-1])
        bounds = passes[-1].bounds
        if converged(bounds, precision):
            return Refinement(extra, passes, f"every CI is narrower than {precision:g} req/s")
        if any(b.beyond for b in bounds):
            beyond = ", ".join(b.name for b in bounds if b.beyond)
            return Refinement(
                extra, passes, f"beyond the tested range ({beyond}): extend the steps"
            )
        rates = next_rates(bounds, tested)
        if not rates:
            return Refinement(extra, passes, NOTHING_FITS)
        n_runs = len(plan.conditions) * plan.replicates
        cost = pass_cost_s(rates, step_s, n_runs, start_s)
        if budget_s is not None and used + cost > budget_s:
            return Refinement(
                extra, passes,
                f"the budget: pass {index} would take ≈{cost:.0f} server-s, {budget_s - used:.0f} left",
            )  # fmt: skip
        say(
            f"[refine] pass {index}: {', '.join(f'{r:g}' for r in rates)} req/s, ≈{cost:.0f} server-s"
        )
        results = execute(rates, index)
        extra += results
        spent = sum(r.server_s for r in results)
        used += spent
        tested = sorted({*tested, *rates})
        bounds = current_bounds(_compare(plan.out, baseline, slos), target)
        names = [Path(r.run_dir).name for r in results]  # under OUT: refine.json moves with it
        passes.append(RefinePass(index, rates, spent, bounds, names))
    say("[refine] " + refine_log_lines(passes)[-1])
    return Refinement(extra, passes, f"the pass limit ({max_passes})")

"""Adaptive search: spend server time where the answer is, not on a fixed ladder.

A fixed ladder spends most of its server time far from the boundary it is meant to find. The
search runs a coarse ladder (the scenario's steps), estimates the boundary and its CI with
``specload compare``'s own analysis, then adds steps around it, every condition at the same
new rates on fresh server starts (interleaved, as replicates are), until the boundary's 95 %
CI is narrower than ``precision`` req/s or the next pass would overrun the budget of
server-seconds. The boundary is the verdict metric's crossover of each non-baseline condition
(``crossover``), or each condition's capacity within the SLOs (``capacity``,
``analysis/capacity.py``).

Where the new rates go: the point estimate and the geometric midpoints between it and each CI
bound (a bound the bootstrap left open is the tested step on that side), so each pass samples
the boundary's own neighbourhood more densely; rates within 3 % of one already tested are not
repeated. A
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

from specload.errors import ConfigError

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
#: A new rate within this fraction of a tested one is not run again.
SAME_RATE = 0.03


@dataclass(frozen=True, slots=True)
class Bound:
    """One boundary being refined: which, its estimate and 95 % CI (None where beyond the
    tested range), and the tested steps that bracket it."""

    name: str
    qps: float | None
    lo: float | None
    hi: float | None
    bracket: tuple[float, float] | None = None

    @property
    def width(self) -> float | None:
        """CI width in req/s; None while a bound lies beyond the tested range."""
        return None if self.lo is None or self.hi is None else self.hi - self.lo

    def text(self) -> str:
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
        if x is None or b is None or not b.inside:
            out.append(Bound(f"{label} crossover", None, None, None))
            continue
        lo, hi = b.ci
        out.append(Bound(f"{label} crossover", b.qps, lo, hi, _bracket_of(b.qps, x.steps)))
    return out


def _bracket_of(qps: float | None, steps: Sequence[float]) -> tuple[float, float] | None:
    return None if qps is None else _bracket(qps, sorted(steps))


def converged(bounds: Sequence[Bound], precision: float) -> bool:
    """Every boundary inside the tested range with a CI narrower than ``precision`` req/s."""
    return bool(bounds) and all(b.width is not None and b.width <= precision for b in bounds)


def _geo(a: float, b: float) -> float:
    return math.sqrt(a * b)


def _round_rate(q: float) -> float:
    """Two significant digits, at least one decimal below 10 req/s: 13.4 → 13, 7.26 → 7.3."""
    digits = 1 if q < 10 else 0
    return round(q, digits) if q >= 1 else round(q, 2)


def next_rates(bounds: Sequence[Bound], tested: Sequence[float], per_bound: int = 3) -> list[float]:
    """New rates around each boundary not yet precise enough (see module doc)."""
    new: set[float] = set()
    for b in bounds:
        if b.qps is None:
            continue
        lo, hi = b.lo, b.hi
        if b.bracket is not None:  # an open CI bound: the steps around the estimate
            lo = b.bracket[0] if lo is None else lo
            hi = b.bracket[1] if hi is None else hi
        lo = b.qps if lo is None else min(lo, b.qps)
        hi = b.qps if hi is None else max(hi, b.qps)
        picks = [b.qps, _geo(lo, b.qps), _geo(b.qps, hi)][:per_bound]
        for q in picks:
            r = _round_rate(q)
            if r > 0 and all(abs(r - t) > SAME_RATE * t for t in [*tested, *new]):
                new.add(r)
    return sorted(new)


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
    from specload.sweep import sweep_run_dirs

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
) -> Refinement:
    """Passes after the coarse ladder (``first``, already run) until the boundaries are
    precise, the budget is spent or the boundary lies beyond the tested range."""
    import dataclasses

    from specload.scenario import load_scenario
    from specload.sweep import run_sweep

    sc = load_scenario(plan.scenario)
    step_s = (sc.warmup_s + sc.step_duration_s) * sc.repeats
    baseline = plan.conditions[0].name
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
        if any(b.qps is None for b in bounds):
            beyond = ", ".join(b.name for b in bounds if b.qps is None)
            return Refinement(
                extra, passes, f"beyond the tested range ({beyond}): extend the steps"
            )
        rates = next_rates(bounds, tested)
        if not rates:
            return Refinement(
                extra,
                passes,
                "no new rate left inside the CIs (they are as narrow as the steps allow)",
            )
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
        sub = dataclasses.replace(
            plan, scenario=_pass_scenario(plan, rates, index), dir_tag=f"-p{index}"
        )
        results = run_sweep(sub)
        extra += results
        spent = sum(r.server_s for r in results)
        used += spent
        tested = sorted({*tested, *rates})
        bounds = current_bounds(_compare(plan.out, baseline, slos), target)
        passes.append(RefinePass(index, rates, spent, bounds, [str(r.run_dir) for r in results]))
    say("[refine] " + refine_log_lines(passes)[-1])
    return Refinement(extra, passes, f"the pass limit ({max_passes})")

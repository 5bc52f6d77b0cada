"""CI gates: fail a pipeline when a condition regresses against the baseline where it matters.

``--max-regression tpot_p95=10`` fails (exit 1) when any condition's p95 TPOT *hurts* at a
step up to ``--operating-qps`` (every step when no operating point is given) by more than
10 %: the one rule of ``analysis.effect`` (the change is at least ``--min-gain`` and its 95 %
CI lies above 0), with the gate's own limit on top. A gate never fails where the report says
"no significant change", and never passes silently: a gate that would check no step (no
tested step at or below the operating point, or a metric no run measured) is bad input,
exit 2. ``error_rate`` compares percentage points, at every step including incomplete ones
(those are exactly what it is for).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specload.analysis.crossover import fmt_qps
from specload.analysis.effect import HURTS, INCOMPLETE
from specload.analysis.ratios import RatioRow
from specload.analysis.steps import StepStats, metric_names
from specload.errors import ConfigError

__all__ = [
    "CAPACITY_GATE",
    "Gate",
    "GateFailure",
    "GateResult",
    "evaluate_gates",
    "gate_metrics",
    "parse_gate",
]


#: The gate on SLO capacity (``analysis.capacity``): at most PCT percent less than the baseline.
CAPACITY_GATE = "capacity"


def gate_metrics() -> list[str]:
    """Metric names a gate accepts."""
    return [*metric_names(), "error_rate", CAPACITY_GATE]


@dataclass(frozen=True, slots=True)
class Gate:
    """At most ``max_pct`` percent worse (percentage points for ``error_rate``)."""

    metric: str
    max_pct: float


@dataclass(frozen=True, slots=True)
class GateFailure:
    condition: str
    metric: str
    target_qps: float
    change_pct: float
    max_pct: float
    ci_pct: tuple[float | None, float | None] = (None, None)

    def message(self) -> str:
        unit = " pp" if self.metric == "error_rate" else " %"
        ci = ""
        if self.ci_pct[0] is not None and self.ci_pct[1] is not None:
            ci = f" (CI {self.ci_pct[0]:+.1f}…{self.ci_pct[1]:+.1f}{unit.strip()})"
        if self.metric == CAPACITY_GATE:
            return (
                f"{self.condition}: capacity within the SLO {self.change_pct:+.1f} %{ci} "
                f"({fmt_qps(self.target_qps)} req/s against the baseline's) loses more than the "
                f"allowed {self.max_pct:g} %"
            )
        return (
            f"{self.condition}: {self.metric} {self.change_pct:+.1f}{unit}{ci} at "
            f"{self.target_qps:g} req/s exceeds the allowed +{self.max_pct:g}{unit}"
        )


@dataclass(slots=True)
class GateResult:
    gates: list[Gate]
    operating_qps: float | None
    min_gain: float = 0.0
    failures: list[GateFailure] = field(default_factory=list)
    #: (condition, step, gate) checks made; steps left out because their data is incomplete
    checked: int = 0
    skipped: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures


def parse_gate(spec: str) -> Gate:
    """``METRIC=PCT`` → Gate; ConfigError (exit 2) naming the expectation otherwise."""
    name, sep, value = spec.partition("=")
    name = name.strip()
    if not sep or name not in gate_metrics():
        raise ConfigError(
            f"--max-regression {spec!r}: expected METRIC=PCT with METRIC one of {', '.join(gate_metrics())}"
        )
    try:
        pct = float(value.strip().rstrip("%"))
    except ValueError:
        raise ConfigError(
            f"--max-regression {spec!r}: PCT must be a number (e.g. tpot_p95=10)"
        ) from None
    if pct < 0:
        raise ConfigError(f"--max-regression {spec!r}: PCT must be >= 0")
    return Gate(name, pct)


def _pct(r: float | None) -> float | None:
    return None if r is None else (r - 1.0) * 100.0


def _in_scope(qps: float, operating_qps: float | None) -> bool:
    return operating_qps is None or qps <= operating_qps * (1 + 1e-9)


def _check_scope(
    gates: list[Gate],
    others: dict[str, list[StepStats]],
    ratios: dict[str, dict[str, list[RatioRow]]],
    operating_qps: float | None,
) -> None:
    """A gate that would check nothing is bad input: say which, exit 2."""
    tested = sorted({s.target_qps for steps in others.values() for s in steps})
    if not tested:
        raise ConfigError("--max-regression: no condition besides the baseline to check")
    if not any(_in_scope(q, operating_qps) for q in tested):
        raise ConfigError(
            f"--operating-qps {operating_qps:g}: no tested step at or below it (tested: "
            f"{', '.join(f'{q:g}' for q in tested)} req/s); the gate would check nothing"
        )
    for g in gates:
        if g.metric == "error_rate":
            continue
        measured = [
            r
            for ms in ratios.values()
            for r in ms.get(g.metric, [])
            if r.ratio.value is not None and _in_scope(r.target_qps, operating_qps)
        ]
        if not measured:
            raise ConfigError(
                f"--max-regression {g.metric}: no run measured {g.metric} at a step in scope; "
                "the gate would check nothing"
            )


def evaluate_gates(
    gates: list[Gate],
    baseline: list[StepStats],
    others: dict[str, list[StepStats]],
    ratios: dict[str, dict[str, list[RatioRow]]],
    operating_qps: float | None,
    min_gain: float,
) -> GateResult:
    """Check every gate for every non-baseline condition at steps up to ``operating_qps``.

    Raises ConfigError (exit 2) when a gate would check nothing.
    """
    _check_scope(gates, others, ratios, operating_qps)
    result = GateResult(gates=gates, operating_qps=operating_qps, min_gain=min_gain)
    base_err = {s.target_qps: s.error_rate for s in baseline}
    for cond, steps in others.items():
        rows = {m: {r.target_qps: r for r in rs} for m, rs in ratios.get(cond, {}).items()}
        for s in steps:
            if not _in_scope(s.target_qps, operating_qps):
                continue
            for g in gates:
                if g.metric == "error_rate":
                    if s.target_qps not in base_err:
                        continue
                    change = (s.error_rate - base_err[s.target_qps]) * 100
                    result.checked += 1
                    if change > g.max_pct:
                        result.failures.append(
                            GateFailure(cond, g.metric, s.target_qps, change, g.max_pct)
                        )
                    continue
                row = rows.get(g.metric, {}).get(s.target_qps)
                if row is None or row.ratio.value is None:
                    continue
                if row.effect == INCOMPLETE:
                    result.skipped.append(f"{cond} at {s.target_qps:g} req/s (incomplete)")
                    continue
                result.checked += 1
                est = row.ratio
                change = (row.ratio.value - 1) * 100
                if row.effect == HURTS and change > g.max_pct:
                    ci = (_pct(est.lo), _pct(est.hi))
                    result.failures.append(
                        GateFailure(cond, g.metric, s.target_qps, change, g.max_pct, ci)
                    )
    if not result.checked:
        raise ConfigError(
            "--max-regression: every step in scope is incomplete ("
            + "; ".join(result.skipped)
            + "); the gate would check nothing"
        )
    return result

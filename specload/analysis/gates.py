"""CI gates: fail a pipeline when a condition regresses against the baseline where it matters.

``--max-regression tpot_p95=10`` fails (exit 1) when any condition's p95 TPOT is more than
10 % above the baseline's at any aligned step up to ``--operating-qps`` (every step when no
operating point is given). Latency metrics compare point estimates of the ratio (the CI is
reported next to it); ``error_rate`` compares percentage points.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specload.analysis.stats import Estimate
from specload.analysis.steps import StepStats, metric_names
from specload.errors import ConfigError

__all__ = ["Gate", "GateFailure", "GateResult", "evaluate_gates", "gate_metrics", "parse_gate"]


def gate_metrics() -> list[str]:
    """Metric names a gate accepts."""
    return [*metric_names(), "error_rate"]


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
        return (
            f"{self.condition}: {self.metric} {self.change_pct:+.1f}{unit}{ci} at "
            f"{self.target_qps:g} req/s exceeds the allowed +{self.max_pct:g}{unit}"
        )


@dataclass(slots=True)
class GateResult:
    gates: list[Gate]
    operating_qps: float | None
    failures: list[GateFailure] = field(default_factory=list)

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


def evaluate_gates(
    gates: list[Gate],
    baseline: list[StepStats],
    others: dict[str, list[StepStats]],
    ratios: dict[str, dict[str, dict[float, Estimate]]],
    operating_qps: float | None,
) -> GateResult:
    """Check every gate for every non-baseline condition at steps up to ``operating_qps``."""
    result = GateResult(gates=gates, operating_qps=operating_qps)
    base_err = {s.target_qps: s.error_rate for s in baseline}
    for cond, steps in others.items():
        for s in steps:
            if operating_qps is not None and s.target_qps > operating_qps * (1 + 1e-9):
                continue
            for g in gates:
                if g.metric == "error_rate":
                    if s.target_qps not in base_err:
                        continue
                    ci: tuple[float | None, float | None] = (None, None)
                    change = (s.error_rate - base_err[s.target_qps]) * 100
                else:
                    est = ratios.get(cond, {}).get(g.metric, {}).get(s.target_qps)
                    if est is None or est.value is None:
                        continue
                    change, ci = (est.value - 1) * 100, (_pct(est.lo), _pct(est.hi))
                if change > g.max_pct:
                    result.failures.append(
                        GateFailure(cond, g.metric, s.target_qps, change, g.max_pct, ci)
                    )
    return result

"""CI gates: fail a pipeline when a condition regresses against the baseline where it matters.

``--max-regression tpot_p95=10`` fails (exit 1) when any condition's p95 TPOT *hurts* at a
step up to ``--operating-qps`` (every step when no operating point is given), by the one rule
of ``analysis.statistics.effect`` (the change is at least ``--min-gain`` and its 95 % CI lies above 0),
and the whole 95 % CI of the change lies beyond the allowed +10 % (``--gate-on ci``, the
default): significantly worse than allowed. A change whose point estimate is beyond the limit
but whose CI reaches back below it passes, with a "possible regression" line and its figures:
failing it would fail pipelines on noise (+5.4 %, CI +4.3…+5.8 %, against +5 %).
``--gate-on point`` keeps the stricter rule: a change that hurts fails as soon as its point
estimate is beyond the limit. A gate never fails where the report does not say "hurts"
(the same, undecided), and never passes silently: a gate that would check no step (no tested step at or
below the operating point, or a metric no run measured) is bad input, exit 2. ``error_rate``
compares percentage points, at every step including incomplete ones (those are exactly what
it is for); it has no CI, so it is judged on its value under either rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from specload.analysis.statistics.effect import HURTS, INCOMPLETE
from specload.analysis.statistics.ratios import RatioRow
from specload.analysis.statistics.steps import StepStats, metric_names
from specload.core.errors import ConfigError

__all__ = [
    "CAPACITY_GATE",
    "FAILED",
    "GATE_ON",
    "PASSED",
    "POSSIBLE",
    "Gate",
    "GateFailure",
    "GateResult",
    "Skipped",
    "check_operating_qps",
    "evaluate_gates",
    "gate_metrics",
    "judge",
    "parse_gate",
]


#: The gate on SLO capacity (``analysis.decisions.capacity``): at most PCT percent less than the baseline.
CAPACITY_GATE = "capacity"

#: ``--gate-on``: what must lie beyond the limit for a gate to fail: the whole 95 % CI of the
#: change (default), or its point estimate (stricter: fails on noise around the limit).
GATE_ON = ("ci", "point")


def gate_metrics() -> list[str]:
    """Metric names a gate accepts."""
    return [*metric_names(), "error_rate", CAPACITY_GATE]


@dataclass(frozen=True, slots=True)
class Gate:
    """At most ``max_pct`` percent worse (percentage points for ``error_rate``), judged on the
    CI or the point estimate (``on``, one of ``GATE_ON``)."""

    metric: str
    max_pct: float
    on: str = "ci"


#: Outcomes of one check (``judge``).
FAILED, POSSIBLE, PASSED = "failed", "possible", "passed"


def judge(gate: Gate, worse_pct: float, near_pct: float | None, significant: bool) -> str:
    """One check by the gate's rule: ``worse_pct`` is the point estimate of how much worse
    (percent, positive = worse), ``near_pct`` the end of its CI nearest to no change, as
    worse-percent (None when that end is open or missing), ``significant`` whether the
    change is significant at all by the one rule. ``possible`` when the point estimate lies
    beyond the limit but the gate does not fail on it."""
    beyond = worse_pct > gate.max_pct
    if gate.on == "point":
        failed = significant and beyond
    else:
        failed = significant and near_pct is not None and near_pct > gate.max_pct
    return FAILED if failed else POSSIBLE if beyond else PASSED


@dataclass(frozen=True, slots=True)
class GateFailure:
    """A check that failed, or (``possible``) passed with its point estimate beyond the
    limit. ``ci_open`` says which CI bound lies further out than shown ("below"/"above")."""

    condition: str
    metric: str
    target_qps: float
    change_pct: float
    max_pct: float
    ci_pct: tuple[float | None, float | None] = (None, None)
    ci_open: tuple[str, str] = ("", "")
    on: str = "ci"
    possible: bool = False
    #: the condition's achieved load at the step, named beside the nominal one ("16 (17.1)")
    achieved_qps: float | None = None


@dataclass(frozen=True, slots=True)
class Skipped:
    """A step a latency gate left unchecked: ``condition``'s step at ``target_qps``, and
    ``why`` (the step's effect, ``effect.INCOMPLETE``: its data is incomplete, so the gate
    neither fails nor passes on it). ``report.gate_words`` words it."""

    condition: str
    target_qps: float
    why: str = INCOMPLETE


@dataclass(slots=True)
class GateResult:
    gates: list[Gate]
    operating_qps: float | None
    min_gain: float = 0.0
    failures: list[GateFailure] = field(default_factory=list)
    #: checks that passed with their point estimate beyond the limit ("possible regression")
    possible: list[GateFailure] = field(default_factory=list)
    #: (condition, step, gate) checks made; steps left out because their data is incomplete
    checked: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    #: every check in the order made, with its outcome (``judge``): the JUnit testcases
    checks: list[tuple[str, GateFailure]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures

    def record(self, outcome: str, found: GateFailure) -> None:
        """File one check's outcome (``judge``): a failure, a possible regression, or a pass."""
        self.checks.append((outcome, replace(found, possible=outcome == POSSIBLE)))
        if outcome == FAILED:
            self.failures.append(found)
        elif outcome == POSSIBLE:
            self.possible.append(replace(found, possible=True))


def parse_gate(spec: str, on: str = "ci") -> Gate:
    """``METRIC=PCT`` → Gate judged ``on`` the CI or the point estimate; ConfigError (exit 2)
    naming the expectation otherwise."""
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
    if on not in GATE_ON:
        raise ConfigError(f"--gate-on {on!r}: expected one of {', '.join(GATE_ON)}")
    return Gate(name, pct, on)


def _pct(r: float | None) -> float | None:
    return None if r is None else (r - 1.0) * 100.0


def _in_scope(qps: float, operating_qps: float | None) -> bool:
    return operating_qps is None or qps <= operating_qps * (1 + 1e-9)


def check_operating_qps(steps: list[float], operating_qps: float | None, what: str) -> None:
    """``--operating-qps`` below every QPS step: the gates would check nothing (exit 2).
    Checked again by compare, and by headless Locust from the scenario's steps before any
    traffic (``what``: "tested", or "the scenario's")."""
    if operating_qps is None or any(_in_scope(q, operating_qps) for q in steps):
        return
    raise ConfigError(
        f"--operating-qps {operating_qps:g}: no {what} step at or below it ({what}: "
        f"{', '.join(f'{q:g}' for q in sorted(steps))} req/s); the gate would check nothing"
    )


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
    check_operating_qps(tested, operating_qps, "tested")
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


def _error_rate_check(
    result: GateResult, g: Gate, cond: str, s: StepStats, base_err: dict[float, float]
) -> None:
    """Percentage points against the baseline's error rate: no CI, judged on the value."""
    if s.target_qps not in base_err:
        return
    change = (s.error_rate - base_err[s.target_qps]) * 100
    result.checked += 1
    found = GateFailure(
        cond, g.metric, s.target_qps, change, g.max_pct, on=g.on, achieved_qps=s.achieved_qps
    )
    result.record(judge(g, change, change, True), found)


def _latency_check(result: GateResult, g: Gate, cond: str, row: RatioRow | None) -> None:
    """One latency step: it must hurt by the one rule, and its CI (or its point estimate,
    ``--gate-on point``) lie beyond the limit."""
    if row is None or row.ratio.value is None:
        return
    if row.effect == INCOMPLETE:
        result.skipped.append(Skipped(cond, row.target_qps))
        return
    result.checked += 1
    est = row.ratio
    change = (est.value - 1) * 100 if est.value is not None else 0.0
    found = GateFailure(
        cond, g.metric, row.target_qps, change, g.max_pct, (_pct(est.lo), _pct(est.hi)), on=g.on,
        achieved_qps=row.achieved_qps,
    )  # fmt: skip
    result.record(judge(g, change, _pct(est.lo), row.effect == HURTS), found)


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
                    _error_rate_check(result, g, cond, s, base_err)
                else:
                    _latency_check(result, g, cond, rows.get(g.metric, {}).get(s.target_qps))
    if not result.checked:
        raise ConfigError(
            "--max-regression: every step in scope is incomplete ("
            + "; ".join(
                f"{k.condition} at {k.target_qps:g} req/s ({k.why})" for k in result.skipped
            )
            + "); the gate would check nothing"
        )
    return result

"""The CI gate's results in words: one line per failed or possibly regressed check, one per
gate that passed (its check nearest the limit), for the terminal, the reports and JUnit.

``analysis/decisions/gates.py`` checks the gates and returns the checks as facts
(``GateFailure``, ``GateResult``); the sentences are written here only.
"""

from __future__ import annotations

from specload.analysis.decisions.gates import (
    CAPACITY_GATE,
    PASSED,
    GateFailure,
    GateResult,
    Skipped,
)
from specload.analysis.statistics.effect import INCOMPLETE
from specload.report.crossover_words import fmt_qps
from specload.report.wording import pct_ci_text, step_label

__all__ = ["gate_message", "passed_lines", "passed_message", "skipped_line", "skipped_text"]


def _ci(f: GateFailure, unit: str) -> str:
    ci = pct_ci_text(f.ci_pct, f.ci_open)
    return f" (CI {ci}{unit})" if ci else ""


def gate_message(f: GateFailure) -> str:
    """A failed check, or a possible regression: "spec: tpot_p95 +12.0 % (CI +8.0…+15.0 %)
    at 16 (17.1) req/s exceeds the allowed +10 % with its whole CI"."""
    unit = " pp" if f.metric == "error_rate" else " %"
    if f.metric == CAPACITY_GATE:
        what = (
            f"{f.condition}: capacity within the SLO {f.change_pct:+.1f} %{_ci(f, unit)} "
            f"({fmt_qps(f.target_qps)} req/s against the baseline's) loses more than the "
            f"allowed {f.max_pct:g} %"
        )
    else:
        what = (
            f"{f.condition}: {f.metric} {f.change_pct:+.1f}{unit}{_ci(f, unit)} at "
            f"{step_label(f.target_qps, f.achieved_qps)} req/s exceeds the allowed "
            f"+{f.max_pct:g}{unit}"
        )
    return ("possible regression: " if f.possible else "") + what + _why(f)


def passed_message(f: GateFailure) -> str:
    """A check that passed, for CI logs: "spec: tpot_p95 +2.1 % (CI -0.4…+4.6 %) at 2
    req/s, within +10 %"."""
    unit = " pp" if f.metric == "error_rate" else " %"
    if f.metric == CAPACITY_GATE:
        return (
            f"{f.condition}: capacity within the SLO {f.change_pct:+.1f} %{_ci(f, unit)}, "
            f"within the allowed -{f.max_pct:g} %"
        )
    return (
        f"{f.condition}: {f.metric} {f.change_pct:+.1f}{unit}{_ci(f, unit)} at "
        f"{step_label(f.target_qps, f.achieved_qps)} req/s, within +{f.max_pct:g}{unit}"
    )


def _why(f: GateFailure) -> str:
    """Why it failed or passed, so a CI log shows which rule decided."""
    if f.possible and f.on == "ci":
        return " on its estimate, but its CI does not lie entirely beyond it: passes"
    if f.possible:
        return " on its estimate, but the change is not significant: passes"
    if f.metric == "error_rate":
        return ""
    return " with its whole CI" if f.on == "ci" else " on its estimate (--gate-on point)"


def passed_lines(result: GateResult) -> list[str]:
    """One line per gate and condition that passed every check: its check nearest the
    limit ("gate passed: spec: tpot_p95 +2.1 % (CI …) at 2 req/s, within +10 %")."""
    out = []
    for g in result.gates:
        mine: dict[str, list[tuple[str, GateFailure]]] = {}
        for outcome, f in result.checks:
            if f.metric == g.metric:
                mine.setdefault(f.condition, []).append((outcome, f))
        for checks in mine.values():
            if all(outcome == PASSED for outcome, _ in checks):
                worst = max((f for _, f in checks), key=lambda f: f.change_pct)
                out.append(f"gate passed: {passed_message(worst)}")
    return out


#: Why a step went unchecked, in the report's words.
_WHY = {INCOMPLETE: "incomplete"}


def skipped_text(s: Skipped) -> str:
    """A step a gate left unchecked: "spec at 4 req/s (incomplete)"."""
    return f"{s.condition} at {s.target_qps:g} req/s ({_WHY.get(s.why, s.why)})"


def skipped_line(result: GateResult) -> str | None:
    """The steps the gates left unchecked, in one line ("gates skipped incomplete steps:
    spec at 4 req/s (incomplete)"); None when the gates checked every step in scope."""
    if not result.skipped:
        return None
    return "gates skipped incomplete steps: " + "; ".join(skipped_text(s) for s in result.skipped)

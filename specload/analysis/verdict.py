"""The answer in one sentence per condition, drawn only from the computed figures.

Example: "spec-ngram-k4 lowers p50 TPOT 21 % (CI 17–25 %) up to 16 req/s and stops helping at
≈ 18 req/s (CI 16–21); p95 TPOT is worse from 20 req/s; TTFT is worse at every step".
The gain quoted is the one at the lowest tested step; CIs are 95 % bootstrap intervals.
"""

from __future__ import annotations

from specload.analysis.crossover import ALWAYS, CROSSES, NEVER, Crossover
from specload.analysis.ratios import RatioRow
from specload.analysis.steps import StepStats

__all__ = ["metric_label", "sentence", "where_verdict"]


def metric_label(metric: str) -> str:
    """``tpot_p95`` → ``p95 TPOT``."""
    fam, _, tag = metric.rpartition("_")
    name = "queue delay" if fam == "queue_delay" else fam.upper()
    return f"{tag} {name}"


def _q(v: float | None) -> str:
    return "?" if v is None else f"{v:.3g}"


def where_verdict(rows: list[RatioRow], verdict: str) -> str | None:
    """ "at every step" / "from 20 req/s" / "at 4, 8 req/s" where the change is ``verdict``
    (by ``min_gain`` and outside its CI); None if nowhere."""
    hits = [r.significant == verdict for r in rows]
    if not rows or not any(hits):
        return None
    if all(hits):
        return "at every step"
    first = hits.index(True)
    if all(hits[first:]):
        return f"from {rows[first].target_qps:g} req/s"
    return "at " + ", ".join(f"{r.target_qps:g}" for r, h in zip(rows, hits) if h) + " req/s"


def _headline(x: Crossover, min_gain: float) -> str:
    label = metric_label(x.metric)
    g = x.first_gain
    gain = ""
    if g.value is not None:
        ci = ""
        if g.lo is not None and g.hi is not None:
            unsure = ", not significant" if g.lo <= 0 else ""
            ci = f" (CI {g.lo * 100:.0f}–{g.hi * 100:.0f} %{unsure})"
        gain = f"{g.value * 100:.0f} %{ci}"
    if x.status == NEVER:
        return (
            f"{x.condition} does not lower {label} by {min_gain * 100:g} % at any tested load "
            f"({x.tested_range[0]:g}–{x.tested_range[1]:g} req/s)"
        )
    if x.status == ALWAYS:
        return (
            f"{x.condition} lowers {label} {gain} at {x.tested_range[0]:g} req/s and still "
            f"helps at {x.tested_range[1]:g} req/s, the highest tested load"
        )
    up_to = f" up to {x.last_helping_qps:g} req/s" if x.last_helping_qps is not None else ""
    return (
        f"{x.condition} lowers {label} {gain}{up_to} and stops helping at ≈ {_q(x.qps)} req/s "
        f"(CI {x.ci_text()})"
    )


def _family_clauses(metric: str, rows: dict[str, list[RatioRow]]) -> list[str]:
    fam, _, tag = metric.rpartition("_")
    other = f"{fam}_{'p95' if tag != 'p95' else 'p50'}"
    out = []
    where = where_verdict(rows.get(other, []), "worse")
    if where:
        out.append(f"{metric_label(other)} is worse {where}")
    if fam != "ttft":
        for verdict in ("worse", "better"):
            where = where_verdict(rows.get("ttft_p50", []), verdict)
            if where:
                out.append(f"TTFT is {verdict} {where}")
    return out


def _error_clause(cond: list[StepStats], base: list[StepStats]) -> str | None:
    by_q = {s.target_qps: s.error_rate for s in base}
    worse = [s for s in cond if s.target_qps in by_q and s.error_rate - by_q[s.target_qps] > 0.01]
    if not worse:
        return None
    top = max(worse, key=lambda s: s.error_rate)
    return f"errors rise to {top.error_rate:.1%} at {top.target_qps:g} req/s"


def sentence(
    x: Crossover | None,
    rows: dict[str, list[RatioRow]],
    cond: list[StepStats],
    base: list[StepStats],
    min_gain: float,
    contract_issues: list[str],
) -> str:
    """One sentence for one condition against the baseline."""
    if x is None:
        name = cond[0].condition if cond else "?"
        return f"{name}: no step in common with the baseline, nothing to compare"
    parts = [_headline(x, min_gain), *_family_clauses(x.metric, rows)]
    err = _error_clause(cond, base)
    if err:
        parts.append(err)
    if contract_issues:
        parts.append("its outputs break the baseline's contract (" + contract_issues[0] + ")")
    if x.status == CROSSES and x.note:
        parts.append(x.note)
    return "; ".join(parts)

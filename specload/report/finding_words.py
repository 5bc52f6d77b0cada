"""Two findings in words: a step whose p50 and p95 move apart (``ratios.Flag``), and server
starts whose levels differ beyond their sampling noise (``replicates.Disagreement``).

The analysis finds them as facts; the report's findings list and report.json's ``message``
fields say them the one way written here.
"""

from __future__ import annotations

from specload.analysis.decisions.replicates import Disagreement
from specload.analysis.statistics.ratios import Flag
from specload.analysis.statistics.stats import Estimate
from specload.report.wording import change_words, metric_label, step_label

__all__ = ["disagreement_message", "flag_message"]


def flag_message(f: Flag) -> str:
    """ "spec at 20 (18.6) req/s: p50 TPOT 12 % lower … but p95 TPOT 30 % higher …"."""
    name = f.family.upper() if f.family != "queue_delay" else "queue delay"
    return (
        f"{f.condition} at {step_label(f.target_qps, f.achieved_qps)} req/s: p50 {name} "
        f"{change_words(f.p50)} but p95 {name} {change_words(f.p95)} "
        "(some requests wait on the drafting path)"
    )


def disagreement_message(d: Disagreement) -> str:
    """ "server starts differ in level: baseline at 2 req/s, p50 TPOT 6.1 ms (CI …) in r1 vs
    7.4 ms (CI …) in r2, beyond their sampling noise (the pooled CIs include it)"."""

    def one(run: str, e: Estimate) -> str:
        ci = (
            f" (CI {e.lo * 1000:.3g}–{e.hi * 1000:.3g})"
            if e.lo is not None and e.hi is not None
            else ""
        )
        return f"{(e.value or 0.0) * 1000:.3g} ms{ci} in {run}"

    return (
        f"server starts differ in level: {d.condition} at {d.target_qps:g} req/s, "
        f"{metric_label(d.metric)} "
        + " vs ".join(one(r, e) for r, e in d.figures)
        + ", beyond their sampling noise (the pooled CIs include it)"
    )

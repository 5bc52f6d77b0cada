"""The answer in one sentence per condition, drawn only from the step classifications.

Examples: "spec lowers p50 TPOT by 16 % (CI 12–18 %) at 4 req/s, helps up to 16 req/s and
stops helping at ≈ 17.6 req/s (CI 17.1–18.2); p95 TPOT is worse from 20 req/s; TTFT is worse
at every tested load"; "prefix starts helping p50 TPOT at ≈ 6.3 req/s (CI 4.9–7.6) and helps
from 8 req/s up to the highest tested load, 24 req/s (at most 36 % lower, CI 31–40 %)".
Every clause uses the one rule of ``analysis.statistics.effect`` on the displayed 95 % CIs, so the
sentence says what the tables show. When server starts (replicates) analysed alone classify
a step differently, the sentence names the step, says so and claims no boundary.
"""

from __future__ import annotations

from specload.analysis.decisions.crossover import (
    ALWAYS,
    BETWEEN,
    CROSSES,
    MIXED,
    NEVER,
    STARTS,
    Crossover,
    StartEffects,
    fmt_qps,
)
from specload.analysis.statistics.effect import HELPS, HURTS, INCOMPLETE, NA, SAME, UNDECIDED
from specload.analysis.statistics.ratios import RatioRow
from specload.analysis.statistics.stats import Estimate
from specload.analysis.statistics.steps import StepStats
from specload.analysis.wording import (
    load_range,
    pct,
    step_label,
    to_decide_text,
    too_few_starts_text,
)

__all__ = [
    "BLOCKS_CAVEAT",
    "SLICES_CAVEAT",
    "SINGLE_START_CAVEAT",
    "benefit_words",
    "metric_label",
    "sentence",
    "status_words",
    "where_effect",
]

#: Said wherever a CI covers one server start only: it says nothing about a new start
#: (``benchmarks/results/coverage.md``: 0-70 % of a new start's values); here the steps were
#: too short to cut into time slices, so drift within the start is not in it either.
SINGLE_START_CAVEAT = (
    "about this server start only, over its requests (steps too short to cut into time "
    "slices: drift in time is not in them); run --replicates 3+ for a claim about this config"
)
#: Said where the CIs are over time slices of one contiguous server start
#: (``steps._time_slices``): drift within the start is in them, the variance between starts
#: is not.
SLICES_CAVEAT = (
    "about this server start only, over {slices} time slices per step; --replicates 3+ "
    "gives a claim about this config"
)
#: Said where the CIs are over interleaved blocks of one server start (``sweep --interleave``):
#: time drift within the start is in them, the variance between starts is not.
BLOCKS_CAVEAT = (
    "about this server start only, over {blocks} interleaved blocks per step; --replicates "
    "3+ gives a claim about this config"
)


def metric_label(metric: str) -> str:
    """``tpot_p95`` → ``p95 TPOT``."""
    fam, _, tag = metric.rpartition("_")
    name = "queue delay" if fam == "queue_delay" else fam.upper()
    return f"{tag} {name}"


def _loads(qs: list[float]) -> str:
    return ", ".join(f"{q:g}" for q in qs) + " req/s"


def where_effect(rows: list[RatioRow], effect: str) -> str | None:
    """ "at every tested load" / "from 20 req/s" / "at 4, 8 req/s" where the step's effect is
    ``effect``; None if nowhere. Incomplete steps and steps without data are left out."""
    used = [r for r in rows if r.effect not in (INCOMPLETE, NA)]
    hits = [r.effect == effect for r in used]
    if not used or not any(hits):
        return None
    if all(hits):
        return "at every tested load"
    first = hits.index(True)
    if all(hits[first:]):
        return f"from {_rows_text(used[first : first + 1])}"
    return "at " + _rows_text([r for r, h in zip(used, hits, strict=False) if h])


def _rows_text(rows: list[RatioRow]) -> str:
    """The rows' steps, each with its achieved load beside the nominal one ("16 (17.1)")."""
    return ", ".join(step_label(r.target_qps, r.achieved_qps) for r in rows) + " req/s"


def _gain_text(g: Estimate) -> str:
    """A significant gain: "16 % (CI 12–18 %)"."""
    if g.value is None:
        return "?"
    ci = f" (CI {pct(g.lo)}–{pct(g.hi)} %)" if g.lo is not None and g.hi is not None else ""
    return f"{pct(g.value)} %{ci}"


def status_words(x: Crossover) -> str:
    """The status as a phrase: "stops helping at ≈ 17.6 req/s", "never helps"."""
    r = x.tested_range
    if x.status == CROSSES and x.stop is not None:
        return f"stops helping at ≈ {x.stop.qps_text(r)} req/s"
    if x.status == STARTS and x.start is not None:
        return f"starts helping at ≈ {x.start.qps_text(r)} req/s"
    if x.status == BETWEEN and x.start is not None and x.stop is not None:
        return f"helps between ≈ {x.start.qps_text(r)} and ≈ {x.stop.qps_text(r)} req/s"
    return {
        ALWAYS: "helps at every tested load",
        NEVER: "never helps",
        MIXED: "helps at some loads only",
    }.get(x.status, x.status)


def benefit_words(x: Crossover | None) -> str:
    """What a condition buys on the verdict metric, for the capacity sentence:
    "it buys 15 % lower p50 TPOT below 16.2 req/s"; empty when it buys nothing."""
    if x is None or x.first_gain.value is None:
        return ""
    label, gain = metric_label(x.metric), pct(x.first_gain.value)
    if x.status == CROSSES and x.stop is not None:
        return f"it buys {gain} % lower {label} below {x.stop.qps_text(x.tested_range)} req/s"
    if x.status == ALWAYS:
        return f"it buys {gain} % lower {label} at every tested load"
    if x.status in (STARTS, BETWEEN) and x.peak_gain.value is not None:
        return f"it buys up to {pct(x.peak_gain.value)} % lower {label} at some loads"
    return f"it does not lower {label} at any tested load" if x.status == NEVER else ""


def _headline(x: Crossover, rows: list[RatioRow]) -> str:
    c, label, lo, hi = x.condition, metric_label(x.metric), *x.tested_range
    tested = load_range(lo, hi)
    if x.status == NEVER:
        worse, same = where_effect(rows, HURTS), where_effect(rows, SAME)
        if worse:
            also = f", the same {same}" if same else ""
            return (
                f"{c} never helps {label} at the tested loads ({tested}): it is worse {worse}{also}"
            )
        return (
            f"{c} makes no practical difference to {label} at any tested load ({tested}): "
            "the same within the margin at every one"
        )
    if x.status == ALWAYS:
        at_peak = ""
        if x.peak_qps is not None and x.peak_qps != lo:
            at_peak = f", {_gain_text(x.peak_gain)} at {x.peak_qps:g} req/s"
        return (
            f"{c} lowers {label} at every tested load ({tested}): by "
            f"{_gain_text(x.first_gain)} at {lo:g} req/s{at_peak}"
        )
    if x.status == CROSSES and x.stop is not None:
        head = (
            f"{c} lowers {label} by {_gain_text(x.first_gain)} at {lo:g} req/s, helps up to "
            f"{x.last_helping_qps:g} req/s"
        )
        if not x.stop.inside:
            return (
                f"{head}; above that no step is shown to help, its estimated gain still "
                f"above the minimum up to {hi:g} req/s (no stop inside the tested range)"
            )
        return (
            f"{head} and stops helping at ≈ {fmt_qps(x.stop.qps)} req/s "
            f"(CI {x.stop.ci_text(x.tested_range)})"
        )
    if x.status == STARTS and x.start is not None:
        start = (
            f"starts helping {label} at ≈ {fmt_qps(x.start.qps)} req/s "
            f"(CI {x.start.ci_text(x.tested_range)}) and helps"
            if x.start.inside
            else f"helps {label}"
        )
        return (
            f"{c} {start} from {x.first_helping_qps:g} "
            f"req/s up to the highest tested load, {hi:g} req/s (at most "
            f"{_gain_text(x.peak_gain)} lower, at {x.peak_qps:g} req/s)"
        )
    if x.status == BETWEEN and x.start is not None and x.stop is not None:
        return (
            f"{c} helps {label} only from {x.first_helping_qps:g} to {x.last_helping_qps:g} "
            f"req/s: starts at ≈ {x.start.qps_text(x.tested_range)} req/s (CI "
            f"{x.start.ci_text(x.tested_range)}) and stops at ≈ {x.stop.qps_text(x.tested_range)} "
            f"req/s (CI {x.stop.ci_text(x.tested_range)}); at most {_gain_text(x.peak_gain)} "
            f"lower, at {x.peak_qps:g} req/s"
        )
    return (
        f"{c} helps {label} at {x.steps_text(x.helping)} but not in between: no single boundary "
        "(lengthen the steps or add replicates)"
    )


def _undecided(rows: list[RatioRow]) -> list[tuple[float, float | None]]:
    """The undecided steps, each with its ``to_decide_s``."""
    return [(r.target_qps, r.to_decide_s) for r in rows if r.effect == UNDECIDED]


def _unsettled(x: Crossover, rows: list[RatioRow]) -> str:
    """Steps the status rests on are undecided (``Crossover.settled``): no answer yet, what
    is decided so far, and how much more measurement would likely decide the rest."""
    undecided = _undecided(rows)
    known = [
        f"{word} {where}"
        for effect, word in ((HELPS, "helps"), (SAME, "the same"), (HURTS, "hurts"))
        if (where := where_effect(rows, effect))
    ]
    head = f"{x.condition}: no decision yet on {metric_label(x.metric)}: " + to_decide_text(
        undecided
    )
    return head + (f" ({'; '.join(known)})" if known else "")


def _disagreement(x: Crossover) -> str:
    """Server starts analysed alone classify some step differently: no boundary is claimed.
    Names the steps and each start's effect there, the same words as the findings."""
    return (
        f"{x.condition}: server starts disagree on {metric_label(x.metric)} {x.split_text()}, "
        f"each of the {len(x.starts)} starts analysed alone: no decision, run more replicates"
    )


def _too_few(x: Crossover) -> str:
    """Too few server starts for an interval over them: no decision, each start's own
    effects instead (within-start CIs, by the one rule), the figures that stand."""

    def one(s: StartEffects) -> str:
        by: dict[str, list[float]] = {}
        for q, e in s.effects.items():
            if e in (HELPS, HURTS):
                by.setdefault(e, []).append(q)
        said = "; ".join(f"{e} at {x.steps_text(qs)}" for e, qs in by.items())
        return f"{s.run} {said or 'helps or hurts at no step'}"

    head = f"{x.condition}: {too_few_starts_text(x.too_few_starts)}, no decision"
    if not x.starts:
        return head
    return f"{head}; each start alone (about that start only): " + ", ".join(map(one, x.starts))


def status_words_plain(status: str) -> str:
    """A status without figures: "stops helping", "starts helping"."""
    return {
        CROSSES: "stops helping",
        STARTS: "starts helping",
        BETWEEN: "helps in a band",
        ALWAYS: "always helps",
        NEVER: "never helps",
        MIXED: "helps at some loads",
    }.get(status, status)


def _family_clauses(metric: str, rows: dict[str, list[RatioRow]], status: str) -> list[str]:
    fam, _, tag = metric.rpartition("_")
    other = f"{fam}_{'p95' if tag != 'p95' else 'p50'}"
    out = []
    if status != NEVER:  # the headline of never_helps already says where it is worse
        where = where_effect(rows.get(metric, []), HURTS)
        if where:
            out.append(f"{metric_label(metric)} is worse {where}")
    where = where_effect(rows.get(other, []), HURTS)
    if where:
        out.append(f"{metric_label(other)} is worse {where}")
    if fam != "ttft":
        for effect, word in ((HURTS, "worse"), (HELPS, "better")):
            where = where_effect(rows.get("ttft_p50", []), effect)
            if where:
                out.append(f"TTFT is {word} {where}")
    return out


def _error_clause(cond: list[StepStats], base: list[StepStats]) -> str | None:
    by_q = {s.target_qps: s.error_rate for s in base}
    worse = [s for s in cond if s.target_qps in by_q and s.error_rate - by_q[s.target_qps] > 0.01]
    if not worse:
        return None
    top = max(worse, key=lambda s: s.error_rate)
    return f"errors rise to {top.error_rate:.1%} at {top.target_qps:g} req/s"


def _nothing_to_compare(
    cond: list[StepStats], rows: list[RatioRow], metric: str, excluded: dict[float, str] | None
) -> str:
    """Why there is no answer: no common step, every common step incomplete, or the metric
    not measured at any of them (e.g. TPOT of a server that sends each answer in one chunk)."""
    name = cond[0].condition if cond else "?"
    if not rows:
        return f"{name}: no step in common with the baseline, nothing to compare"
    if excluded and all(r.target_qps in excluded for r in rows):
        return (
            f"{name}: no complete step to compare (left out {_loads(sorted(excluded))}: "
            f"{'; '.join(sorted(set(excluded.values())))})"
        )
    return (
        f"{name}: {metric_label(metric)} was not measured on both sides at any common step "
        f"({_loads([r.target_qps for r in rows])}); nothing to compare on it (choose another "
        "--metric, e.g. ttft_p50 or e2e_p50)"
    )


def sentence(
    x: Crossover | None,
    rows: dict[str, list[RatioRow]],
    cond: list[StepStats],
    base: list[StepStats],
    contract_issues: list[str],
    *,
    metric: str = "tpot_p50",
    excluded: dict[float, str] | None = None,
    caveat: str | None = None,
) -> str:
    """One sentence for one condition against the baseline.

    ``excluded``: target QPS left out, with why; ``caveat``: what the CIs leave out
    (``Comparison.ci_caveat``: one server start only), said at the end.
    """
    if x is None:
        return _nothing_to_compare(cond, rows.get(metric, []), metric, excluded)
    if x.too_few_starts:
        parts = [_too_few(x)]
    elif not x.replicates_agree:
        parts = [_disagreement(x), *_family_clauses(x.metric, rows, x.status)]
    elif not x.settled and not x.helping:  # its own clause says where it is worse
        parts = [_unsettled(x, rows.get(x.metric, [])), *_family_clauses(x.metric, rows, NEVER)]
    else:
        parts = [_headline(x, rows.get(x.metric, [])), *_family_clauses(x.metric, rows, x.status)]
        more = to_decide_text(_undecided(rows.get(x.metric, [])))
        parts += [more] if more else []
    err = _error_clause(cond, base)
    if err:
        parts.append(err)
    if excluded:
        parts.append(
            f"left out {_loads(sorted(excluded))} ({'; '.join(sorted(set(excluded.values())))})"
        )
    if contract_issues:
        parts.append("its outputs break the baseline's contract (" + contract_issues[0] + ")")
    text = "; ".join(parts)
    return f"{text} (95 % CIs {caveat})" if caveat else text

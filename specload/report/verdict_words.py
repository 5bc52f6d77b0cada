"""The answer in one sentence per condition, drawn only from the step classifications.

Examples: "spec lowers p50 TPOT by 16 % (CI 12–18 %) at 4 req/s, helps up to 16 req/s and
stops helping at ≈ 17.6 req/s (CI 17.1–18.2); p95 TPOT is worse from 20 req/s; TTFT is worse
at every tested load"; "prefix starts helping p50 TPOT at ≈ 6.3 req/s (CI 4.9–7.6) and helps
from 8 req/s up to the highest tested load, 24 req/s (at most 36 % lower, CI 31–40 %)".
Every clause uses the one rule of ``analysis.statistics.effect`` on the displayed 95 % CIs, so the
sentence says what the tables show. When server starts (replicates) analysed alone classify
a step differently, the sentence names the step, says so and claims no boundary.

The analysis hands over facts (crossovers, ratio rows, capacity, the classes' split); this
module is where they become the verdict's words, for every output: the terminal, Markdown,
HTML, report.json's ``verdict`` and ``ci_note``, JUnit and the web UI (which shows
report.json's text).
"""

from __future__ import annotations

from specload.analysis.comparison import Comparison
from specload.analysis.decisions.capacity import (
    VIOLATES,
    WITHIN,
    Capacity,
    CapacityChange,
    times100,
)
from specload.analysis.decisions.class_split import ClassSplit, class_split
from specload.analysis.decisions.classes import ClassAnswer
from specload.analysis.decisions.closed_loop import ClosedLoop
from specload.analysis.decisions.crossover import (
    ALWAYS,
    BETWEEN,
    CROSSES,
    MIXED,
    NEVER,
    STARTS,
    Crossover,
)
from specload.analysis.statistics.completeness import Incomplete
from specload.analysis.statistics.effect import HELPS, HURTS, SAME, UNDECIDED
from specload.analysis.statistics.ratios import RatioRow
from specload.analysis.statistics.stats import Estimate, look_stretch
from specload.analysis.statistics.steps import MIN_DECIDE_N, StepStats
from specload.core.slo import Slo
from specload.report.capacity_words import qps_text
from specload.report.contract_words import contract_issues
from specload.report.crossover_words import (
    boundary_ci_text,
    boundary_qps_text,
    fmt_qps,
    split_text,
    steps_text,
    where_effect,
)
from specload.report.rule_words import incomplete_text
from specload.report.wording import (
    change_words,
    load_range,
    metric_label,
    pct,
    pct_ci_text,
    signed_pct,
    step_name,
    to_decide_text,
)

__all__ = [
    "BLOCKS_CAVEAT",
    "CONFIG_CI_BESIDE",
    "NOTHING_TO_COMPARE",
    "NO_CONFIG_CI",
    "SINGLE_START_CAVEAT",
    "SLICES_CAVEAT",
    "benefit_words",
    "capacity_sentence",
    "ci_caveat",
    "ci_note",
    "class_verdicts",
    "looks_note",
    "sentence",
    "split_headline",
    "status_words",
    "status_words_plain",
    "verdict_lines",
    "verdict_text",
    "verdicts",
]

#: Said in place of the verdicts when the runs hold the baseline only.
NOTHING_TO_COMPARE = "only one condition: nothing to compare"
#: Said wherever the deciding CIs cover the server starts measured (one or more: their
#: units pooled, ``steps._latency``): it says nothing about a new start
#: (``benchmarks/results/coverage.md``: 0-70 % of a new start's values); here the steps were
#: too short to cut into time slices, so drift within the starts is not in it either.
SINGLE_START_CAVEAT = (
    "about {these} only, over {its} requests (steps too short to cut into time slices: drift "
    "in time is not in them); {config}"
)
#: Said where the CIs are over time slices of contiguous server starts
#: (``steps._time_slices``): drift within each start is in them, the variance between
#: starts is not.
SLICES_CAVEAT = "about {these} only, over {slices} time slices per step; {config}"
#: Said where the CIs are over interleaved blocks (``sweep --interleave``): time drift
#: within each start is in them, the variance between starts is not.
BLOCKS_CAVEAT = "about {these} only, over {blocks} interleaved blocks per step; {config}"
#: The caveat's tail below ``stats.MIN_STARTS_FOR_CONFIG`` starts, and from there on.
NO_CONFIG_CI = "--replicates 3+ gives a claim about this config"
CONFIG_CI_BESIDE = (
    "beside them, the interval about this config (a t interval over the starts paired by "
    "replicate), which does not decide"
)


def _loads(qs: list[float]) -> str:
    return ", ".join(f"{q:g}" for q in qs) + " req/s"


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
        return f"stops helping at ≈ {boundary_qps_text(x.stop, r)} req/s"
    if x.status == STARTS and x.start is not None:
        return f"starts helping at ≈ {boundary_qps_text(x.start, r)} req/s"
    if x.status == BETWEEN and x.start is not None and x.stop is not None:
        start, stop = boundary_qps_text(x.start, r), boundary_qps_text(x.stop, r)
        return f"helps between ≈ {start} and ≈ {stop} req/s"
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
        below = boundary_qps_text(x.stop, x.tested_range)
        return f"it buys {gain} % lower {label} below {below} req/s"
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
            f"(CI {boundary_ci_text(x.stop, x.tested_range)})"
        )
    if x.status == STARTS and x.start is not None:
        start = (
            f"starts helping {label} at ≈ {fmt_qps(x.start.qps)} req/s "
            f"(CI {boundary_ci_text(x.start, x.tested_range)}) and helps"
            if x.start.inside
            else f"helps {label}"
        )
        return (
            f"{c} {start} from {x.first_helping_qps:g} "
            f"req/s up to the highest tested load, {hi:g} req/s (at most "
            f"{_gain_text(x.peak_gain)} lower, at {x.peak_qps:g} req/s)"
        )
    if x.status == BETWEEN and x.start is not None and x.stop is not None:
        r = x.tested_range
        return (
            f"{c} helps {label} only from {x.first_helping_qps:g} to {x.last_helping_qps:g} "
            f"req/s: starts at ≈ {boundary_qps_text(x.start, r)} req/s (CI "
            f"{boundary_ci_text(x.start, r)}) and stops at ≈ {boundary_qps_text(x.stop, r)} "
            f"req/s (CI {boundary_ci_text(x.stop, r)}); at most {_gain_text(x.peak_gain)} "
            f"lower, at {x.peak_qps:g} req/s"
        )
    return (
        f"{c} helps {label} at {steps_text(x, x.helping)} but not in between: no single boundary "
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


def _closed_loop_clause(label: str, levels: list[ClosedLoop], metric: str) -> str | None:
    """The closed-loop steps' answers, which the ladder's crossover leaves out
    (``closed_loop.ladder_only``): "p50 TPOT with a fixed number of requests in flight:
    helps at concurrency 1: 15 % lower (CI 3–26 %), undecided at concurrency 8"."""
    said = []
    for level in levels:
        row = level.ratios.get(label, {}).get(metric)
        if row is None or row.ratio.value is None:
            continue
        at = f"at {step_name(0.0, level.concurrency)}"
        if row.effect in (HELPS, HURTS):
            word = "helps" if row.effect == HELPS else "hurts"
            said.append(f"{word} {at}: {change_words(row.ratio)}")
        else:
            said.append(f"{'the same' if row.effect == SAME else 'undecided'} {at}")
    if not said:
        return None
    return f"{metric_label(metric)} with a fixed number of requests in flight: " + ", ".join(said)


def _disagreement(x: Crossover) -> str:
    """Server starts analysed alone classify some step differently: no boundary is claimed.
    Names the steps and each start's effect there, the same words as the findings."""
    return (
        f"{x.condition}: server starts disagree on {metric_label(x.metric)} {split_text(x)}, "
        f"each of the {len(x.starts)} starts analysed alone: no decision, run more replicates"
    )


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


def _why_left_out(excluded: dict[float, Incomplete]) -> str:
    """Each distinct reason once, in alphabetical order: "spec: errors 19/200 (10 %) ..."."""
    return "; ".join(sorted({incomplete_text(why) for why in excluded.values()}))


def _nothing_to_compare(
    cond: list[StepStats],
    rows: list[RatioRow],
    metric: str,
    excluded: dict[float, Incomplete] | None,
) -> str:
    """Why there is no answer: no common step, every common step incomplete, or the metric
    not measured at any of them (e.g. TPOT of a server that sends each answer in one chunk)."""
    name = cond[0].condition if cond else "?"
    if not rows:
        return f"{name}: no step in common with the baseline, nothing to compare"
    if excluded and all(r.target_qps in excluded for r in rows):
        return (
            f"{name}: no complete step to compare (left out {_loads(sorted(excluded))}: "
            f"{_why_left_out(excluded)})"
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
    excluded: dict[float, Incomplete] | None = None,
    caveat: str | None = None,
    closed: tuple[str, list[ClosedLoop]] | None = None,
) -> str:
    """One sentence for one condition against the baseline.

    ``excluded``: target QPS left out, with why; ``caveat``: what the CIs leave out
    (``ci_caveat``: about these server starts only), said at the end; ``closed``: the
    condition's label and the closed-loop levels, whose answers follow the ladder's.
    """
    fixed = _closed_loop_clause(*closed, metric) if closed else None
    if x is None:
        if closed and fixed and not rows.get(metric):  # closed-loop steps alone answer
            text = f"{closed[0]}: {fixed}"
            return f"{text} (95 % CIs {caveat})" if caveat else text
        return _nothing_to_compare(cond, rows.get(metric, []), metric, excluded)
    if not x.replicates_agree:
        parts = [_disagreement(x), *_family_clauses(x.metric, rows, x.status)]
    elif not x.settled and not x.helping:  # its own clause says where it is worse
        parts = [_unsettled(x, rows.get(x.metric, [])), *_family_clauses(x.metric, rows, NEVER)]
    else:
        parts = [_headline(x, rows.get(x.metric, [])), *_family_clauses(x.metric, rows, x.status)]
        more = to_decide_text(_undecided(rows.get(x.metric, [])))
        parts += [more] if more else []
    parts += [fixed] if fixed else []
    err = _error_clause(cond, base)
    if err:
        parts.append(err)
    if excluded:
        parts.append(f"left out {_loads(sorted(excluded))} ({_why_left_out(excluded)})")
    if contract_issues:
        parts.append("its outputs break the baseline's contract (" + contract_issues[0] + ")")
    text = "; ".join(parts)
    return f"{text} (95 % CIs {caveat})" if caveat else text


def capacity_sentence(
    cond: Capacity, base: Capacity, change: CapacityChange, benefit: str, slos: list[Slo]
) -> str:
    """The verdict's sentence on capacity: what the condition carries within the SLO against
    the baseline, and what it buys for it (``benefit``, from the crossover)."""
    within = ", ".join(s.text() for s in slos)
    head = f"Within the SLO ({within}), {cond.condition}"
    if cond.status == WITHIN and base.status == WITHIN:
        top = f"{cond.tested_range[1]:g}"
        return f"{head} holds it at every tested load (up to {top} req/s), as does the baseline."
    carries = (
        f"carries {qps_text(cond)} req/s against the baseline's {qps_text(base)}"
        if cond.status != VIOLATES
        else f"misses it already at {cond.tested_range[0]:g} req/s (the baseline "
        f"carries {qps_text(base)})"
    )
    if change.value is not None:
        ci = pct_ci_text(times100(change.ci), change.ci_beyond, 0)
        carries += f" ({change.value * 100:+.0f} %" + (f", CI {ci} %)" if ci else ")")
    lost = ""
    if change.value is not None and change.value < 0:
        lost = f"{-change.value * 100:.0f} % of the capacity"
    elif cond.status == VIOLATES and base.status != VIOLATES:
        lost = "all the capacity tested"
    if benefit.startswith("it buys") and lost:
        tail = f": {benefit} at the cost of {lost}"
    elif benefit and lost:
        tail = f": {benefit}, and gives up {lost}"
    elif benefit:
        tail = f": {benefit}"
    else:
        tail = f": it gives up {lost}" if lost else ""
    return f"{head} {carries}{tail}."


def ci_caveat(c: Comparison, label: str) -> str:
    """What the deciding CIs of ``label`` vs the baseline are about, in words: the server
    starts measured ("this server start", "these 3 server starts") and what leaves them
    short of this config (the interval about it beside them, from three starts)."""
    k = c.starts(label)
    these = "this server start" if k < 2 else f"these {k} server starts"
    config = CONFIG_CI_BESIDE if c.config_ci(label) else NO_CONFIG_CI
    unit, n = c.units_per_step(label)
    if unit == "blocks":
        return BLOCKS_CAVEAT.format(these=these, blocks=n, config=config)
    if unit == "slices":
        return SLICES_CAVEAT.format(these=these, slices=n, config=config)
    its = "its" if k < 2 else "their"
    return SINGLE_START_CAVEAT.format(these=these, its=its, config=config)


def looks_note(c: Comparison) -> str:
    """``--until-decided``: every interval was widened for the looks its sweep planned
    (``stats.for_looks``); said beside the CIs (empty otherwise)."""
    if c.looks <= 1:
        return ""
    return (
        f"; each widened for {c.looks} looks at the data (--until-decided: x"
        f"{look_stretch(c.looks):.2f}, Bonferroni)"
    )


def ci_note(c: Comparison, label: str) -> str:
    """What every report says about ``label``'s CIs beside them (``ci_caveat``)."""
    return ci_caveat(c, label)


def verdicts(c: Comparison) -> dict[str, str]:
    """Each condition's verdict against the baseline: its sentence, the capacity sentence
    where SLOs were given, led by the classes' split where classes disagree."""
    out = {}
    drafting = {i.label for i in c.conditions if i.features.spec_on}
    for label in c.ratios:
        issues = next((contract_issues(chk) for chk in c.contract if chk.condition == label), [])
        text = sentence(
            c.crossover(label, c.metric),
            c.ratios[label],
            c.steps[label],
            c.steps[c.baseline],
            issues,
            metric=c.metric,
            excluded=c.incomplete.get(label),
            caveat=ci_caveat(c, label),
            closed=(label, c.closed_loop),
        )
        cap, base = c.capacity.get(label), c.capacity.get(c.baseline)
        if cap is not None and base is not None:
            benefit = benefit_words(c.crossover(label, c.metric))
            change = c.capacity_changes[label]
            text = f"{text.rstrip('.')}. " + capacity_sentence(cap, base, change, benefit, c.slos)
        pool = "a drafting pool" if label in drafting else ""
        split = class_split(label, c.baseline, c.classes, c.metric, pool)
        out[label] = f"{split_headline(split)}. Overall: {text}" if split is not None else text
    return out


def verdict_lines(said: dict[str, str]) -> list[str]:
    """The verdicts as printed, one per condition; one line saying why there are none."""
    return list(said.values()) or [NOTHING_TO_COMPARE]


def verdict_text(c: Comparison) -> str:
    """All conditions' sentences, one per line."""
    return "\n".join(verdict_lines(verdicts(c)))


def class_verdicts(c: Comparison, a: ClassAnswer) -> dict[str, str]:
    """One class's verdict per condition: the same sentence on the class's own steps."""
    return {
        label: sentence(
            a.crossovers[label].get(c.metric),
            rows,
            a.steps[label],
            a.steps[c.baseline],
            [],
            metric=c.metric,
            excluded=a.incomplete.get(label),
            caveat=ci_caveat(c, label),
        )
        for label, rows in a.ratios.items()
    }


def split_headline(split: ClassSplit) -> str:
    """The verdict's first clause where classes disagree: each class's answer, then where to
    send which. Classes with one answer at the same loads share a clause ("hurts qa (+40 %)
    and summary (+41 %) at every tested load")."""
    clauses: dict[tuple[str, str | None], list[str]] = {}
    for i, e in enumerate(split.gain):
        metric = f"{metric_label(split.metric)} " if i == 0 else ""
        clauses.setdefault(("helps", where_effect(list(e.rows), HELPS)), []).append(
            f"{e.name} ({metric}{signed_pct(e.best)})"
        )
    for e in split.rest:
        hurts = where_effect(list(e.rows), HURTS)
        if hurts is None:
            clauses.setdefault(("does not help", None), []).append(e.name)
        else:
            clauses.setdefault(("hurts", hurts), []).append(f"{e.name} ({signed_pct(e.worst)})")
    wheres = {where for _, where in clauses if where is not None}
    common = next(iter(wheres)) if len(wheres) == 1 and len(clauses) > 1 else None
    parts = [
        f"{verb} {_join(names)}" + (f" {where}" if where and where != common else "")
        for (verb, where), names in clauses.items()
    ]
    said = _join(parts) + (f" {common}" if common else "")
    names = _join([e.name for e in split.gain])
    pool = split.pool or f"a pool running {split.condition}"
    small = "".join(
        f"; too few {name} requests to decide ({n}, fewer than {MIN_DECIDE_N} at every step)"
        for name, n in split.small
    )
    return (
        f"{split.condition} {said}{small}: route {names} to {pool} and the rest to {split.baseline}"
    )


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]

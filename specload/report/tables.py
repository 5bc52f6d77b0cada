"""The report's tables as rows of display strings, shared by the terminal, Markdown and HTML.

Keeping the numbers → text step in one place means the three human-facing renderers always
agree. Latencies show in milliseconds (the records keep seconds), changes against the
baseline as signed percentages with their 95 % CI, rates as percentages.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specload.analysis.decisions.closed_loop import LOCKSTEP_S, LOCKSTEP_SHARE
from specload.analysis.decisions.crossover import Boundary, Crossover
from specload.analysis.decisions.gates import Gate, GateResult
from specload.analysis.diagnostics.decode_step import DecodeStep
from specload.analysis.statistics.ratios import RatioRow
from specload.analysis.statistics.stats import Estimate
from specload.analysis.statistics.steps import StepStats
from specload.report.capacity_words import qps_text, versus_text
from specload.report.contract_words import contract_issues
from specload.report.crossover_words import (
    boundary_ci_text,
    boundary_qps_text,
    mixed_note,
    step_text,
)
from specload.report.gate_words import gate_message
from specload.report.model import Report
from specload.report.rule_words import effect_text, incomplete_text, rule_text
from specload.report.verdict_words import ci_caveat, looks_note
from specload.report.wording import metric_label, signed_change, step_label

__all__ = [
    "capacity_table",
    "class_table",
    "closed_loop_table",
    "Table",
    "attribution_table",
    "contract_table",
    "crossover_table",
    "decode_step_table",
    "fmt_change",
    "fmt_ms",
    "fmt_pct",
    "gate_table",
    "lookup_lines",
    "lookup_overall",
    "lookup_table",
    "ratio_table",
    "run_table",
    "server_table",
    "step_name",
    "step_table",
]

DASH = "—"


@dataclass(slots=True)
class Table:
    """Rows of display strings. ``effects``, when given, holds each cell's classification
    (``analysis.statistics.effect``: helps / hurts / same / undecided / incomplete, or "") for colouring."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    note: str = ""
    effects: list[list[str]] = field(default_factory=list)


def fmt_ms(seconds: float | None, digits: int = 1) -> str:
    return DASH if seconds is None else f"{seconds * 1000:.{digits}f}"


def fmt_pct(x: float | None, digits: int = 1) -> str:
    return DASH if x is None else f"{x * 100:.{digits}f}%"


def fmt_change(e: Estimate) -> str:
    """Ratio → "-21.3 % (-25.0…-17.1)" (negative = faster; the CI rounded like the change)."""
    return signed_change(e)


def ci_scope(report: Report, label: str) -> str:
    """What a condition's CIs cover: the server starts measured (one or more, their units
    pooled: these decide), and from three starts the interval about this config beside."""
    c = report.comparison
    text = f"95 % CIs {ci_caveat(c, label)}{looks_note(c)}."
    if c.config_ci(label):
        text += (
            f" This config: over {c.starts_per_step(label)} starts of {label} and "
            f"{c.starts_per_step(c.baseline)} of {c.baseline} at every step (the last column)."
        )
    return text


def rule_note(report: Report) -> str:
    """The one rule, as every table that classifies steps states it."""
    return rule_text("the latency", report.comparison.min_gain)


def achieved_by_step(steps: list[StepStats]) -> dict[float, float | None]:
    """Target QPS -> achieved QPS of one condition's steps."""
    return {s.target_qps: s.achieved_qps for s in steps}


def step_name(report: Report, label: str, qps: float) -> str:
    """A step as every step table names it: nominal load with ``label``'s achieved load
    beside it where they differ ("16 (17.1)", ``wording.step_label``)."""
    achieved = achieved_by_step(report.comparison.steps.get(label, []))
    return step_label(qps, achieved.get(qps))


def _num(v: float | None, fmt: str = ".3g") -> str:
    return DASH if v is None else format(v, fmt)


def _achieved(s: StepStats) -> str:
    """Achieved load, with every request's rate beside it where they differ (multi-turn:
    ``achieved_qps`` counts conversation starts, ``requests_per_s`` every turn)."""
    req = s.requests_per_s
    if req is None or s.achieved_qps is None or abs(req - s.achieved_qps) < 1e-9:
        return _num(s.achieved_qps)
    return f"{_num(s.achieved_qps)} ({_num(req)} req/s)"


def step_table(report: Report, label: str) -> Table:
    """Client-side (and server counter) figures of one condition per step."""
    rows = []
    restarts = False
    for s in report.comparison.steps[label]:
        lat, srv = s.latency, s.server
        restarts = restarts or bool(srv and srv.restarts)
        rows.append(
            [
                step_label(s.target_qps, s.achieved_qps) + (" ↻" if srv and srv.restarts else ""),
                _achieved(s),
                str(s.n),
                fmt_pct(s.error_rate),
                fmt_ms(lat["ttft_p50"].value),
                fmt_ms(lat["ttft_p95"].value),
                fmt_ms(lat["tpot_p50"].value, 2),
                fmt_ms(lat["tpot_p95"].value, 2),
                fmt_ms(lat["e2e_p50"].value, 0),
                fmt_ms(lat["e2e_p95"].value, 0),
                fmt_ms(lat["queue_delay_p95"].value),
                _num(s.output_tok_s, ".0f"),
                _num(s.tokens_per_chunk, ".2f"),
                fmt_pct(srv.acceptance_rate if srv else None, 0),
                _num(srv.acceptance_length if srv else None, ".2f"),
                fmt_pct(srv.prefix_hit_rate if srv else None, 0),
                fmt_pct(srv.kv_usage_max if srv else None, 0),
                _num(srv.running_max if srv else None, ".0f"),
                _num(srv.gpu_memory_mib_max if srv else None, ".0f"),
                _errors(s),
            ]
        )
    return Table(
        f"{label}: per step (warm-up excluded)",
        [
            "QPS",
            "achieved",
            "n",
            "errors",
            "TTFT p50 ms",
            "TTFT p95 ms",
            "TPOT p50 ms",
            "TPOT p95 ms",
            "E2E p50 ms",
            "E2E p95 ms",
            "queue p95 ms",
            "out tok/s",
            "tok/chunk",
            "accept",
            "accept len",
            "prefix hit",
            "KV max",
            "running max",
            "GPU MiB max",
            "error kinds",
        ],
        rows,
        note=(
            "↻: the server restarted during this step (its counters went back); the server "
            "columns leave that execution out (see the notes)."
            if restarts
            else ""
        ),
    )


def _errors(s: StepStats) -> str:
    return ", ".join(f"{k} {v}" for k, v in s.error_kinds.items()) or DASH


RATIO_METRICS = ("tpot_p50", "tpot_p95", "ttft_p50", "e2e_p50", "e2e_p95")


def ratio_table(report: Report, label: str) -> Table:
    """Change vs the baseline per step (negative = faster), with 95 % CIs; each cell carries
    its effect (the one rule), and the last column the verdict metric's."""
    c = report.comparison
    rows_by_metric = c.ratios[label]
    base = {s.target_qps: s for s in c.steps[c.baseline]}
    config = c.config_ci(label)
    out, effects = [], []
    for i, r in enumerate(rows_by_metric[c.metric]):
        cells = [step_name(report, label, r.target_qps)]
        cells += [fmt_change(rows_by_metric[m][i].ratio) for m in RATIO_METRICS]
        err = next(s.error_rate for s in c.steps[label] if s.target_qps == r.target_qps)
        cells.append(f"{(err - base[r.target_qps].error_rate) * 100:+.1f} pp")
        cells.append(effect_text(r.effect))
        more = [""]
        if config:
            cells.append(_config_cell(r))
            more.append(r.config_effect or "")
        out.append(cells)
        effects.append(
            ["", *(rows_by_metric[m][i].effect for m in RATIO_METRICS), "", r.effect, *more[1:]]
        )
    left_out = c.incomplete.get(label) or {}
    note = "Cells by the rule stated at the top. " + ci_scope(report, label)
    if left_out:
        note += " Left out (incomplete): " + "; ".join(
            f"{q:g} req/s: {incomplete_text(why)}" for q, why in left_out.items()
        )
    return Table(
        f"{label} vs {c.baseline}: change per step (95 % CI)",
        [
            "QPS",
            *(metric_label(m) for m in RATIO_METRICS),
            "errors",
            f"effect on {metric_label(c.metric)}",  # not the metric's name again: its verdict
            *([f"this config: {metric_label(c.metric)}"] if config else []),
        ],
        out,
        note=note,
        effects=effects,
    )


def _config_cell(r: RatioRow) -> str:
    """The interval about this config beside the deciding one ("-12.0 % (-30.1…+9.8)"),
    coloured by its answer like every change cell: shown, never deciding. Its answer is not
    written out: the column would push the table past a laptop's width."""
    return DASH if r.config_ratio is None else fmt_change(r.config_ratio)


def _boundary_cell(b: Boundary | None, x: Crossover) -> str:
    """The boundary with its CI; none is claimed where the server starts disagree."""
    if b is None:
        return DASH
    if not x.replicates_agree or not x.settled:
        return "undecided"
    return f"{boundary_qps_text(b, x.tested_range)} ({boundary_ci_text(b, x.tested_range)})"


def _starts_cell(x: Crossover) -> str:
    """How many server starts, and whether they agree step by step (``replicates_agree``)."""
    n = len(x.starts)
    if not n:
        return "1 (single)"
    if x.replicates_agree:
        return f"{n}: all agree"
    return f"{n}: disagree at {', '.join(step_text(x, q) for q in x.split_qps)}"


def _tested_top(report: Report) -> str:
    """The highest tested load of this comparison, as its captions write it (``>24``)."""
    tops = [x.tested_range[1] for x in report.comparison.crossovers]
    return f"{max(tops):g}" if tops else "HIGHEST"


def _beyond_note(ranges: list[tuple[float, float]]) -> str:
    """The capacity caption's open ends, from this comparison's tested range."""
    lo, hi = min(r[0] for r in ranges), max(r[1] for r in ranges)
    return f"'>{hi:g}' holds at every tested step, '<{lo:g}' misses at the lowest."


def capacity_table(report: Report) -> Table | None:
    """Per condition: the highest load within every SLO, its CI, what limits it, and the
    change against the baseline (``analysis.decisions.capacity``); None without SLOs."""
    c = report.comparison
    if not c.capacity:
        return None
    rows = []
    for label, cap in c.capacity.items():
        base = c.capacity.get(c.baseline)
        change = c.capacity_changes.get(label)
        cell = versus_text(cap, base, change) if base is not None else DASH
        ci = boundary_ci_text(cap.boundary, cap.tested_range) if cap.qps is not None else DASH
        rows.append(
            [
                label,
                qps_text(cap),
                ci,
                cap.status.replace("_", " "),
                cap.limiting_slo or DASH,
                cell,
                f"{cap.tested_range[0]:g}–{cap.tested_range[1]:g}",
            ]
        )
    return Table(
        "Capacity within the SLO (" + ", ".join(s.text() for s in c.slos) + ")",
        ["condition", "capacity req/s", "95 % CI", "status", "limited by", "vs baseline", "tested"],
        rows,
        note="The highest load at which every SLO holds at every tested step up to it, "
        "interpolated in log load between the last step that holds and the first that does "
        f"not; {_beyond_note([cap.tested_range for cap in c.capacity.values()])} Goodput per step "
        "(requests/s meeting every SLO) is in report.json and the goodput plot.",
    )


def _ratio_cell(
    rows: list[RatioRow], i: int, achieved: dict[float, float | None]
) -> tuple[str, str]:
    if not rows:
        return DASH, ""
    r = rows[i]
    return (
        f"{step_label(r.target_qps, achieved.get(r.target_qps))}: {fmt_change(r.ratio)}",
        r.effect,
    )


def class_table(report: Report) -> Table | None:
    """Per class of request and condition: records, where it helps, and the change at the
    lowest and highest load (``analysis.decisions.classes``); None without classes."""
    c = report.comparison
    rows, effects = [], []
    for a in c.classes:
        for label, xs in a.crossovers.items():
            x = xs.get(c.metric)
            metric_rows = a.ratios.get(label, {}).get(c.metric, [])
            achieved = achieved_by_step(a.steps.get(label, []))
            low, low_effect = _ratio_cell(metric_rows, 0, achieved)
            high, high_effect = _ratio_cell(metric_rows, -1, achieved)
            helping = ", ".join(f"{q:g}" for q in x.helping) if x else ""
            rows.append(
                [
                    a.name,
                    label,
                    f"{a.n.get(label, 0)} / {a.n.get(c.baseline, 0)}",
                    x.status.replace("_", " ") if x else DASH,
                    helping or DASH,
                    _boundary_cell(x.stop, x) if x else DASH,
                    low,
                    high,
                ]
            )
            effects.append(["", "", "", "", "", "", low_effect, high_effect])
    if not rows:
        return None
    kind = c.classes[0].kind
    bounds = c.classes[0].bounds
    how = (
        "the prompt file's category"
        if kind == "category"
        else "conversation turn"
        if kind == "turn"
        else "input length, split at the median prompt length "
        f"({bounds['median_prompt_tokens']:.0f} tokens)"
        if "median_prompt_tokens" in bounds
        else "input length in prompt tokens (class_bounds)"
    )
    return Table(
        f"Per class of request ({how}): {metric_label(c.metric)}",
        [
            "class",
            "condition",
            "records (cond / base)",
            "status",
            "helps at",
            "stops helping",
            "lowest load",
            "highest load",
        ],
        rows,
        note="Each class's records compared on their own, by the same rule and bootstrap as "
        "the whole; the change is condition / baseline - 1 with its 95 % CI. Server figures "
        "(/metrics) are not per class.",
        effects=effects,
    )


def closed_loop_table(report: Report) -> Table | None:
    """Closed-loop steps (``{concurrency: N}``): each condition's p50s, and the change in p50
    TPOT, TTFT and E2E against the baseline at the same concurrency; None without them."""
    c = report.comparison
    if not c.closed_loop:
        return None
    metrics = ("tpot_p50", "ttft_p50", "e2e_p50")
    rows, effects = [], []
    for level in c.closed_loop:
        for label, s in level.steps.items():
            ratios = level.ratios.get(label, {})
            cells = [fmt_change(ratios[m].ratio) if m in ratios else DASH for m in metrics]
            rows.append(
                [
                    str(level.concurrency),
                    label,
                    str(s.n_ok),
                    _num(s.achieved_qps),
                    fmt_ms(s.latency["ttft_p50"].value),
                    fmt_ms(s.latency["tpot_p50"].value, 2),
                    fmt_ms(s.latency["e2e_p50"].value, 0),
                    f"{level.lockstep.get(label, 0.0):.0%}",
                    *cells,
                ]
            )
            effects.append([""] * 8 + [ratios[m].effect if m in ratios else "" for m in metrics])
    return Table(
        "Closed-loop steps (a fixed number of requests in flight)",
        ["concurrency", "condition", "requests", "req/s", "TTFT p50 ms", "TPOT p50 ms",
         "E2E p50 ms", "sent together", "p50 TPOT vs base", "p50 TTFT vs base",
         "p50 E2E vs base"],
        rows,
        note="Each request is sent when one returns, so these steps measure latency with that "
        "many requests in flight (concurrency 1: a lone user, no batching); they are kept out "
        "of the QPS ladder and its crossover. Sent together: the share of sends within "
        f"{LOCKSTEP_S * 1000:.0f} ms of another (over {LOCKSTEP_SHARE:.0%}: the users ran in "
        "lockstep, and TTFT measured bursts of simultaneous prefills). Changes by the rule "
        "stated at the top.",
        effects=effects,
    )  # fmt: skip


def crossover_table(report: Report) -> Table:
    """Per condition and metric: the status and the boundaries of the helping range."""
    rows = []
    for x in report.comparison.crossovers:
        status = x.status.replace("_", " ")
        if not x.replicates_agree:
            status += " (starts disagree: undecided)"
        elif not x.settled:
            status += (
                f" (not decided: undecided at {', '.join(f'{q:g}' for q in x.undecided_steps)})"
            )
        rows.append(
            [
                x.condition,
                metric_label(x.metric),
                status,
                _boundary_cell(x.start, x),
                _boundary_cell(x.stop, x),
                f"{x.tested_range[0]:g}–{x.tested_range[1]:g}",
                ", ".join(step_text(x, q) for q in x.helping) or DASH,
                ", ".join(f"{q:g}" for q in x.excluded) or DASH,
                _starts_cell(x),
                f"{x.agreement:.0%}",
                mixed_note(x),
            ]
        )
    return Table(
        "Where each condition helps: status and boundaries (req/s, with the steps that bracket them)",
        [
            "condition",
            "metric",
            "status",
            "starts helping",
            "stops helping",
            "tested",
            "helps at",
            "left out",
            "server starts",
            "same steps in resamples",
            "note",
        ],
        rows,
        note="Steps classified by the rule stated at the top. A boundary lies between a helping "
        "and a non-helping step, interpolated in log load; its CI is the two tested loads that "
        "bracket it: the steps' own CIs put the gain surely at or above the minimum up to the "
        "lower one and surely below it at the upper one (narrower only with steps between them); "
        f"'>{_tested_top(report)}' means beyond the highest tested step. Server starts: each start against its partner baseline start, by the same rule; "
        "they agree when every step has the same effect in every start, else 'disagree at' "
        "names the loads and no boundary is claimed ('undecided'). Same steps in resamples: the "
        "share of bootstrap resamples that help at exactly the steps above (low: the helping "
        "range is fragile). A status or boundary resting on undecided steps says so ('not "
        "decided', 'undecided'). Statuses: docs/report.md.",
    )


def _drop_empty(t: Table, keep: int) -> Table:
    """``t`` without the columns (after the first ``keep``) that are empty in every row."""
    idx = [i for i in range(len(t.headers)) if i < keep or any(r[i] != DASH for r in t.rows)]
    return Table(
        t.title, [t.headers[i] for i in idx], [[r[i] for i in idx] for r in t.rows], t.note
    )


def _decode_by_qps(report: Report, label: str) -> dict[float, DecodeStep]:
    return {d.target_qps: d for d in report.comparison.decode.get(label, [])}


def _mean_pair(client: float | None, server: float | None, digits: int) -> list[str]:
    """[client, server, client − server] in ms; all empty when the server lacks the figure."""
    if server is None:
        return [DASH, DASH, DASH]
    diff = fmt_ms(client - server, digits) if client is not None else DASH
    return [fmt_ms(client, digits), fmt_ms(server, digits), diff]


def server_table(report: Report) -> Table | None:
    """Client vs server latency means per step; None when no server histogram was scraped.

    Server figures are histogram means (Δ_sum / Δ_count over the step's measured window),
    compared with the client's means over the step's successful requests, never with a
    percentile. A column the server does not expose is left out.
    """
    rows = []
    edge = 0.0  # the longest mean E2E as a share of a step's measured window
    for label, steps in report.comparison.steps.items():
        decode = _decode_by_qps(report, label)
        for s in steps:
            srv = s.server.mean_s if s.server else {}
            if not srv:
                continue
            d = decode.get(s.target_qps)
            cli = d.client_mean_s if d else {}
            if s.executions and s.window_s > 0 and "e2e" in cli:
                edge = max(edge, cli["e2e"] / (s.window_s / s.executions))
            ttft, tpot, e2e = (
                _mean_pair(cli.get(k), srv.get(k), digits)
                for k, digits in (("ttft", 1), ("tpot", 2), ("e2e", 0))
            )
            rows.append(
                [
                    label,
                    step_label(s.target_qps, s.achieved_qps),
                    *ttft,
                    fmt_ms(srv.get("queue")),
                    fmt_ms(srv.get("prefill")),
                    fmt_ms(srv.get("decode"), 0),
                    *tpot[:2],
                    *e2e,
                ]
            )
    if not rows:
        return None
    table = Table(
        "Client vs server: means per step (ms)",
        [
            "condition",
            "QPS",
            "TTFT client",
            "TTFT server",
            "TTFT client − server",
            "queue server",
            "prefill server",
            "decode server",
            "TPOT client",
            "TPOT server",
            "E2E client",
            "E2E server",
            "E2E client − server",
        ],
        rows,
        note="Means, not percentiles: the server's from its /metrics histograms (Δ_sum / Δ_count "
        "over the step's measured window, exact), the client's over the step's successful "
        "requests. client − server = the wire plus the client's share. Columns the server "
        "does not expose are left out."
        + (
            f" Requests here last up to {edge:.0%} of a step's measured window: the server's "
            "means cover the requests that finished in the window, the client's those sent in "
            "it, so E2E and decode means also differ by the requests in flight at its edges."
            if edge > 0.1
            else ""
        ),
    )
    return _drop_empty(table, 2)


def decode_step_table(report: Report) -> Table | None:
    """Decode step time per condition and step; None when nothing streamed."""
    c = report.comparison
    base = _decode_by_qps(report, c.baseline)
    rows = []
    for label, steps in c.decode.items():
        for d in steps:
            b = base.get(d.target_qps)
            vs = (
                f"{(d.chunk_gap_s / b.chunk_gap_s - 1) * 100:+.0f} %"
                if label != c.baseline and d.chunk_gap_s and b is not None and b.chunk_gap_s
                else DASH
            )
            rows.append(
                [
                    label,
                    step_name(report, label, d.target_qps),
                    str(d.n),
                    fmt_ms(d.chunk_gap_s, 2),
                    fmt_ms(d.chunk_gap_mean_s, 2),
                    fmt_ms(d.server_itl_mean_s, 2),
                    _num(d.tokens_per_chunk, ".2f"),
                    vs,
                ]
            )
    if not any(r[3] != DASH for r in rows):
        return None
    table = Table(
        "Decode step time (ms)",
        [
            "condition",
            "QPS",
            "requests",
            "chunk gap p50",
            "chunk gap mean",
            "server ITL mean",
            "tok/chunk",
            f"step vs {c.baseline}",
        ],
        rows,
        note="One streamed chunk per engine step: chunk gap = (E2E − TTFT) / (chunks − 1) per "
        "request, its median over the step's successful requests (p50) and pooled over every "
        "gap (mean, comparable with the server's inter-token-latency mean, which vLLM observes "
        "once per step per request). tok/chunk = (output tokens − 1) / (chunks − 1), median: "
        "a speculative step is longer because it carries that many tokens; "
        f"step vs {c.baseline} compares p50 chunk gaps at the same load.",
    )
    return _drop_empty(table, 2)


def lookup_overall(steps: list[StepStats]) -> float | None:
    """A condition's lookup match rate over all its steps (mean over requests)."""
    n = sum(s.lookup_n for s in steps)
    total = sum((s.lookup_match_rate or 0.0) * s.lookup_n for s in steps)
    return total / n if n else None


def lookup_table(report: Report) -> Table | None:
    """Prompt-lookup match rate per step and overall, per condition; None when not recorded."""
    steps = report.comparison.steps
    labels = [label for label, ss in steps.items() if any(s.lookup_n for s in ss)]
    if not labels:
        return None
    by_qps = {label: {s.target_qps: s for s in steps[label]} for label in labels}
    qps = sorted({q for label in labels for q in by_qps[label]})
    rows = [
        [step_name(report, labels[0], q)]
        + [fmt_pct(by_qps[b][q].lookup_match_rate, 0) if q in by_qps[b] else DASH for b in labels]
        for q in qps
    ]
    rows.append(["overall"] + [fmt_pct(lookup_overall(steps[b]), 0) for b in labels])
    return Table(
        "Would n-gram drafting help? Prompt-lookup match rate (share of output tokens)",
        ["QPS", *labels],
        rows,
        note="Share of output tokens that vLLM's n-gram proposer could have guessed from the "
        "prompt and the output before them (docs/decision-support.md). Around 30 % or more: "
        "n-gram/suffix drafting is worth a try; near 0: it has nothing to propose. "
        "`specload inspect RUN_DIR` gives the full repetition profile.",
    )


def lookup_lines(report: Report) -> list[str]:
    """One line per condition that recorded lookup rates (the terminal's compact form)."""
    out = []
    for label, steps in report.comparison.steps.items():
        overall = lookup_overall(steps)
        if overall is None:
            continue
        per = ", ".join(
            f"{s.target_qps:g} req/s {fmt_pct(s.lookup_match_rate, 0)}" for s in steps if s.lookup_n
        )
        out.append(
            f"Prompt-lookup match rate (would n-gram drafting help?) {label}: "
            f"{fmt_pct(overall, 0)} overall ({per})"
        )
    return out


def attribution_table(report: Report) -> Table | None:
    att = report.comparison.attribution
    if att is None:
        return None
    rows = []
    for s in att.steps:
        for fam in ("ttft", "tpot"):
            r = s.ratios[fam]
            rows.append(
                [
                    step_name(report, report.comparison.baseline, s.target_qps),
                    "TTFT (prefill)" if fam == "ttft" else "TPOT (decode)",
                    fmt_change(r["prefix"]),
                    fmt_change(r["spec"]),
                    fmt_change(r["both"]),
                    fmt_change(s.interaction[fam]),
                    "yes" if s.adds_up[fam] else "NO",
                ]
            )
    lab = att.labels
    return Table(
        "Attribution: which feature changed what (p50, vs baseline)",
        [
            "QPS",
            "latency",
            f"prefix only ({lab['prefix']})",
            f"spec only ({lab['spec']})",
            f"both ({lab['both']})",
            "interaction",
            "adds up",
        ],
        rows,
        note="interaction = both / (prefix × spec); 0 % when the effects are independent.",
    )


def contract_table(report: Report) -> Table:
    rows = []
    for chk in report.comparison.contract:
        s, b = chk.side, chk.base
        fins = ", ".join(f"{k} {v:.0%}" for k, v in s.finish_reasons.items()) or DASH
        rows.append(
            [
                chk.condition,
                fins,
                _num(s.output_tokens.get("p50")),
                _num(b.output_tokens.get("p50")),
                fmt_pct(chk.exact_match) + (f" of {chk.compared}" if chk.compared else ""),
                fmt_pct(s.json_valid),
                fmt_pct(s.tool_call_share),
                "pass" if chk.passed else "FAIL: " + "; ".join(contract_issues(chk)),
            ]
        )
    return Table(
        f"Output contract vs {report.comparison.baseline}",
        [
            "condition",
            "finish reasons",
            "output tokens p50",
            "baseline p50",
            "exact match",
            "JSON valid",
            "tool calls",
            "result",
        ],
        rows,
    )


def _gate_rule(gate: Gate) -> str:
    """What must lie beyond the limit for the gate to fail (``gates.judge``)."""
    if gate.metric == "error_rate":
        return "value (no CI)"
    return "point estimate" if gate.on == "point" else "whole 95 % CI"


def _gate_result(g: GateResult, metric: str) -> str:
    if any(f.metric == metric for f in g.failures):
        return "FAIL"
    if any(f.metric == metric for f in g.possible):
        return "pass (possible regression)"
    return "pass"


def gate_table(report: Report) -> Table | None:
    """Each gate, the rule it was judged by, its result, then every failure and possible
    regression in full (the lines ``specload compare`` prints on stderr)."""
    g = report.comparison.gates
    if g is None:
        return None
    rows = [
        [
            gate.metric,
            f"+{gate.max_pct:g}",
            "up to " + (f"{g.operating_qps:g}" if g.operating_qps else "every step"),
            _gate_rule(gate),
            _gate_result(g, gate.metric),
        ]
        for gate in g.gates
    ]
    rows += [["", "", "", "", gate_message(f)] for f in [*g.failures, *g.possible]]
    return Table(
        "CI gates",
        ["metric", "max regression %", "steps", "beyond the limit", "result"],
        rows,
        note="A gate fails where a change hurts by the rule and its whole 95 % CI lies beyond "
        "the allowed limit (--gate-on ci); where only the point estimate does, it passes as a "
        "possible regression. --gate-on point fails on the point estimate.",
    )


def run_table(report: Report) -> Table:
    rows = [
        [
            r.label,
            r.role,
            str(r.runs),
            r.server_version,
            r.model,
            r.speculative,
            r.prefix_caching,
            r.lengths,
            r.concurrency,
            r.status,
        ]
        for r in report.runs
    ]
    return Table(
        "Runs",
        [
            "condition",
            "role",
            "run dirs",
            "server",
            "model",
            "speculative",
            "prefix caching",
            "lengths (tokens)",
            "concurrency",
            "status",
        ],
        rows,
    )

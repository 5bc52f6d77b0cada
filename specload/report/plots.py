"""Figures for the HTML report, drawn from a ``Report`` only, as standalone SVG text.

Uses matplotlib's object API (``Figure``) with the SVG canvas, never pyplot, so rendering
changes no global backend state and needs no display. Latency plots share a log-QPS x axis
(load steps are geometric; the crossover is interpolated in log-QPS) and mark each
condition's crossover on the chosen metric with its CI as a shaded band (one the server
starts disagree on, which the verdict does not claim: labelled so, no band).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

from specload.analysis.diagnostics.regime_model import Regime, StepKey
from specload.analysis.statistics.stats import Estimate
from specload.report.model import Report
from specload.report.palette import HELPS, LINES, NEUTRAL
from specload.report.regime_words import regime_step
from specload.report.wording import metric_label

__all__ = ["Plot", "regime_plot", "render_plots"]


@dataclass(frozen=True, slots=True)
class Plot:
    key: str
    title: str
    svg: str


def _band(e: Estimate, scale: float = 1.0) -> tuple[float, float, float]:
    """(value, lo, hi) × scale of an estimate known to have a value; a missing bound = value."""
    v = e.value if e.value is not None else float("nan")
    lo = e.lo if e.lo is not None else v
    hi = e.hi if e.hi is not None else v
    return v * scale, lo * scale, hi * scale


def _fig() -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.2, 3.8), dpi=100)
    fig.subplots_adjust(left=0.1, right=0.98, top=0.91, bottom=0.13)
    return fig, fig.subplots()


def _log_qps_axis(ax: Any, report: Report) -> None:
    """Log x axis ticked at the tested loads (matplotlib's automatic log ticks cost ~0.3 s a plot)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    qs = sorted(
        {
            s.target_qps
            for steps in report.comparison.steps.values()
            for s in steps
            if s.target_qps > 0
        }
    )
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(qs))
    ax.xaxis.set_minor_locator(NullLocator())
    shown = _spaced(qs)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}" if v in shown else ""))
    ax.set_xlabel("target load (req/s)")


def _spaced(qs: list[float], parts: int = 14) -> set[float]:
    """The loads to label: each at least 1/``parts`` of the log axis from the last one
    labelled (a refined search puts loads 2 % apart; their labels would overprint)."""
    import math

    if len(qs) < 2:
        return set(qs)
    gap = (math.log(qs[-1]) - math.log(qs[0])) / parts
    out, last = {qs[0]}, math.log(qs[0])
    for q in qs[1:]:
        if math.log(q) - last >= gap:
            out.add(q)
            last = math.log(q)
    return out


def _svg(fig: Any) -> str:
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "specload"}):
        fig.savefig(buf, format="svg")
    return buf.getvalue()


PALETTE = LINES


def _colors(report: Report) -> dict[str, str]:
    labels = [i.label for i in report.comparison.conditions]
    labels.sort(key=lambda lab: lab != report.comparison.baseline)
    return {lab: PALETTE[i % len(PALETTE)] for i, lab in enumerate(labels)}


def _mark_crossover(ax: Any, report: Report, family: str, colors: dict[str, str]) -> None:
    c = report.comparison
    wanted = c.metric if c.metric.rpartition("_")[0] == family else f"{family}_p50"
    marked = [x for x in c.crossovers if x.metric == wanted and x.qps is not None]
    if marked:
        # headroom above the data for the labels, so they never overprint a curve
        y0, y1 = ax.get_ylim()
        ax.set_ylim(y0, y0 + (y1 - y0) / (0.95 - 0.09 * len(marked)))
    for i, x in enumerate(marked):
        col = colors[x.condition]
        ax.axvline(x.qps, color=col, linestyle=":", linewidth=1.2)
        label = f"{x.condition}\n≈{x.qps:.3g} req/s"
        if x.replicates_agree:
            lo = x.ci[0] if x.ci[0] is not None else x.tested_range[x.ci_beyond[0] == "above"]
            hi = x.ci[1] if x.ci[1] is not None else x.tested_range[x.ci_beyond[1] == "above"]
            ax.axvspan(lo, hi, color=col, alpha=0.08)
        else:  # the verdict claims no boundary here: neither does the figure's band
            label = f"{x.condition}: starts\ndisagree (≈{x.qps:.3g}?)"
        ax.annotate(
            label,
            (x.qps, 0.98 - 0.09 * i),  # staggered: close crossovers must not overprint
            xycoords=("data", "axes fraction"),
            ha="center",
            va="top",
            fontsize=8,
            color=col,
        )


def _latency(report: Report, family: str, colors: dict[str, str]) -> Plot:
    fig, ax = _fig()
    for label, steps in report.comparison.steps.items():
        for tag, style in (("p50", "-"), ("p95", "--")):
            name = f"{family}_{tag}"
            pts = [
                (s.target_qps, s.latency[name]) for s in steps if s.latency[name].value is not None
            ]
            if not pts:
                continue
            q = [p[0] for p in pts]
            bands = [_band(p[1], 1000.0) for p in pts]
            ax.plot(
                q,
                [b[0] for b in bands],
                style,
                marker="o",
                ms=3,
                color=colors[label],
                label=f"{label} {tag}",
            )
            ax.fill_between(
                q,
                [b[1] for b in bands],
                [b[2] for b in bands],
                color=colors[label],
                alpha=0.15,
            )
    _mark_crossover(ax, report, family, colors)
    name = family.upper()
    _log_qps_axis(ax, report)
    ax.set(ylabel=f"{name} (ms)", title=f"{name} p50 / p95 vs load (95 % CI)")
    ax.legend(fontsize=8, ncols=2)
    return Plot(family, f"{name} vs load", _svg(fig))


def _ratio(report: Report, colors: dict[str, str]) -> Plot | None:
    c = report.comparison
    if not c.ratios:
        return None
    fig, ax = _fig()
    for label, rows in c.ratios.items():
        pts = [r for r in rows[c.metric] if r.ratio.value is not None]
        q = [r.target_qps for r in pts]
        bands = [_band(r.ratio) for r in pts]
        v = [b[0] for b in bands]
        err = [[max(b[0] - b[1], 0.0) for b in bands], [max(b[2] - b[0], 0.0) for b in bands]]
        ax.errorbar(q, v, yerr=err, marker="o", ms=3, capsize=3, color=colors[label], label=label)
    ax.axhline(1.0, color=NEUTRAL, linewidth=1)
    if c.min_gain:  # at 0 it would lie on the 1.0 line
        ax.axhline(
            1.0 - c.min_gain,
            color=HELPS,
            linestyle="--",
            linewidth=1,
            label=f"{c.min_gain:.0%} lower (helps below, CI permitting)",
        )
    _mark_crossover(ax, report, c.metric.rpartition("_")[0], colors)
    _log_qps_axis(ax, report)
    ax.set(
        ylabel=f"{metric_label(c.metric)} / baseline",
        title=f"{metric_label(c.metric)} relative to {c.baseline} (95 % CI)",
    )
    ax.legend(fontsize=8)
    return Plot("ratio", "Change vs baseline", _svg(fig))


def _class_ratio(report: Report) -> Plot | None:
    """The p50 ratio per class and condition vs load: where drafting pays, per content."""
    c = report.comparison
    if not c.classes:
        return None
    fig, ax = _fig()
    styles = ["-", "--", ":", "-."]
    for i, a in enumerate(c.classes):
        for j, (label, rows) in enumerate(a.ratios.items()):
            pts = [r for r in rows.get(c.metric, []) if r.ratio.value is not None]
            if not pts:
                continue
            name = a.name if len(a.ratios) == 1 else f"{a.name} ({label})"
            ax.plot(
                [r.target_qps for r in pts],
                [r.ratio.value for r in pts],
                marker="o",
                ms=3,
                color=PALETTE[(i + 1) % len(PALETTE)],  # the baseline's grey is not a class
                linestyle=styles[j % len(styles)],
                label=name,
            )
    ax.axhline(1.0, color=NEUTRAL, linewidth=1)
    _log_qps_axis(ax, report)
    ax.set(
        ylabel=f"{metric_label(c.metric)} / baseline",
        title=f"{metric_label(c.metric)} relative to {c.baseline}, per class",
    )
    ax.legend(fontsize=8)
    return Plot("class_ratio", "Change vs baseline per class", _svg(fig))


def _from_zero(ax: Any, top_at_least: float | None = None) -> None:
    """y axis from 0 (counts, rates and fractions never go below it; a zoomed axis that
    starts at 0.444 makes a 1-point wobble look like a cliff), up to ``top_at_least``."""
    _lo, hi = ax.get_ylim()
    top = max(hi, top_at_least or 0.0)
    ax.set_ylim(0.0, top if top > 0 else 1.0)


def _simple(
    report: Report,
    key: str,
    title: str,
    ylabel: str,
    get: Any,
    colors: dict[str, str],
    diagonal: bool = False,
    top_at_least: float | None = None,
) -> Plot | None:
    fig, ax = _fig()
    drawn = False
    for label, steps in report.comparison.steps.items():
        pts = [(s.target_qps, get(s)) for s in steps if get(s) is not None]
        if pts:
            drawn = True
            ax.plot(
                [p[0] for p in pts],
                [p[1] for p in pts],
                marker="o",
                ms=3,
                color=colors[label],
                label=label,
            )
    if not drawn:
        return None
    if diagonal:
        qs = sorted({s.target_qps for steps in report.comparison.steps.values() for s in steps})
        ax.plot(qs, qs, color="#aaaaaa", linestyle=":", label="target")
    _log_qps_axis(ax, report)
    _from_zero(ax, top_at_least)
    ax.set(ylabel=ylabel, title=title)
    ax.legend(fontsize=8)
    return Plot(key, title, _svg(fig))


def _decode_step(report: Report, colors: dict[str, str]) -> Plot | None:
    """Decode step time per condition: client p50 chunk gap (solid), server ITL mean (dashed)."""
    fig, ax = _fig()
    drawn = False
    for label, steps in report.comparison.decode.items():
        gaps = [(d.target_qps, d.chunk_gap_s * 1000) for d in steps if d.chunk_gap_s]
        if not gaps:
            continue
        drawn = True
        tpc = [d.tokens_per_chunk for d in steps if d.tokens_per_chunk]
        per = f", {sorted(tpc)[len(tpc) // 2]:.2g} tok/chunk" if tpc else ""
        ax.plot(
            [g[0] for g in gaps],
            [g[1] for g in gaps],
            marker="o",
            ms=3,
            color=colors[label],
            label=f"{label} client chunk gap p50{per}",
        )
        itl = [(d.target_qps, d.server_itl_mean_s * 1000) for d in steps if d.server_itl_mean_s]
        if itl:
            ax.plot(
                [g[0] for g in itl],
                [g[1] for g in itl],
                "--",
                marker="s",
                ms=3,
                mfc="none",
                color=colors[label],
                label=f"{label} server ITL mean",
            )
    if not drawn:
        return None
    _log_qps_axis(ax, report)
    _from_zero(ax)
    title = "Decode step time vs load"
    ax.set(ylabel="ms per engine step (chunk)", title=title)
    ax.legend(fontsize=8)
    return Plot("decode-step", title, _svg(fig))


def _goodput(report: Report, colors: dict[str, str]) -> Plot | None:
    """Goodput vs load per condition, the offered load as a diagonal, each condition's SLO
    capacity as a dotted line with its CI as a band (``analysis.decisions.capacity``)."""
    c = report.comparison
    if not c.goodput:
        return None
    fig, ax = _fig()
    for label, per_qps in c.goodput.items():
        pts = sorted((q, g) for q, g in per_qps.items() if g is not None)
        if pts:
            ax.plot(
                [p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3,
                color=colors[label], label=f"{label} goodput",
            )  # fmt: skip
    qs = sorted({q for per in c.goodput.values() for q in per})
    ax.plot(qs, qs, color="#aaaaaa", linestyle=":", label="offered load")
    _log_qps_axis(ax, report)
    _from_zero(ax)
    for i, (label, cap) in enumerate(c.capacity.items()):
        if cap.qps is None:
            continue
        col = colors[label]
        ax.axvline(cap.qps, color=col, linestyle=":", linewidth=1.2)
        lo, hi = cap.boundary.ci
        if lo is not None and hi is not None:
            ax.axvspan(lo, hi, color=col, alpha=0.08)
        ax.annotate(
            f"{label} capacity\n≈{cap.qps:.3g} req/s", (cap.qps, 0.98 - 0.12 * i),
            xycoords=("data", "axes fraction"), ha="center", va="top", fontsize=8, color=col,
        )  # fmt: skip
    slos = ", ".join(s.text() for s in c.slos)
    title = "Goodput vs load (requests meeting every SLO)"
    ax.set(ylabel="req/s within the SLO", title=title)
    ax.text(0.01, 0.01, slos, transform=ax.transAxes, fontsize=7, color="#555555")
    ax.legend(fontsize=8, loc="center left")
    return Plot("goodput", title, _svg(fig))


def _measured_x(regime: Regime) -> tuple[list[float], list[float]]:
    """x of each second: measured seconds with the step's executions (run dirs, repeats,
    blocks) put back to back, 2 s apart; and where each execution after the first starts."""
    s = regime.series
    x: list[float] = []
    starts: list[float] = []
    offset = 0.0
    for e in sorted(set(s.execution.tolist())):
        t = s.t[s.execution == e]
        if x:
            starts.append(offset - 1.0)
        x += (t - t[0] + offset).tolist()
        offset += float(t[-1] - t[0]) + 2.0
    return x, starts


def _slow_spans(x: list[float], slow: list[bool]) -> list[tuple[float, float]]:
    """Runs of consecutive slow seconds as [first, last + 1) spans."""
    spans: list[tuple[float, float]] = []
    for xi, is_slow in zip(x, slow, strict=True):
        if not is_slow:
            continue
        if spans and xi - spans[-1][1] < 0.5:
            spans[-1] = (spans[-1][0], xi + 1.0)
        else:
            spans.append((xi, xi + 1.0))
    return spans


def _regime_axes(ax: Any, step: StepKey, report: Report, colors: dict[str, str]) -> None:
    """One step: each condition's per-second median engine step, its slow seconds marked."""
    heads = []
    for label, steps in report.comparison.regimes.by_condition.items():
        r = steps.get(step)
        if r is None or not r.seconds:
            continue
        x, starts = _measured_x(r)
        col, slow = colors[label], r.slow.tolist()
        ax.plot(x, r.series.ms, color=col, linewidth=0.9, label=label)
        for xs in starts:
            ax.axvline(xs, color="#aaaaaa", linestyle=":", linewidth=0.8)
        if not r.bimodal:
            continue
        heads.append(f"{label} {r.slow_share * 100:.0f} % slow")
        ax.scatter([xi for xi, sl in zip(x, slow, strict=True) if sl],
                   [m for m, sl in zip(r.series.ms, slow, strict=True) if sl],
                   s=9, color=col, zorder=3)  # fmt: skip
        for lo, hi in _slow_spans(x, slow):
            ax.axvspan(lo, hi, color=col, alpha=0.10, linewidth=0)
        ax.axhline(r.threshold_ms, color=col, linestyle=":", linewidth=0.8)
    ax.set_title(f"{regime_step(step)}: " + ", ".join(heads), fontsize=9)
    _from_zero(ax)


def regime_plot(report: Report) -> Plot | None:
    """Small multiples, one per step where a condition's engine step has two regimes: each
    condition's per-second median engine step over its measured seconds; slow seconds dotted
    and shaded in the condition's colour, the slow threshold as a dotted line. None without
    a bimodal step."""
    from matplotlib.figure import Figure

    regimes = report.comparison.regimes
    steps = list(dict.fromkeys(r.key for r in regimes.bimodal()))
    if not steps:
        return None
    cols = 1 if len(steps) == 1 else 2
    rows = -(-len(steps) // cols)
    height = 0.45 + 2.3 * rows
    fig = Figure(figsize=(7.2 if cols == 1 else 10.8, height), dpi=100)
    axes = fig.subplots(rows, cols, squeeze=False)
    colors = _colors(report)
    for ax, step in zip(axes.flat, steps, strict=False):
        _regime_axes(ax, step, report, colors)
    for ax in list(axes.flat)[len(steps) :]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("ms per engine step", fontsize=8)
    for i in range(len(steps)):
        if i + cols >= len(steps):  # no panel drawn below this one
            axes.flat[i].set_xlabel("measured seconds", fontsize=8)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="upper right", ncols=len(labels), frameon=False)
    title = "Engine step over time: per-second median chunk gap (slow seconds shaded)"
    fig.suptitle(title, fontsize=10, x=0.01, y=1 - 0.08 / height, ha="left", va="top")
    fig.tight_layout()  # leaves the suptitle its line; the legend shares it
    return Plot("regimes", title, _svg(fig))


def render_plots(report: Report) -> list[Plot]:
    """Every figure that has data, in reading order."""
    colors = _colors(report)
    plots: list[Plot | None] = [
        _ratio(report, colors),
        _class_ratio(report),
        _goodput(report, colors),
        _latency(report, "tpot", colors),
        _latency(report, "ttft", colors),
        _latency(report, "e2e", colors),
        _decode_step(report, colors),
        _simple(
            report,
            "acceptance",
            "Draft acceptance rate vs load (server /metrics)",
            "accepted / drafted",
            lambda s: s.server.acceptance_rate if s.server else None,
            colors,
            top_at_least=1.0,
        ),
        _simple(
            report,
            "running",
            "Running batch size vs load (max of vllm:num_requests_running)",
            "requests",
            lambda s: s.server.running_max if s.server else None,
            colors,
        ),
        _simple(
            report,
            "kv",
            "KV cache usage vs load (max)",
            "fraction",
            lambda s: s.server.kv_usage_max if s.server else None,
            colors,
            top_at_least=1.0,
        ),
        _simple(
            report,
            "achieved",
            "Achieved vs target load",
            "achieved (req/s)",
            lambda s: s.achieved_qps,
            colors,
            diagonal=True,
        ),
        _simple(
            report,
            "errors",
            "Error rate vs load",
            "failed / sent",
            lambda s: s.error_rate,
            colors,
            top_at_least=0.05,
        ),
    ]
    return [p for p in plots if p is not None]

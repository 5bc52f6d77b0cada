"""The dynamic-schedule part of a report, as tables and lines for every renderer.

Three things: each crossover also in running-batch terms (``vllm:num_requests_running``),
the proposed ``--speculative-config`` with ``num_speculative_tokens_per_batch_size`` for each
fixed-k speculative condition (one line to paste), and, for a condition that ran a schedule,
the "best of both" check per step against min(baseline, static spec) with its plain verdict.
"""

from __future__ import annotations

from specload.analysis.decisions.class_split import class_split
from specload.analysis.schedules.schedule_results import ScheduleAnalysis
from specload.report.model import Report
from specload.report.schedule_words import (
    best_of_both_verdict,
    proposal_error_text,
    proposal_note_text,
)
from specload.report.tables import DASH, Table, fmt_change, fmt_ms, step_name
from specload.report.verdict_words import status_words_plain
from specload.report.wording import metric_label

__all__ = [
    "batch_table",
    "best_of_both_tables",
    "best_of_both_verdicts",
    "proposal_lines",
    "schedules_of",
]


def schedules_of(report: Report) -> ScheduleAnalysis:
    """The comparison's schedule analysis (empty when compare did not compute one)."""
    return report.comparison.schedules or ScheduleAnalysis()


def _batch(v: float | None) -> str:
    return DASH if v is None else f"{v:.1f}"


def batch_table(report: Report) -> Table | None:
    """Crossovers in running-batch terms; None when no condition crosses."""
    rows = []
    for b in schedules_of(report).batch_crossovers:
        if b.running is None:
            continue
        lo, hi = b.running_ci
        rows.append(
            [
                b.condition,
                metric_label(b.metric),
                DASH if b.qps is None else f"{b.qps:.3g}",
                _batch(b.running),
                f"{_batch(lo)}–{_batch(hi)}",
                {"server": "vllm:num_requests_running", "client": "client (Little's law)"}.get(
                    b.source, DASH
                ),
            ]
        )
    if not rows:
        return None
    return Table(
        "Crossover as a running batch",
        ["condition", "metric", "crossover req/s", "running requests", "95 % CI", "from"],
        rows,
        "Running requests at the crossover load: the per-step maximum of "
        "vllm:num_requests_running, interpolated in log-QPS (a CI bound beyond the tested "
        "range shows as —).",
    )


def proposal_lines(report: Report) -> list[tuple[str, str]]:
    """(explanation, flag to paste) per proposal; the flag is "" when none could be made."""
    out = []
    c = report.comparison
    for p in schedules_of(report).proposals:
        if class_split(p.condition, c.baseline, c.classes, c.metric) is not None:
            # one schedule for the mixed traffic would turn drafting down for the classes
            # that gain (the verdict routes them instead)
            out.append((f"{p.condition}: no schedule proposed: its classes disagree", ""))
            continue
        if p.errors:
            why = "; ".join(proposal_error_text(e) for e in p.errors)
            out.append((f"{p.condition}: no schedule proposed: " + why, ""))
            continue
        where = {
            "crosses": (
                f"{metric_label(p.metric)} stops improving at ≈ {p.batch.running:.1f} running "
                f"requests ({p.batch.qps:.3g} req/s)"
                if p.batch.running is not None and p.batch.qps is not None
                else "crosses"
            ),
        }.get(p.status, status_words_plain(p.status))
        text = f"{p.condition}: {where}; proposed schedule {p.ranges}"
        if p.notes:
            text += " (" + "; ".join(proposal_note_text(n) for n in p.notes) + ")"
        out.append((text, p.flag()))
    return out


def best_of_both_verdicts(report: Report) -> list[str]:
    return [best_of_both_verdict(b) for b in schedules_of(report).best_of_both]


def _num(v: float | None) -> str:
    return DASH if v is None else f"{v:.0f}"


def best_of_both_tables(report: Report) -> list[Table]:
    """One table per dynamic condition: per step, dynamic vs min(baseline, static spec)."""
    out = []
    for b in schedules_of(report).best_of_both:
        label = metric_label(b.metric)
        rows = [
            [
                step_name(report, b.condition, r.target_qps),
                fmt_ms(r.dynamic.value, 2),
                fmt_ms(r.best.value, 2),
                r.best_of or DASH,
                fmt_change(r.ratio),
                r.verdict,
                _num(r.running_dynamic),
                _num(r.drafts_dynamic),
                _num(r.drafts_static),
            ]
            for r in b.rows
        ]
        out.append(
            Table(
                f"Best of both: {b.condition} vs min({b.baseline}, {b.static}) on {label}",
                [
                    "QPS",
                    f"{label} ms",
                    "best fixed ms",
                    "best fixed",
                    "change (95 % CI)",
                    "verdict",
                    "running max",
                    "drafts",
                    "drafts static",
                ],
                rows,
                f"Schedule {b.schedule}. {best_of_both_verdict(b)}.",
            )
        )
    return out

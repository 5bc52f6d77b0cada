"""Self-contained HTML report: one file, plots inline as SVG data URIs, no scripts, no fetches.

It opens from a CI artifact or an e-mail attachment with nothing else around it. Same
sections as the Markdown report (tables come from ``report.tables``) with the figures from
``report.plots`` between the verdict and the details.

The page is a Jinja2 template (``templates/report.html.j2``, autoescaped: every figure, label
and note is text, never markup) with its style sheet in ``templates/report.css``, inlined so
the file stays self-contained. This module only decides what goes on the page: a list of
blocks (a table, a heading, a note, the plots, output samples) in reading order.
"""

from __future__ import annotations

import base64
import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any

from specload.analysis.class_split import class_split
from specload.analysis.comparison import Comparison
from specload.analysis.effect import HURTS
from specload.analysis.regimes import RULE as REGIME_RULE
from specload.analysis.samples import diff_segments
from specload.report.class_tables import class_capacity_table
from specload.report.model import Report
from specload.report.palette import css_variables
from specload.report.plots import regime_plot, render_plots
from specload.report.schedule_tables import (
    batch_table,
    best_of_both_tables,
    best_of_both_verdicts,
    proposal_lines,
)
from specload.report.tables import (
    Table,
    attribution_table,
    capacity_table,
    class_table,
    closed_loop_table,
    contract_table,
    crossover_table,
    decode_step_table,
    gate_table,
    lookup_table,
    ratio_table,
    rule_note,
    run_table,
    server_table,
    step_table,
)

__all__ = ["render_html"]

#: A cell longer than this wraps (a speculative config, error kinds): tables fit the page.
_LONG_CELL = 32


@dataclass(frozen=True, slots=True)
class _Cell:
    text: str
    classes: str


@dataclass(frozen=True, slots=True)
class _HtmlTable:
    title: str
    headers: list[str]
    rows: list[list[_Cell]]
    note: str


Block = dict[str, Any]


@functools.cache
def _template() -> Any:
    from jinja2 import Environment, select_autoescape

    env = Environment(
        autoescape=select_autoescape(default=True, default_for_string=True),
        keep_trailing_newline=True,
    )
    return env.from_string(_resource("report.html.j2"))


def _resource(name: str) -> str:
    return (resources.files("specload.report") / "templates" / name).read_text(encoding="utf-8")


def _cells(t: Table) -> list[list[_Cell]]:
    """Each cell with its classes: ``long`` (it wraps) and its effect (helps / hurts / ...)."""
    out = []
    for i, row in enumerate(t.rows):
        effects = t.effects[i] if i < len(t.effects) else [""] * len(row)
        out.append(
            [
                _Cell(c, " ".join(x for x in ("long" if len(c) > _LONG_CELL else "", e) if x))
                for c, e in zip(row, effects, strict=False)
            ]
        )
    return out


def _table(t: Table, heading: str = "h3") -> Block:
    """A table block; ``heading`` "h2" for a table that is a section of its own."""
    return {
        "kind": "table",
        "heading": heading,
        "table": _HtmlTable(t.title, t.headers, _cells(t), t.note),
    }


def _schedule_blocks(report: Report) -> list[Block]:
    """Dynamic schedules: crossover as a running batch, schedule proposals to paste, best of both."""
    batch = batch_table(report)
    proposals = proposal_lines(report)
    checks = best_of_both_tables(report)
    if not (batch or proposals or checks):
        return []
    blocks: list[Block] = [{"kind": "h2", "text": "Dynamic speculation schedule"}]
    if batch:
        blocks.append(_table(batch))
    for text, flag in proposals:
        blocks.append({"kind": "text", "text": text})
        if flag:
            blocks.append({"kind": "pre", "text": flag})
    return blocks + [_table(t) for t in checks]


def _regime_blocks(report: Report) -> list[Block]:
    """Regimes: one sentence per step whose engine step flips, the rule, the time plot."""
    lines = report.comparison.regimes.sentences()
    if not lines:
        return []
    blocks: list[Block] = [{"kind": "h2", "text": "Regimes"}]
    blocks += [{"kind": "text", "text": line} for line in lines]
    blocks.append({"kind": "note", "text": REGIME_RULE})
    plot = regime_plot(report)
    if plot is not None:
        data = base64.b64encode(plot.svg.encode()).decode()
        blocks.append({"kind": "figure", "key": plot.key, "title": plot.title, "data": data})
    return blocks


def _blocks(report: Report) -> list[Block]:
    c = report.comparison
    blocks: list[Block] = []
    gates = gate_table(report)
    if gates:
        blocks.append(_table(gates))
    if c.crossovers:
        blocks.append(_table(crossover_table(report)))
    if capacity := capacity_table(report):
        blocks.append(_table(capacity))
    if closed := closed_loop_table(report):
        blocks.append(_table(closed))
    if classes := class_table(report):
        blocks.append(_table(classes))
        if class_capacity := class_capacity_table(report):
            blocks.append(_table(class_capacity))
        blocks += [
            {"kind": "note", "text": f"{a.name}: {v}"}
            for a in c.classes
            for v in a.verdicts.values()
        ]
    plots = [
        {"key": p.key, "title": p.title, "data": base64.b64encode(p.svg.encode()).decode()}
        for p in render_plots(report)
    ]
    blocks.append({"kind": "plots", "plots": plots})
    blocks += _schedule_blocks(report)
    blocks.append({"kind": "h2", "text": "Change against the baseline"})
    blocks += [_table(ratio_table(report, label)) for label in c.ratios]
    blocks += _regime_blocks(report)
    att = attribution_table(report)
    if att and c.attribution is not None:
        blocks.append(_table(att, "h2"))
        blocks += [{"kind": "note", "text": s} for s in c.attribution.summary]
    if c.contract:
        blocks.append(_table(contract_table(report), "h2"))
    blocks += _sample_blocks(report)
    blocks.append({"kind": "h2", "text": "Per step"})
    blocks += [_table(step_table(report, label)) for label in c.steps]
    optional = (server_table(report), decode_step_table(report), lookup_table(report))
    blocks += [_table(t) for t in optional if t]
    blocks.append(_table(run_table(report), "h2"))
    return blocks + [{"kind": "note", "text": n} for n in c.notes]


def verdict_tone(c: Comparison, label: str) -> str:
    """The verdict's colour, from the effect alone: ``helps`` (green) where the condition
    helps at some tested load and nothing is undecided, ``hurts`` (red) where it only hurts,
    else ``neutral`` (no decision, no significant change, classes that disagree). A green
    bar beside "no decision" or "worse" said the opposite of its sentence."""
    x = c.crossover(label, c.metric)
    if x is None or not x.replicates_agree:
        return "neutral"
    if class_split(label, c.baseline, c.classes, c.metric) is not None:
        return "neutral"
    if x.helping:
        return "helps"
    rows = c.ratios.get(label, {}).get(c.metric, [])
    return "hurts" if any(r.effect == HURTS for r in rows) else "neutral"


def render_html(report: Report) -> str:
    c = report.comparison
    return str(
        _template().render(
            css=css_variables() + _resource("report.css"),
            title=report.title,
            baseline=c.baseline,
            bootstrap=c.bootstrap,
            version=report.specload_version,
            generated_at=report.generated_at,
            verdicts=[(verdict_tone(c, label), v) for label, v in c.verdicts.items()],
            best_of_both_verdicts=best_of_both_verdicts(report),
            rule=rule_note(report),
            findings=report.first_findings,
            more_findings=report.more_findings,
            advice=[a.text for a in report.advice],
            blocks=_blocks(report),
        )
    )


def _diff_words(a: str, b: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Both texts as word segments, those that differ marked ``del`` (left) / ``ins`` (right)."""
    left: list[tuple[str, str]] = []
    right: list[tuple[str, str]] = []
    for op, x, y in diff_segments(a, b):
        if op == "equal":
            left.append(("", x))
            right.append(("", y))
            continue
        if x:
            left.append(("del", x))
        if y:
            right.append(("ins", y))
    return left, right


def _sample_blocks(report: Report) -> list[Block]:
    """Side-by-side outputs for the same prompts (runs made with ``--store-text``)."""
    blocks: list[Block] = []
    for label, samples in report.comparison.samples.items():
        rows = []
        for s in samples:
            left, right = _diff_words(s.baseline_text, s.condition_text)
            same = "identical" if s.identical else "differs"
            rows.append({"prompt_tail": s.prompt_tail, "left": left, "right": right, "same": same})
        blocks.append({"kind": "samples", "label": label, "rows": rows})
    return blocks

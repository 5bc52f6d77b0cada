"""Self-contained HTML report: one file, plots inline as SVG data URIs, no scripts, no fetches.

It opens from a CI artifact or an e-mail attachment with nothing else around it. The
sections are ``report.sections``' (the Markdown report's), with the figures from
``report.plots`` drawn where the sections put them.

The page is a Jinja2 template (``templates/report.html.j2``, autoescaped: every figure, label
and note is text, never markup) with its style sheet in ``templates/report.css``, inlined so
the file stays self-contained. This module only turns the sections into the template's
blocks (a table, a heading, a note, the plots, output samples).
"""

from __future__ import annotations

import base64
import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any

from specload.analysis.comparison import Comparison
from specload.analysis.decisions.class_split import class_split
from specload.analysis.diagnostics.samples import diff_segments
from specload.analysis.statistics.effect import HURTS
from specload.report.model import Report
from specload.report.palette import css_variables
from specload.report.plots import Plot, regime_plot, render_plots
from specload.report.schedule_tables import best_of_both_verdicts
from specload.report.sections import Part, sections
from specload.report.tables import Table, rule_note

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


def _blocks(report: Report) -> list[Block]:
    """``report.sections`` as the template's blocks, in their order."""
    blocks: list[Block] = []
    for section in sections(report):
        if section.heading:
            blocks.append({"kind": "h2", "text": section.heading})
        blocks += [b for p in section.parts for b in _part_blocks(report, p)]
    return blocks


def _part_blocks(report: Report, p: Part) -> list[Block]:
    if p.kind == "table" and p.table is not None:
        return [_table(p.table, "h2" if p.own_section else "h3")]
    if p.kind == "flag":
        return [{"kind": "pre", "text": p.text}]
    if p.kind in ("text", "note"):
        return [{"kind": p.kind, "text": f"{p.subject}: {p.text}" if p.subject else p.text}]
    if p.kind == "plots":
        return [{"kind": "plots", "plots": [_figure(x) for x in render_plots(report)]}]
    if p.kind == "regime_plot":
        plot = regime_plot(report)
        return [] if plot is None else [{"kind": "figure", **_figure(plot)}]
    return _sample_blocks(report, p.text)


def _figure(plot: Plot) -> dict[str, str]:
    """A plot as the template draws it: an SVG inlined as a data URI."""
    return {
        "key": plot.key,
        "title": plot.title,
        "data": base64.b64encode(plot.svg.encode()).decode(),
    }


def verdict_tone(c: Comparison, label: str) -> str:
    """The verdict's colour, from the effect alone: ``helps`` (green) where the condition
    helps at some tested load and nothing is undecided, ``hurts`` (red) where it only hurts,
    else ``neutral`` (no decision, undecided steps, the same, classes that disagree). A green
    bar beside "no decision" or "worse" said the opposite of its sentence."""
    x = c.crossover(label, c.metric)
    if x is None or not x.replicates_agree or not x.settled:
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
            verdicts=[(verdict_tone(c, label), v) for label, v in report.verdicts.items()],
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


def _sample_blocks(report: Report, label: str) -> list[Block]:
    """Side-by-side outputs for the same prompts (runs made with ``--store-text``)."""
    rows = []
    for x in report.comparison.samples.get(label, []):
        left, right = _diff_words(x.baseline_text, x.condition_text)
        same = "identical" if x.identical else "differs"
        rows.append({"prompt_tail": x.prompt_tail, "left": left, "right": right, "same": same})
    return [{"kind": "samples", "label": label, "rows": rows}]

"""The report's sections in reading order, listed once for every renderer.

One list, so that ``html.py`` and ``markdown.py`` show the same sections under the same
headings and a new table is added once. Here is what the report says and in what order; a
renderer only decides how each part looks (Markdown has no pictures: it leaves the plots out
and points at report.html for the output samples).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from specload.report.attribution_words import attribution_lines
from specload.report.class_tables import class_capacity_table
from specload.report.compare_words import comparison_notes
from specload.report.model import Report
from specload.report.regime_words import RULE as REGIME_RULE
from specload.report.regime_words import regime_sentences
from specload.report.schedule_tables import batch_table, best_of_both_tables, proposal_lines
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
    run_table,
    server_table,
    step_table,
)

__all__ = ["Part", "Section", "sections"]

#: ``table``; ``text`` (a sentence of its own), ``note`` (a rule or a remark), ``flag`` (a
#: command-line flag to paste); ``plots``, ``regime_plot`` and ``samples`` are drawn by the
#: renderers that can (``label`` names the condition of a ``samples`` part).
PartKind = Literal["table", "text", "note", "flag", "plots", "regime_plot", "samples"]


@dataclass(frozen=True, slots=True)
class Part:
    kind: PartKind
    table: Table | None = None
    text: str = ""
    #: a table that is a section of its own (its title is the section's heading)
    own_section: bool = False
    #: what a ``text`` line is about (a class of requests), written before it as a name
    subject: str = ""


@dataclass(frozen=True, slots=True)
class Section:
    """``heading`` None: the parts head themselves (tables carry their titles). ``folded``:
    the details a reader opens on demand (Markdown folds them into one ``<details>``)."""

    heading: str | None
    parts: list[Part] = field(default_factory=list)
    folded: bool = False


def _tables(*tables: Table | None, own: bool = False) -> list[Part]:
    return [Part("table", t, own_section=own) for t in tables if t]


def _findings(report: Report) -> Section:
    """Gates, crossover, capacity, closed loop, the classes: what the verdict rests on."""
    c = report.comparison
    parts = _tables(gate_table(report), crossover_table(report) if c.crossovers else None)
    parts += _tables(capacity_table(report), closed_loop_table(report))
    if classes := class_table(report):
        parts += _tables(classes, class_capacity_table(report))
        parts += [
            Part("text", text=v, subject=a.name)
            for a in c.classes
            for v in report.class_verdicts[a.name].values()
        ]
    return Section(None, parts)


def _schedule(report: Report) -> Section:
    """Dynamic schedules: crossover as a running batch, proposals to paste, best of both."""
    parts = _tables(batch_table(report))
    for text, flag in proposal_lines(report):
        parts.append(Part("text", text=text))
        if flag:
            parts.append(Part("flag", text=flag))
    parts += _tables(*best_of_both_tables(report))
    return Section("Dynamic speculation schedule", parts)


def _regimes(report: Report) -> Section:
    """Steps whose engine step flips between a fast and a slow regime, the rule, the plot."""
    lines = regime_sentences(report.comparison.regimes)
    if not lines:
        return Section("Regimes")
    parts = [Part("text", text=line) for line in lines]
    return Section("Regimes", [*parts, Part("note", text=REGIME_RULE), Part("regime_plot")])


def _attribution_and_contract(report: Report) -> Section:
    c = report.comparison
    parts = []
    if (att := attribution_table(report)) and c.attribution is not None:
        parts += _tables(att, own=True) + [
            Part("note", text=s) for s in attribution_lines(c.attribution)
        ]
    if c.contract:
        parts += _tables(contract_table(report), own=True)
    parts += [Part("samples", text=label) for label in c.samples]
    return Section(None, parts)


def sections(report: Report) -> list[Section]:
    """Every section with something to show, in reading order."""
    c = report.comparison
    ratios = _tables(*(ratio_table(report, label) for label in c.ratios))
    steps = _tables(*(step_table(report, label) for label in c.steps))
    steps += _tables(server_table(report), decode_step_table(report), lookup_table(report))
    runs = _tables(run_table(report), own=True) + [
        Part("note", text=n) for n in comparison_notes(c)
    ]
    out = [
        _findings(report),
        Section(None, [Part("plots")]),
        _schedule(report),
        Section("Change against the baseline", ratios),
        _regimes(report),
        _attribution_and_contract(report),
        Section("Per step", steps, folded=True),
        Section(None, runs, folded=True),
    ]
    return [s for s in out if s.parts]

"""Terminal summary with rich: the verdict first, then compact tables a person can scan.

The full tables are in report.md / report.html; the terminal shows the crossover, the change
per step against the baseline and a narrow per-step view, so it fits an 120-column window.
"""

from __future__ import annotations

from typing import IO, Any

from specload.report.class_tables import class_capacity_table
from specload.report.model import Report
from specload.report.palette import TERMINAL
from specload.report.regime_words import regime_sentences
from specload.report.schedule_tables import batch_table, best_of_both_tables
from specload.report.tables import (
    Table,
    capacity_table,
    class_table,
    closed_loop_table,
    crossover_table,
    decode_step_table,
    gate_table,
    lookup_lines,
    ratio_table,
    rule_note,
    step_table,
)
from specload.report.verdict_words import verdict_lines

__all__ = ["render_terminal"]

_STEP_COLUMNS = (
    "QPS",
    "achieved",
    "n",
    "errors",
    "TTFT p50 ms",
    "TPOT p50 ms",
    "TPOT p95 ms",
    "E2E p95 ms",
    "out tok/s",
    "accept",
    "KV max",
)


def _narrow(t: Table, keep: tuple[str, ...]) -> Table:
    idx = [t.headers.index(h) for h in keep if h in t.headers]
    return Table(
        t.title,
        [t.headers[i] for i in idx],
        [[r[i] for i in idx] for r in t.rows],
        t.note,
        [[e[i] for i in idx] for e in t.effects],
    )


def _rich(t: Table) -> object:
    from rich.table import Table as RichTable
    from rich.text import Text

    rt = RichTable(
        title=Text(t.title),
        title_justify="left",
        caption=Text(t.note) if t.note else None,
        caption_justify="left",
    )
    for i, h in enumerate(t.headers):
        rt.add_column(Text(h), justify="right" if i else "left", overflow="fold")
    for i, row in enumerate(t.rows):
        effects = t.effects[i] if i < len(t.effects) else [""] * len(row)
        rt.add_row(
            *(Text(cell, style=_STYLE.get(e, "")) for cell, e in zip(row, effects, strict=False))
        )
    return rt


#: Cell colours by effect (the one rule): the same cells and colours as the HTML report.
_STYLE = TERMINAL


def _best_of_both(console: Any, report: Report) -> None:
    from rich.markup import escape

    from specload.report.schedule_tables import best_of_both_verdicts

    for sentence in best_of_both_verdicts(report):
        console.print(f"[bold magenta]▶[/bold magenta] {escape(sentence)}", soft_wrap=True)


def _proposals(console: Any, report: Report) -> None:
    """Schedule proposals; the flag to paste on its own line, never wrapped."""
    from rich.markup import escape

    from specload.report.schedule_tables import proposal_lines

    for text, flag in proposal_lines(report):
        console.print(f"[cyan]→[/cyan] {escape(text)}", soft_wrap=True)
        if flag:
            console.print(f"  {escape(flag)}", soft_wrap=True, overflow="ignore", crop=False)


def _regimes(console: Any, report: Report) -> None:
    """The regime section, after the tables: one line per step whose engine step flips."""
    from rich.markup import escape

    from specload.report.regime_words import RULE

    lines = regime_sentences(report.comparison.regimes)
    if not lines:
        return
    console.print("[bold]Regimes[/bold]")
    for line in lines:
        console.print(f"[magenta]~[/magenta] {escape(line)}", soft_wrap=True)
    console.print(f"[dim]{escape(RULE)} Plot in report.html.[/dim]", soft_wrap=True)


def _tables(report: Report) -> list[Table]:
    """The tables the terminal shows, in order; those without data left out."""
    c = report.comparison
    crossover = _narrow(crossover_table(report), _CROSSOVER_COLUMNS) if c.crossovers else None
    tables = [
        gate_table(report),
        crossover,
        capacity_table(report),
        class_table(report),
        class_capacity_table(report),
        closed_loop_table(report),
        batch_table(report),
    ]
    out = [t for t in tables if t]
    out += best_of_both_tables(report)
    out += [ratio_table(report, label) for label in c.ratios]
    out += [_narrow(step_table(report, label), _STEP_COLUMNS) for label in c.steps]
    decode = decode_step_table(report)
    return out + ([decode] if decode else [])


_CROSSOVER_COLUMNS = (
    "condition",
    "metric",
    "status",
    "starts helping",
    "stops helping",
    "tested",
    "left out",
    "server starts",
)


def render_terminal(report: Report, file: IO[str] | None = None, width: int | None = None) -> None:
    """Print the summary to ``file`` (stdout by default)."""
    from rich.console import Console
    from rich.markup import escape

    console = Console(file=file, width=width, highlight=False, soft_wrap=False)
    if width is None and not console.is_terminal:  # a CI log or a pipe: do not wrap at 80
        console = Console(file=file, width=140, highlight=False, soft_wrap=False)
    c = report.comparison
    console.print(f"[bold]{escape(report.title)}[/bold]")
    for sentence in verdict_lines(report.verdicts):
        console.print(f"[bold green]▶[/bold green] {escape(sentence)}", markup=True, soft_wrap=True)
    if c.ratios:
        console.print(f"[dim]{escape(rule_note(report))}[/dim]", soft_wrap=True)
    _best_of_both(console, report)
    for finding in report.first_findings:
        console.print(f"[yellow]![/yellow] {escape(finding)}", markup=True, soft_wrap=True)
    if report.more_findings:
        console.print(f"[yellow]![/yellow] … {len(report.more_findings)} more in report.md")
    for advice in report.advice:
        console.print(f"[cyan]→[/cyan] {escape(advice.text)}", markup=True, soft_wrap=True)
    _proposals(console, report)
    for t in _tables(report):
        console.print(_rich(t))
    _regimes(console, report)
    for line in lookup_lines(report):
        console.print(escape(line), soft_wrap=True)

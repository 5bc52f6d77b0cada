"""Markdown report, sized for a CI job summary (GitHub's ``$GITHUB_STEP_SUMMARY``).

Verdict first, then the crossover table, the per-step changes against the baseline, and the
details a reviewer may open: per-step figures, client vs server, attribution, the output
contract, the gates and the runs. Plots live in the HTML report.
"""

from __future__ import annotations

from specload.analysis.regimes import RULE as REGIME_RULE
from specload.report.class_tables import class_capacity_table
from specload.report.model import Report
from specload.report.schedule_tables import batch_table, best_of_both_verdicts
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

__all__ = ["render_markdown", "schedule_markdown", "table_markdown"]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


_MARK = {"helps": "▼ ", "hurts": "▲ "}


def _marked(text: str, effect: str) -> str:
    """A classified cell: ▼ helps, ▲ hurts (Markdown has no colour)."""
    return _MARK.get(effect, "") + _cell(text) if text else _cell(text)


def table_markdown(t: Table, level: int = 3) -> str:
    """One table as a GitHub-flavoured Markdown section."""
    lines = [f"{'#' * level} {t.title}", ""]
    if not t.rows:
        return "\n".join([*lines, "_no data_", ""])
    lines.append("| " + " | ".join(_cell(h) for h in t.headers) + " |")
    lines.append("|" + "|".join("---" for _ in t.headers) + "|")
    for i, row in enumerate(t.rows):
        effects = t.effects[i] if i < len(t.effects) else [""] * len(row)
        lines.append(
            "| " + " | ".join(_marked(c, e) for c, e in zip(row, effects, strict=False)) + " |"
        )
    if t.note:
        lines += ["", f"_{t.note}_"]
    return "\n".join([*lines, ""])


def schedule_markdown(report: Report) -> list[str]:
    """Dynamic schedules: batch-size schedule proposals (ready to paste) and best-of-both checks."""
    from specload.report.schedule_tables import best_of_both_tables, proposal_lines

    proposals = proposal_lines(report)
    tables = best_of_both_tables(report)
    if not proposals and not tables:
        return []
    out = ["### Dynamic speculation schedule", ""]
    for text, flag in proposals:
        out += [f"- {_cell(text)}"] + (["", "  ```", f"  {flag}", "  ```"] if flag else [])
    out.append("")
    return out + [table_markdown(t) for t in tables]


def _findings_markdown(report: Report) -> list[str]:
    """The first findings, then the rest folded in a ``<details>`` (GitHub renders it)."""
    out = []
    if report.findings:
        out += ["**Look at:**", ""] + [f"- {_cell(f)}" for f in report.first_findings] + [""]
    if more := report.more_findings:
        out += [f"<details><summary>{len(more)} more findings</summary>", ""]
        out += [f"- {_cell(f)}" for f in more] + ["", "</details>", ""]
    return out


def render_markdown(report: Report) -> str:
    c = report.comparison
    out = [f"## {report.title}", ""]
    out += [f"- **{s}**" for s in c.verdicts.values()] or [
        "_only one condition: nothing to compare_"
    ]
    out += [f"- **{s}**" for s in best_of_both_verdicts(report)]
    out += [
        "",
        (
            f"Baseline `{c.baseline}`; {rule_note(report)} ▼ marks a step that helps, ▲ one "
            f"that hurts. 95 % bootstrap CIs ({c.bootstrap} replicates); warm-up excluded."
        ),
        "",
    ]
    out += _findings_markdown(report)
    if report.advice:
        out += ["**Recommendations:**", ""] + [f"- {_cell(a.text)}" for a in report.advice] + [""]
    gates = gate_table(report)
    if gates:
        out.append(table_markdown(gates))
    if c.crossovers:
        out.append(table_markdown(crossover_table(report)))
    if capacity := capacity_table(report):
        out.append(table_markdown(capacity))
    if closed := closed_loop_table(report):
        out.append(table_markdown(closed))
    if classes := class_table(report):
        out.append(table_markdown(classes))
        if class_capacity := class_capacity_table(report):
            out.append(table_markdown(class_capacity))
        out += [f"- `{a.name}`: {v}" for a in c.classes for v in a.verdicts.values()] + [""]
    batch = batch_table(report)
    if batch:
        out.append(table_markdown(batch))
    out += schedule_markdown(report)
    out += [table_markdown(ratio_table(report, label)) for label in c.ratios]
    out += _regimes(report)
    att = attribution_table(report)
    if att:
        out.append(table_markdown(att))
    if c.contract:
        out.append(table_markdown(contract_table(report)))
    out += _details(report)
    out += ["", f"_specload {report.specload_version}, {report.generated_at}_", ""]
    return "\n".join(out)


def _regimes(report: Report) -> list[str]:
    """Steps whose engine step flips between a fast and a slow regime (plot in report.html)."""
    lines = report.comparison.regimes.sentences()
    if not lines:
        return []
    return ["### Regimes", "", *[f"- {_cell(line)}" for line in lines], "", f"_{REGIME_RULE}_", ""]


def _details(report: Report) -> list[str]:
    """The folded part: per-step figures, client vs server, decode step time, runs, notes."""
    c = report.comparison
    out = [
        "<details><summary>Per-step figures, client vs server, decode step time, runs</summary>",
        "",
    ]
    out += [table_markdown(step_table(report, label), 4) for label in c.steps]
    optional = (server_table(report), decode_step_table(report), lookup_table(report))
    out += [table_markdown(t, 4) for t in optional if t]
    out.append(table_markdown(run_table(report), 4))
    if c.notes:
        out += [f"- {n}" for n in c.notes] + [""]
    return out + ["</details>"]

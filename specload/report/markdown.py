"""Markdown report, sized for a CI job summary (GitHub's ``$GITHUB_STEP_SUMMARY``).

Verdict, findings and recommendations first, then ``report.sections`` in their order (the
HTML report's): the details a reviewer may open (per-step figures, client vs server, the
runs) folded in one ``<details>``. Plots and output samples live in the HTML report.
"""

from __future__ import annotations

from specload.report.model import Report
from specload.report.schedule_tables import best_of_both_verdicts
from specload.report.sections import Part, Section, sections
from specload.report.tables import Table, rule_note
from specload.report.verdict_words import NOTHING_TO_COMPARE

__all__ = ["render_markdown", "table_markdown"]


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
    out += [f"- **{s}**" for s in report.verdicts.values()] or [f"_{NOTHING_TO_COMPARE}_"]
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
    out += _sections_markdown(report, sections(report))
    out += ["", f"_specload {report.specload_version}, {report.generated_at}_", ""]
    return "\n".join(out)


#: what the folded sections hold, for the ``<details>`` summary
_FOLDED = "Per-step figures, client vs server, decode step time, runs"


def _sections_markdown(report: Report, listed: list[Section]) -> list[str]:
    """Each section in order; the folded ones together in one ``<details>`` at the end."""
    out: list[str] = []
    folded = [s for s in listed if s.folded]
    for s in listed:
        if not s.folded:
            out += _section_markdown(report, s, 3)
    if folded:
        out += [f"<details><summary>{_FOLDED}</summary>", ""]
        for s in folded:
            out += _section_markdown(report, s, 4)
        out.append("</details>")
    return out


def _section_markdown(report: Report, s: Section, level: int) -> list[str]:
    """A headed section's tables sit one level under its heading (the HTML's h2 and h3); in
    the folded part the ``<details>`` summary is the heading."""
    if not s.heading or s.folded:
        return [line for p in s.parts for line in _part_markdown(report, p, level)]
    out = [f"{'#' * level} {s.heading}", ""]
    for p in s.parts:
        out += _part_markdown(report, p, level if p.own_section else level + 1)
    return out


def _part_markdown(report: Report, p: Part, level: int) -> list[str]:
    """One part as Markdown lines; pictures are the HTML report's (Markdown has none)."""
    if p.kind == "table" and p.table is not None:
        return [table_markdown(p.table, level)]
    if p.kind == "text":
        return [f"- {f'`{p.subject}`: ' if p.subject else ''}{_cell(p.text)}", ""]
    if p.kind == "note":
        return [f"_{_cell(p.text)}_", ""]
    if p.kind == "flag":
        return ["  ```", f"  {p.text}", "  ```", ""]
    if p.kind == "samples":
        samples = report.comparison.samples.get(p.text, [])
        differ = sum(not x.identical for x in samples)
        return [
            f"- Output samples, `{p.text}` vs the baseline: {len(samples)} prompts, "
            f"{differ} with different text (side by side in report.html)",
            "",
        ]
    return []

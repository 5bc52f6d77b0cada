"""Self-contained HTML report: one file, plots inline as SVG data URIs, no scripts, no fetches.

It opens from a CI artifact or an e-mail attachment with nothing else around it. Same
sections as the Markdown report (tables come from ``report.tables``) with the figures from
``report.plots`` between the verdict and the details.
"""

from __future__ import annotations

import base64
import html

from specload.analysis.samples import diff_segments
from specload.report.model import Report
from specload.report.plots import Plot, render_plots
from specload.report.schedule_tables import (
    batch_table,
    best_of_both_tables,
    best_of_both_verdicts,
    proposal_lines,
)
from specload.report.tables import (
    Table,
    attribution_table,
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

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1200px;
color:#222;padding:0 1em}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
.verdict{background:#f3f8f3;border-left:4px solid #2ca02c;padding:.6em 1em;margin:.4em 0;font-size:1.05em}
.finding{background:#fff8e6;border-left:4px solid #e0a000;padding:.3em 1em;margin:.2em 0}
table{border-collapse:collapse;margin:.6em 0;font-size:12.5px;font-variant-numeric:tabular-nums}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:right;white-space:nowrap}
th{white-space:normal;vertical-align:bottom;min-width:3em}
td.long{white-space:normal;overflow-wrap:anywhere;min-width:14em;text-align:left}
th:first-child,td:first-child,th:last-child,td:last-child{text-align:left}th{background:#f5f5f5}
.note{color:#666;font-size:12px}del{background:#fdd;text-decoration:none}ins{background:#dfd;text-decoration:none}table.samples td,table.samples th{vertical-align:top;max-width:38em;white-space:pre-wrap;text-align:left}.plots{display:flex;flex-wrap:wrap;gap:12px}
pre{background:#f6f6f6;padding:.5em;white-space:pre-wrap;word-break:break-all}
figure{margin:0;border:1px solid #eee;padding:4px}figure img{width:560px;height:auto;display:block}
td.helps,span.helps{background:#e3f4e3}td.hurts,span.hurts{background:#fbe3e3}td.incomplete{color:#999;background:#f4f4f4}
.rule{background:#f6f6fb;border-left:4px solid #8888cc;padding:.3em 1em;margin:.4em 0;font-size:12.5px}
.meta{color:#666;font-size:12px}.scroll{overflow-x:auto;max-width:100%}
"""


#: A cell longer than this wraps (a speculative config, error kinds): tables fit the page.
_LONG_CELL = 32


def _td(cell: str, effect: str = "") -> str:
    classes = " ".join(c for c in ("long" if len(cell) > _LONG_CELL else "", effect) if c)
    cls = f' class="{classes}"' if classes else ""
    return f"<td{cls}>{html.escape(cell)}</td>"


def _effects(t: Table, i: int) -> list[str]:
    """Row ``i``'s cell effects (colour classes), or none."""
    return t.effects[i] if i < len(t.effects) else [""] * len(t.rows[i])


def _table(t: Table, heading: str = "h3") -> str:
    """A table with its title as an ``h3`` (or ``heading``, e.g. "h2" for a table that is a
    section of its own, so no section heading repeats the table's title).

    Headers wrap and long cells wrap, so a 20-column table fits a 1200 px column; the
    ``scroll`` container still scrolls sideways on a narrower screen instead of widening
    the page."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in t.headers)
    body = "".join(
        "<tr>" + "".join(_td(c, e) for c, e in zip(row, _effects(t, i), strict=False)) + "</tr>"
        for i, row in enumerate(t.rows)
    )
    note = f'<p class="note">{html.escape(t.note)}</p>' if t.note else ""
    table = (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'
        if t.rows
        else "<p><em>no data</em></p>"
    )
    return f"<{heading}>{html.escape(t.title)}</{heading}>{table}{note}"


def _figure(p: Plot) -> str:
    data = base64.b64encode(p.svg.encode()).decode()
    return (
        f'<figure id="plot-{p.key}"><img alt="{html.escape(p.title)}" '
        f'src="data:image/svg+xml;base64,{data}"></figure>'
    )


def _schedule_sections(report: Report) -> list[str]:
    """Dynamic schedules: crossover as a running batch, schedule proposals to paste, best of both."""
    batch = batch_table(report)
    proposals = proposal_lines(report)
    checks = best_of_both_tables(report)
    if not (batch or proposals or checks):
        return []
    parts = ["<h2>Dynamic speculation schedule</h2>"]
    if batch:
        parts.append(_table(batch))
    for text, flag in proposals:
        parts.append(f"<p>{html.escape(text)}</p>")
        if flag:
            parts.append(f"<pre>{html.escape(flag)}</pre>")
    parts += [_table(t) for t in checks]
    return parts


def _sections(report: Report) -> list[str]:
    c = report.comparison
    parts = []
    gates = gate_table(report)
    if gates:
        parts.append(_table(gates))
    if c.crossovers:
        parts.append(_table(crossover_table(report)))
    plots = render_plots(report)
    parts.append(
        '<h2>Plots</h2><div class="plots">' + "".join(_figure(p) for p in plots) + "</div>"
    )
    parts += _schedule_sections(report)
    parts.append("<h2>Change against the baseline</h2>")
    parts += [_table(ratio_table(report, label)) for label in c.ratios]
    att = attribution_table(report)
    if att and c.attribution is not None:
        summary = "".join(f'<p class="note">{html.escape(s)}</p>' for s in c.attribution.summary)
        parts.append(_table(att, "h2") + summary)
    if c.contract:
        parts.append(_table(contract_table(report), "h2"))
    parts += _sample_sections(report)
    parts.append("<h2>Per step</h2>")
    parts += [_table(step_table(report, label)) for label in c.steps]
    srv = server_table(report)
    if srv:
        parts.append(_table(srv))
    decode = decode_step_table(report)
    if decode:
        parts.append(_table(decode))
    lookup = lookup_table(report)
    if lookup:
        parts.append(_table(lookup))
    parts.append(_table(run_table(report), "h2"))
    parts += [f'<p class="note">{html.escape(n)}</p>' for n in c.notes]
    return parts


def render_html(report: Report) -> str:
    c = report.comparison
    verdicts = (
        "".join(f'<div class="verdict">{html.escape(s)}</div>' for s in c.verdicts.values())
        or '<div class="verdict">Only one condition: nothing to compare.</div>'
    )
    verdicts += "".join(
        f'<div class="verdict">{html.escape(s)}</div>' for s in best_of_both_verdicts(report)
    )
    findings = "".join(f'<div class="finding">{html.escape(f)}</div>' for f in report.findings)
    if report.advice:
        findings += (
            "<h2>Recommendations</h2><ul>"
            + "".join(f"<li>{html.escape(a.text)}</li>" for a in report.advice)
            + "</ul>"
        )
    meta = (
        f"Baseline <b>{html.escape(c.baseline)}</b> · 95 % bootstrap CIs ({c.bootstrap} "
        f"replicates) · warm-up excluded · specload {html.escape(report.specload_version)} · "
        f"{html.escape(report.generated_at)}"
    )
    rule = (
        f'<p class="rule">{html.escape(rule_note(report))} Cells: <span class="helps">helps'
        '</span>, <span class="hurts">hurts</span>, no colour: no significant change.</p>'
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(report.title)}</title><style>{_CSS}</style></head><body>"
        f'<h1>{html.escape(report.title)}</h1><p class="meta">{meta}</p>{verdicts}{rule}{findings}'
        + "".join(_sections(report))
        + "</body></html>\n"
    )


def _diff_html(a: str, b: str) -> tuple[str, str]:
    """Both texts as HTML, the words that differ marked (``del`` left, ``ins`` right)."""
    left, right = [], []
    for op, x, y in diff_segments(a, b):
        x, y = html.escape(x), html.escape(y)
        if op == "equal":
            left.append(x)
            right.append(y)
            continue
        if x:
            left.append(f"<del>{x}</del>")
        if y:
            right.append(f"<ins>{y}</ins>")
    return " ".join(left), " ".join(right)


def _sample_sections(report: Report) -> list[str]:
    """Side-by-side outputs for the same prompts (runs made with ``--store-text``)."""
    c = report.comparison
    parts: list[str] = []
    for label, samples in c.samples.items():
        rows = []
        for s in samples:
            left, right = _diff_html(s.baseline_text, s.condition_text)
            same = "identical" if s.identical else "differs"
            rows.append(
                f'<tr class="sample {same}"><td class="prompt">…{html.escape(s.prompt_tail)}'
                f"</td><td>{left}</td><td>{right}</td><td>{same}</td></tr>"
            )
        parts.append(
            f"<h2>Output samples: {html.escape(c.baseline)} vs {html.escape(label)}</h2>"
            '<p class="note">The same prompts, side by side, for a human check of meaning; '
            "words that differ are marked.</p>"
            f'<table class="samples"><tr><th>prompt (end)</th><th>{html.escape(c.baseline)}'
            f"</th><th>{html.escape(label)}</th><th></th></tr>" + "".join(rows) + "</table>"
        )
    return parts

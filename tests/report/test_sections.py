"""One list of sections: the HTML and Markdown reports show the same headings in the same
order (they were listed twice and drifted: a table under a different heading, a summary in
one report only)."""

from __future__ import annotations

import html as htmllib
import re

from specload.analysis.comparison import Comparison
from specload.report.attribution_words import attribution_lines
from specload.report.html import render_html
from specload.report.markdown import render_markdown
from specload.report.model import build_report
from specload.report.sections import sections


def _headings(text: str, pattern: str) -> list[str]:
    return [htmllib.unescape(re.sub(r"<[^>]+>", "", h)).strip() for h in re.findall(pattern, text)]


def test_html_and_markdown_show_the_sections_in_one_order(four_way: Comparison) -> None:
    report = build_report(four_way)
    listed = sections(report)
    expected = [
        h
        for s in listed
        for h in ([s.heading] if s.heading else []) + [p.table.title for p in s.parts if p.table]
    ]
    assert len(expected) > 10
    html_text, md_text = render_html(report), render_markdown(report)
    page = _headings(html_text, r"<h[23][^>]*>(.*?)</h[23]>")
    assert [h for h in page if h not in ("Recommendations", "Plots")] == expected
    # Markdown folds the details under one <details> summary instead of their heading
    folded = {s.heading for s in listed if s.folded}
    assert _headings(md_text, r"(?m)^#{3,4} (.*)$") == [h for h in expected if h not in folded]
    # what the sections hold is in both: attribution with its summary
    assert four_way.attribution is not None
    lines = attribution_lines(four_way.attribution)
    assert len(lines) == 2
    for line in lines:
        assert line in md_text and htmllib.escape(line, quote=False) in html_text

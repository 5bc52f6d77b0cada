"""A report's first screen is the answer: the verdicts, then at most three findings; the
rest are folded ("N more findings") in the HTML and Markdown, counted in the terminal."""

from __future__ import annotations

import io

import pytest
from analysis.synth_rundir import SPEC, Cond, linear_gain, write_run

from specload.analysis.compare import compare_runs
from specload.report.html import render_html
from specload.report.markdown import render_markdown
from specload.report.model import FIRST_FINDINGS, Report, build_report
from specload.report.terminal import render_terminal


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """Two server starts per condition that disagree at several steps: many findings."""
    d = tmp_path_factory.mktemp("many")
    qps = (2, 4, 8, 16)
    for k in (1, 2):
        base = Cond("baseline", tpot=lambda q, k=k: 1.0 + 0.15 * (k - 1))
        write_run(d / f"base-r{k}", base, qps=qps, n=150, seed=k, metrics=False)
        spec = Cond("spec", speculative=SPEC, tpot=linear_gain(0.3, 2, 0.2), tail_share=0.1)
        write_run(d / f"spec-r{k}", spec, qps=qps, n=150, seed=10 + k, metrics=False)
    r = build_report(compare_runs([d], bootstrap=200))
    assert len(r.findings) > FIRST_FINDINGS + 1
    return r


def test_html_shows_three_findings_and_folds_the_rest(report: Report) -> None:
    page = render_html(report)
    head, _, folded = page.partition('<details class="more-findings">')
    assert head.count('<div class="finding">') == FIRST_FINDINGS
    more = len(report.findings) - FIRST_FINDINGS
    assert f"<summary>{more} more findings</summary>" in folded
    assert folded.split("</details>")[0].count('<div class="finding">') == more
    assert page.index('class="verdict"') < page.index('class="finding"')


def test_markdown_and_terminal_lead_with_three(report: Report) -> None:
    md = render_markdown(report)
    look, _, rest = md.partition("**Look at:**")[2].partition("<details>")
    assert look.count("\n- ") == FIRST_FINDINGS and "more findings</summary>" in rest
    out = io.StringIO()
    render_terminal(report, file=out)
    text = out.getvalue()
    assert text.count("\n! ") + text.startswith("! ") == FIRST_FINDINGS + 1  # + "… N more"
    assert f"… {len(report.findings) - FIRST_FINDINGS} more in report.md" in text

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
    """Two server starts per condition that contradict each other (one helps where the other
    hurts) at several steps: many findings."""
    d = tmp_path_factory.mktemp("many")
    qps = (2, 4, 8, 16)
    for k in (1, 2):
        base = Cond("baseline", tpot=lambda q, k=k: 1.0 + 0.15 * (k - 1))
        write_run(d / f"base-r{k}", base, qps=qps, n=150, seed=k, metrics=False)
        tpot = linear_gain(0.3, 2, 0.2) if k == 1 else (lambda q: 1.6)
        spec = Cond("spec", speculative=SPEC, tpot=tpot, tail_share=0.1)
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
    assert page.index('class="verdict ') < page.index('class="finding"')


def test_markdown_and_terminal_lead_with_three(report: Report) -> None:
    md = render_markdown(report)
    look, _, rest = md.partition("**Look at:**")[2].partition("<details>")
    assert look.count("\n- ") == FIRST_FINDINGS and "more findings</summary>" in rest
    out = io.StringIO()
    render_terminal(report, file=out)
    text = out.getvalue()
    assert text.count("\n! ") + text.startswith("! ") == FIRST_FINDINGS + 1  # + "… N more"
    assert f"… {len(report.findings) - FIRST_FINDINGS} more in report.md" in text


def test_the_verdicts_colour_comes_from_the_effect(report: Report, tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    """Green only where the condition helps, red where it only hurts, grey for no decision
    (the starts above disagree) or no significant change."""
    from specload.report.html import verdict_tone

    assert verdict_tone(report.comparison, "spec") == "neutral"
    d = tmp_path_factory.mktemp("tones")
    qps = (2, 4, 8)
    base = write_run(d / "base", Cond("baseline"), qps=qps, n=150, metrics=False)
    fast = Cond("fast", speculative=SPEC, tpot=lambda q: 0.7)
    slow = Cond("slow", speculative=SPEC, tpot=lambda q: 1.3)
    dirs = [base, *(write_run(d / x.label, x, qps=qps, n=150, metrics=False) for x in (fast, slow))]
    c = compare_runs(dirs, bootstrap=200, baseline="baseline")
    assert verdict_tone(c, "fast") == "helps" and verdict_tone(c, "slow") == "hurts"
    page = render_html(build_report(c))
    assert '<div class="verdict helps">fast ' in page and '<div class="verdict hurts">slow ' in page

"""The report shows a flipping engine step: report.json ``regimes``, the sentences after the
verdict tables, and the HTML time plot with the slow seconds marked."""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import pytest
from analysis.synth_regimes import regime_pair

from specload.analysis.compare import compare_runs
from specload.analysis.comparison import Comparison
from specload.report import write_reports
from specload.report.model import build_report
from specload.report.regime_words import regime_sentences, regime_step
from specload.report.terminal import render_terminal


@pytest.fixture(scope="module")
def flipping(tmp_path_factory: pytest.TempPathFactory) -> Comparison:
    return compare_runs(list(regime_pair(tmp_path_factory.mktemp("flip"))), bootstrap=100)


def _plot_svg(page: str) -> str:
    m = re.search(
        r'<figure id="plot-regimes"[^>]*><img [^>]*src="data:image/svg\+xml;base64,([^"]+)"', page
    )
    assert m, "no regime plot in the page"
    return base64.b64decode(m.group(1)).decode()


def test_report_json_carries_regimes_and_their_sentences(
    flipping: Comparison, tmp_path: Path
) -> None:
    paths = write_reports(flipping, tmp_path)
    data = json.loads(paths["json"].read_text())
    spec = data["regimes"]["spec"]
    assert set(spec) == {"4 req/s", "8 req/s"}
    step = spec["4 req/s"]
    assert step["bimodal"] is True and 0.3 < step["slow_share"] < 0.55
    assert step["fast_ms"] == pytest.approx(13, rel=0.05)
    assert step["slow_ms"] == pytest.approx(20, rel=0.05)
    assert step["effect"]["baseline"] == "baseline" and step["effect"]["fast_change"] < -0.25
    assert step["sentence"] in data["regime_sentences"]
    assert data["regimes"]["baseline"]["4 req/s"]["bimodal"] is False
    assert data["regime_sentences"][0].startswith("spec's engine step had two regimes")


def test_html_has_the_regime_section_and_time_plot(flipping: Comparison, tmp_path: Path) -> None:
    page = write_reports(flipping, tmp_path)["html"].read_text()
    regimes_at, ratios_at = (
        page.index("<h2>Regimes</h2>"),
        page.index("Change against the baseline"),
    )
    assert ratios_at < regimes_at < page.index('<figure id="plot-regimes"')
    for sentence in regime_sentences(flipping.regimes):
        assert sentence.replace("'", "&#39;") in page
    svg = _plot_svg(page)
    # one panel per bimodal step, titled with the condition's slow share
    for r in flipping.regimes.bimodal():
        assert f"{r.key[1]:g} req/s: spec {r.slow_share * 100:.0f} % slow" in svg


def test_markdown_and_terminal_show_the_sentences_after_the_tables(
    flipping: Comparison,
) -> None:
    from specload.report.markdown import render_markdown
    from specload.report.tables import ratio_table

    report = build_report(flipping)
    md = render_markdown(report)
    section = md.index("### Regimes")
    assert md.index(ratio_table(report, "spec").title) < section
    assert all(f"- {s}" in md[section:] for s in regime_sentences(flipping.regimes))
    out = io.StringIO()
    render_terminal(report, file=out, width=200)
    text = out.getvalue()
    assert "Regimes" in text and regime_sentences(flipping.regimes)[-1][:60] in text


def test_a_report_without_regimes_has_no_section_or_plot(
    four_way: Comparison, tmp_path: Path
) -> None:
    paths = write_reports(four_way, tmp_path)
    assert "<h2>Regimes</h2>" not in paths["html"].read_text()
    assert "plot-regimes" not in paths["html"].read_text()
    assert "### Regimes" not in paths["md"].read_text()
    data = json.loads(paths["json"].read_text())
    assert data["regime_sentences"] == [] and all(v == {} for v in data["regimes"].values())


def test_the_first_screen_findings_name_a_step_with_two_regimes(flipping: Comparison) -> None:
    findings = build_report(flipping).findings
    regime = [f for f in findings if f.startswith("spec's engine step had two regimes")]
    assert len(regime) == 1 and regime[0].endswith("(Regimes, below)")


def test_a_regimes_step_is_named_by_its_load() -> None:
    # the analysis keys a step by its load; report.json's keys and every sentence name it
    assert regime_step(("qps", 8.0)) == "8 req/s"
    assert regime_step(("qps", 0.5)) == "0.5 req/s"
    assert regime_step(("concurrency", 8.0)) == "concurrency 8"

"""The HTML report is one self-contained file that opens in headless Chromium with its plots."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from browser import artifact_path, chromium_page

from specload.analysis.comparison import Comparison
from specload.report import write_reports

pytestmark = pytest.mark.browser


def test_html_is_self_contained(four_way: Comparison, tmp_path: Path) -> None:
    html = write_reports(four_way, tmp_path)["html"].read_text()
    assert "<script" not in html
    # Nothing fetched: every src/href is inline data.
    for ref in re.findall(r'(?:src|href)="([^"]*)"', html):
        assert ref.startswith("data:"), ref
    assert html.count('<img alt="') >= 8
    assert "spec-ngram-k4 lowers p50 TPOT" in html


def test_html_opens_in_chromium_without_errors_and_shows_its_plots(
    four_way: Comparison, tmp_path: Path
) -> None:
    path = write_reports(four_way, tmp_path)["html"]
    with chromium_page() as (page, errors):
        page.goto(path.as_uri(), wait_until="load")
        sizes = page.eval_on_selector_all(
            "figure img",
            "imgs => imgs.map(i => [i.complete, i.naturalWidth, i.naturalHeight, i.alt])",
        )
        page.screenshot(path=str(artifact_path("compare-report.png")), full_page=True)
        verdict = page.inner_text(".verdict >> nth=1")
        headings = page.eval_on_selector_all("h3", "hs => hs.map(h => h.textContent)")
    assert errors == []
    assert len(sizes) >= 8
    for complete, w, h, alt in sizes:
        assert complete and w > 300 and h > 150, (alt, w, h)
    assert {"TPOT vs load", "Change vs baseline", "Achieved vs target load"} <= {
        s[3] for s in sizes
    }
    assert verdict.startswith("spec-ngram-k4 lowers p50 TPOT")
    assert any(h.startswith("Crossover") for h in headings)
    shot = artifact_path("compare-report.png")
    assert shot.stat().st_size > 50_000

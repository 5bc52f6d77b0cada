"""The HTML report fits a 1280 px browser window: no table hides columns, nothing widens the page."""

from __future__ import annotations

from pathlib import Path

import pytest
from browser import artifact_path, chromium_page

from specload.analysis.comparison import Comparison
from specload.report import write_reports

pytestmark = pytest.mark.browser

_LAYOUT = """() => {
  const de = document.documentElement;
  const body = document.body.getBoundingClientRect();
  const hidden = [...document.querySelectorAll('table')].map(t => {
    const box = t.parentElement;
    const title = box.previousElementSibling ? box.previousElementSibling.textContent : '';
    return {title, table: Math.round(t.getBoundingClientRect().width),
            shown: box.clientWidth, needs: box.scrollWidth,
            right: t.getBoundingClientRect().right};
  }).filter(x => x.needs > x.shown + 1 || x.right > body.right + 1);
  const outside = [...document.body.querySelectorAll('*')]
    .filter(e => e.getBoundingClientRect().right > de.clientWidth + 1)
    .map(e => e.tagName).slice(0, 10);
  return {scrollWidth: de.scrollWidth, clientWidth: de.clientWidth, hidden, outside};
}"""


def test_report_tables_fit_the_page_at_1280_px(four_way: Comparison, tmp_path: Path) -> None:
    path = write_reports(four_way, tmp_path)["html"]
    with chromium_page(width=1280) as (page, errors):
        page.goto(path.as_uri(), wait_until="load")
        layout = page.evaluate(_LAYOUT)
        page.screenshot(path=str(artifact_path("compare-report-layout.png")), full_page=True)
    assert errors == []
    assert layout["scrollWidth"] <= layout["clientWidth"], layout
    assert layout["outside"] == [], layout
    # every table shows all its columns without scrolling sideways (the per-step table has
    # 20 columns; the Runs table a speculative config as JSON)
    assert layout["hidden"] == [], layout["hidden"]

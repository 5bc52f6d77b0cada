"""The HTML report's template: one self-contained file, every text escaped, cells coloured."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from analysis.synth_rundir import SPEC, Cond, linear_gain, write_run

from specload.analysis.compare import compare_runs
from specload.analysis.comparison import Comparison
from specload.report.html import render_html
from specload.report.model import build_report
from specload.report.palette import css_variables

CSS = Path(__file__).resolve().parents[2] / "specload" / "report" / "templates" / "report.css"


def test_page_is_self_contained_with_the_style_sheet_inlined(four_way: Comparison) -> None:
    page = render_html(build_report(four_way))
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page and "<link" not in page and "http://" not in page
    style = re.search(r"<style>(.*?)</style>", page, re.S)
    assert style is not None
    for rule in ("td.helps, span.helps { background: var(--sl-helps-bg); }", "figure img {"):
        assert rule in CSS.read_text() and rule in style.group(1)
    assert css_variables() in style.group(1)  # the palette's colours travel with the page
    assert page.count('<figure id="plot-') >= 3 and "data:image/svg+xml;base64," in page
    assert re.search(r'<td class="[^"]*helps[^"]*">', page)  # the one rule's colours


def test_labels_and_notes_are_text_never_markup(tmp_path: Path) -> None:
    odd = '<img src=x onerror="alert(1)">'
    base = write_run(tmp_path / "b", Cond("baseline"), qps=(2, 4), n=120)
    spec = write_run(
        tmp_path / "s",
        Cond(odd, speculative=SPEC, tpot=linear_gain(0.2, 2, 0.1)),
        qps=(2, 4),
        n=120,
    )
    page = render_html(build_report(compare_runs([base, spec], bootstrap=200)))
    assert odd not in page
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in page


@pytest.mark.parametrize("name", ["report.html.j2", "report.css"])
def test_the_template_files_ship_with_the_package(name: str) -> None:
    from importlib import resources

    assert (resources.files("specload.report") / "templates" / name).is_file()

"""Reports from a ``Comparison``: terminal (rich), Markdown, JSON and self-contained HTML.

``build_report`` (``report.model``) wraps a comparison into the ``Report`` model; each
renderer takes only that. ``write_reports`` writes ``report.md``, ``report.json`` and
``report.html`` into a folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specload.analysis.comparison import Comparison
    from specload.report.model import Report

__all__ = ["write_report_files", "write_reports"]


def write_report_files(
    report: Report, out_dir: str | Path, *, html: bool = True
) -> dict[str, Path]:
    """Render ``report`` into ``out_dir``; returns ``{"md": path, "json": path, "html": path}``."""
    import orjson

    from specload.report.jsonout import report_dict
    from specload.report.markdown import render_markdown

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"md": out / "report.md", "json": out / "report.json"}
    paths["md"].write_text(render_markdown(report), encoding="utf-8")
    paths["json"].write_bytes(orjson.dumps(report_dict(report), option=orjson.OPT_INDENT_2))
    if html:
        from specload.report.html import render_html

        paths["html"] = out / "report.html"
        paths["html"].write_text(render_html(report), encoding="utf-8")
    return paths


def write_reports(
    comparison: Comparison, out_dir: str | Path, *, html: bool = True
) -> dict[str, Path]:
    """Build the ``Report`` of ``comparison`` and write its files (see ``write_report_files``)."""
    from specload.report.model import build_report

    return write_report_files(build_report(comparison), out_dir, html=html)

"""Client vs server compares means with means; decode step time per step; plot axes from 0."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from specload.analysis.comparison import Comparison
from specload.report import write_reports
from specload.report.model import build_report
from specload.report.tables import DASH, decode_step_table, server_table
from specload.report.terminal import render_terminal


def _col(table: Any, header: str) -> list[str]:
    i = table.headers.index(header)
    return [r[i] for r in table.rows]


def test_client_vs_server_shows_means_and_leaves_out_what_the_server_lacks(
    four_way: Comparison,
) -> None:
    t = server_table(build_report(four_way))
    assert t is not None and "means" in t.title and "Δ_sum / Δ_count" in t.note
    # the synthetic server exposes TTFT, TPOT and ITL histograms only: no queue/prefill/
    # decode/E2E columns (no bucket midpoints standing in for missing data)
    assert t.headers == [
        "condition",
        "QPS",
        "TTFT client",
        "TTFT server",
        "TTFT client − server",
        "TPOT client",
        "TPOT server",
    ]
    for row in t.rows:
        assert DASH not in row
    # the server sees TTFT 2 ms before the client: the difference of means says exactly that
    assert set(_col(t, "TTFT client − server")) == {"2.0"}
    # server TPOT means vary by step: not one bucket edge in every row
    assert len(set(_col(t, "TPOT server"))) > 5
    dec = {(d.target_qps): d for d in four_way.decode["baseline"]}
    first = next(r for r in t.rows if r[0] == "baseline")
    assert first[2] == f"{dec[float(first[1])].client_mean_s['ttft'] * 1000:.1f}"
    srv = four_way.steps["baseline"][0].server
    assert srv is not None and first[3] == f"{srv.mean_s['ttft'] * 1000:.1f}"


def test_decode_step_table_per_condition_and_step(four_way: Comparison) -> None:
    t = decode_step_table(build_report(four_way))
    assert t is not None and t.title == "Decode step time (ms)"
    assert len(t.rows) == sum(len(s) for s in four_way.steps.values())
    tok = dict(zip(_col(t, "condition"), _col(t, "tok/chunk"), strict=False))
    assert tok["baseline"] == "1.00" and float(tok["spec-ngram-k4"]) > 2
    for row in t.rows:
        gap_mean = float(row[t.headers.index("chunk gap mean")])
        itl = float(row[t.headers.index("server ITL mean")])
        assert itl == pytest.approx(gap_mean, abs=0.011)  # one ITL sample per chunk gap
    vs = _col(t, "step vs baseline")
    assert all(v == DASH for v, c in zip(vs, _col(t, "condition"), strict=True) if c == "baseline")
    # spec carries ~2.8 tokens a step at a lower TPOT: its step is roughly twice as long
    spec_vs = [v for v, c in zip(vs, _col(t, "condition"), strict=True) if c == "spec-ngram-k4"]
    assert all(v.startswith("+") and v.endswith(" %") for v in spec_vs)


def test_decode_step_is_in_every_output(four_way: Comparison, tmp_path: Path) -> None:
    paths = write_reports(four_way, tmp_path)
    data = json.loads(paths["json"].read_text())
    rows = data["decode_step"]["spec-ngram-k4"]
    assert [r["target_qps"] for r in rows] == [s.target_qps for s in four_way.steps["both"]]
    assert set(rows[0]) >= {
        "target_qps",
        "n",
        "chunk_gap_s",
        "chunk_gap_mean_s",
        "tokens_per_chunk",
        "server_itl_mean_s",
        "client_mean_s",
    }
    assert data["steps"]["baseline"][0]["server"]["mean_s"]["itl"] > 0
    assert "#### Decode step time (ms)" in paths["md"].read_text()
    html = paths["html"].read_text()
    assert "<h3>Decode step time (ms)</h3>" in html and 'id="plot-decode-step"' in html
    buf = io.StringIO()
    render_terminal(build_report(four_way), file=buf, width=160)
    assert "Decode step time (ms)" in buf.getvalue()


def test_no_section_heading_repeats_its_table_title(four_way: Comparison, tmp_path: Path) -> None:
    html = write_reports(four_way, tmp_path)["html"].read_text()
    for heading in ("Runs", "Attribution", "Output contract"):
        assert html.count(f"<h2>{heading}") == 1, heading
        assert f"<h3>{heading}" not in html, heading


def test_rate_and_fraction_axes_start_at_zero(
    four_way: Comparison, monkeypatch: pytest.MonkeyPatch
) -> None:
    from specload.report import plots

    limits: dict[str, tuple[float, float]] = {}

    def capture(fig: Any) -> str:
        ax = fig.axes[0]
        limits[ax.get_title()] = ax.get_ylim()
        return "<svg/>"

    monkeypatch.setattr(plots, "_svg", capture)
    plots.render_plots(build_report(four_way))
    acc = limits["Draft acceptance rate vs load (server /metrics)"]
    assert acc[0] == 0.0 and acc[1] >= 1.0  # 0.6 everywhere reads flat, not as a cliff
    err = limits["Error rate vs load"]
    assert err[0] == 0.0 and err[1] >= 0.05  # never below 0
    assert limits["KV cache usage vs load (max)"][0] == 0.0
    assert limits["Decode step time vs load"][0] == 0.0

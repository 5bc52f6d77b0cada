"""Markdown fits a CI job summary and says the verdict first; JSON holds every figure."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from specload.analysis.comparison import Comparison
from specload.report import write_reports
from specload.report.model import build_report
from specload.report.terminal import render_terminal
from specload.report.verdict_words import verdicts


def test_markdown_leads_with_the_verdict_and_fits_a_job_summary(
    four_way: Comparison, tmp_path: Path
) -> None:
    paths = write_reports(four_way, tmp_path, html=False)
    md = paths["md"].read_text()
    first_bullets = [ln for ln in md.splitlines() if ln.startswith("- **")]
    assert first_bullets[0].startswith("- **prefix: no decision yet on p50 TPOT: undecided at ")
    assert any(
        "spec-ngram-k4 lowers p50 TPOT" in b and "stops helping at ≈" in b for b in first_bullets
    )
    assert len(md.encode()) < 64_000  # GitHub's step summary allows 1 MiB; stay far below
    assert "### Attribution: which feature changed what" in md
    assert "### Output contract vs baseline" in md and "FAIL: exact match with the baseline" in md
    assert "### Client vs server" in md and "client − server" in md
    assert (
        "**Recommendations:**" in md
        and "- spec-ngram-k4: keep speculative decoding on up to ≈" in md
    )
    assert "<details>" in md and md.rstrip().endswith("_")


def test_json_has_crossover_per_condition_and_metric_and_per_step_server_figures(
    four_way: Comparison, tmp_path: Path
) -> None:
    data = json.loads(write_reports(four_way, tmp_path, html=False)["json"].read_text())
    assert set(data["crossover"]) == {"prefix", "spec-ngram-k4", "both"}
    for per_metric in data["crossover"].values():
        assert set(per_metric) == {"tpot_p50", "tpot_p95", "e2e_p50", "e2e_p95", "ttft_p50"}
        for x in per_metric.values():
            assert x["status"] in (
                "crosses",
                "always_helps",
                "never_helps",
                "starts_helping",
                "helps_between",
                "mixed",
            )
            assert len(x["ci"]) == 2 and x["tested_range"] == [2.0, 32.0]
            assert all(s["effect"] in ("helps", "hurts", "same", "undecided") for s in x["steps"])
    assert data["rule"].startswith("A step helps when the latency is at least 5 % lower")
    assert data["crossover"]["prefix"]["ttft_p50"]["status"] == "always_helps"
    step = data["steps"]["both"][-1]
    assert step["server"]["acceptance_rate"] == pytest.approx(0.6)
    assert step["server"]["prefix_hit_rate"] == pytest.approx(0.5)
    assert step["server"]["running_max"] == 26.0 and step["server"][
        "kv_usage_max"
    ] == pytest.approx(0.8)
    assert step["server"]["per_position"][0] > step["server"]["per_position"][-1]
    assert data["steps"]["spec-ngram-k4"][0]["error_kinds"] == {
        "http": data["steps"]["spec-ngram-k4"][0]["n"] - data["steps"]["spec-ngram-k4"][0]["n_ok"]
    }
    assert data["attribution"]["labels"]["both"] == "both"
    assert [c["passed"] for c in data["contract"]] == [True, True, False]
    keep = [a for a in data["advice"] if a["kind"] == "keep" and a["condition"] == "spec-ngram-k4"]
    assert len(keep) == 1 and keep[0]["figures"]
    assert data["schema"] == "specload.report/3" and data["exit_code"] == 0


def test_terminal_summary_prints_verdict_and_crossover_table(four_way: Comparison) -> None:
    buf = io.StringIO()
    render_terminal(build_report(four_way), file=buf, width=140)
    text = buf.getvalue()
    assert "▶ spec-ngram-k4 lowers p50 TPOT" in text
    assert "Where each condition helps: status and boundaries" in text and "always helps" in text
    assert "A step helps when the latency is at least 5 % lower" in text


def test_single_condition_and_disjoint_steps_still_give_all_reports(tmp_path: Path) -> None:
    from analysis.synth_rundir import SPEC, Cond, write_run

    from specload.analysis.compare import compare_runs

    a = write_run(tmp_path / "a", Cond("baseline"), qps=(2, 4), n=60, metrics=False)
    b = write_run(tmp_path / "b", Cond("spec", speculative=SPEC), qps=(8, 16), n=60, metrics=False)
    single = write_reports(compare_runs([a]), tmp_path / "single")
    assert "_only one condition: nothing to compare_" in single["md"].read_text()
    assert "<img" in single["html"].read_text()
    disjoint = compare_runs([a, b])
    assert (
        verdicts(disjoint)["spec"]
        == "spec: no step in common with the baseline, nothing to compare"
    )
    paths = write_reports(disjoint, tmp_path / "disjoint")
    assert json.loads(paths["json"].read_text())["crossover"] == {}

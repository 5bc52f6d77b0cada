"""Captions and cells say this run's figures: the tested range in the open-ended examples,
and an open-ended baseline capacity stated instead of a dash."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis.synth_rundir import SPEC, Cond, write_run

from specload.analysis.compare import compare_runs
from specload.core.slo import Slo
from specload.report.model import build_report
from specload.report.tables import capacity_table, crossover_table


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A baseline that holds a 20 ms p50 TPOT at every step up to 12 req/s and a condition
    30 % slower, which breaks it inside the range."""
    d = tmp_path_factory.mktemp("captions")
    qps = (3, 6, 12)
    base = write_run(d / "base", Cond("baseline"), qps=qps, n=150)
    slow = write_run(d / "slow", Cond("slow", speculative=SPEC, tpot=lambda q: 1.6), qps=qps, n=150)
    return base, slow


def test_captions_name_this_runs_tested_range(runs: tuple[Path, Path]) -> None:
    report = build_report(compare_runs(list(runs), bootstrap=200, slos=[Slo("tpot_p50", 0.020)]))
    assert "'>12' means beyond the highest tested step" in (crossover_table(report).note or "")
    cap = capacity_table(report)
    assert cap is not None
    assert "'>12' holds at every tested step, '<3' misses at the lowest" in (cap.note or "")
    assert ">24" not in (crossover_table(report).note or "") and ">32" not in (cap.note or "")


def test_an_open_ended_baseline_capacity_is_stated(runs: tuple[Path, Path]) -> None:
    report = build_report(compare_runs(list(runs), bootstrap=200, slos=[Slo("tpot_p50", 0.020)]))
    cap = capacity_table(report)
    assert cap is not None
    rows = {r[0]: r for r in cap.rows}
    assert rows["baseline"][1] == ">12"
    assert rows["slow"][5] == "baseline >12 req/s: not reached"


def test_the_runs_lengths_read_todays_scenarios() -> None:
    """run.json nests synthetic prompts under ``prompts.synthetic``; a prompt file or a
    trace has per-prompt lengths and is named ("lengths in —" on every run before)."""
    from specload.report.model import _lengths
    from specload.scenario import load_scenario

    root = Path(__file__).resolve().parents[2] / "scenarios"
    lengths = {
        f: _lengths(load_scenario(root / f).to_dict()) for f in ("demo.yaml", "mixed-demo.yaml")
    }
    assert lengths["demo.yaml"] == "in 512 / out 256 / shared prefix 256"
    assert lengths["mixed-demo.yaml"] == "in file mixed-traffic.jsonl / out 256"

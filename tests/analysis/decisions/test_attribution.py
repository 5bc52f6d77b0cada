"""Attribution on four constructed runs: prefix caching moves TTFT, speculation moves TPOT."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.synth_rundir import SPEC, Cond, write_run
from specload.analysis.compare import compare_runs


def _four(tmp_path: Path, both_tpot: float) -> list[Path]:
    conds = [
        Cond("baseline"),
        Cond("prefix", prefix_caching=True, ttft=lambda q: 0.6),
        Cond("spec", speculative=SPEC, tpot=lambda q: 0.75, ttft=lambda q: 1.05),
        Cond(
            "both",
            speculative=SPEC,
            prefix_caching=True,
            ttft=lambda q: 0.63,
            tpot=lambda q: both_tpot,
        ),
    ]
    return [write_run(tmp_path / c.label, c, qps=(2, 8), n=600, metrics=False) for c in conds]


def test_each_feature_gets_its_own_change_and_they_add_up(tmp_path: Path) -> None:
    att = compare_runs(_four(tmp_path, 0.75)).attribution
    assert att is not None
    assert att.labels == {
        "baseline": "baseline",
        "prefix": "prefix",
        "spec": "spec",
        "both": "both",
    }
    for step in att.steps:
        assert step.ratios["ttft"]["prefix"].value == pytest.approx(0.6, rel=0.08)
        assert step.ratios["tpot"]["prefix"].value == pytest.approx(1.0, abs=0.04)
        assert step.ratios["tpot"]["spec"].value == pytest.approx(0.75, rel=0.04)
        assert step.adds_up == {"ttft": True, "tpot": True}
    assert att.adds_up("ttft") and att.adds_up("tpot")


def test_interacting_features_do_not_add_up(tmp_path: Path) -> None:
    att = compare_runs(_four(tmp_path, 1.0)).attribution
    assert att is not None
    assert all(not s.adds_up["tpot"] for s in att.steps)
    assert all(s.interaction["tpot"].value == pytest.approx(1 / 0.75, rel=0.06) for s in att.steps)
    assert att.adds_up("ttft") and not att.adds_up("tpot")


def test_no_attribution_without_all_four_roles(tmp_path: Path) -> None:
    runs = _four(tmp_path, 0.75)[:3]
    assert compare_runs(runs).attribution is None

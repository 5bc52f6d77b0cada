"""Why a run cannot be compared live with its baseline (``report/baseline_words.py``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import orjson
from analysis.synth_rundir import Cond, write_run

from specload.recorder.baseline_run import load_baseline
from specload.report.baseline_words import baseline_problem


def test_baseline_problems_are_named(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", Cond("baseline"), qps=(2,), n=20, metrics=False)
    b = load_baseline(base)
    sc = orjson.loads((base / "run.json").read_bytes())["scenario"]
    assert baseline_problem(b, "spec", sc) is None
    assert "label 'baseline'" in (baseline_problem(b, "baseline", sc) or "")
    other = {**sc, "max_tokens": 1, "steps": [1, 2]}  # steps may differ, max_tokens may not
    assert "another scenario (differs in max_tokens)" in (baseline_problem(b, "spec", other) or "")
    five = {**sc, **{f"k{i}": i for i in range(5)}}
    assert "(differs in k0, k1, k2, k3 ...)" in (baseline_problem(b, "spec", five) or "")
    assert baseline_problem(replace(b, status="degraded"), "spec", sc) is None
    assert "is 'interrupted', not completed" in (
        baseline_problem(replace(b, status="interrupted"), "spec", sc) or ""
    )

"""The time-to-decide benchmark's machinery, shortened (the figures come from
``python benchmarks/time_to_decide.py``, committed): its worlds set the true ratio, and both
designs run on one session clock and are scored against it. No figure is asserted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.benchmarks import load_benchmark


def _load() -> Any:
    return load_benchmark("time_to_decide.py")


def test_a_world_stretches_only_the_baseline_to_its_target() -> None:
    """The true ratio is the target: the baseline's TPOT is multiplied by the regime truth's
    ratio over the target at each step, speculation's left as the engine makes it."""
    td = _load()
    w = td.world("effect-10", [0.87, 0.92, 1.0, 1.01, 1.05])
    assert np.allclose([w.factor("baseline", i) for i in range(5)],
                       [0.87 / 0.9, 0.92 / 0.9, 1.0 / 0.9, 1.01 / 0.9, 1.05 / 0.9])  # fmt: skip
    assert [w.factor("spec", i) for i in range(5)] == [1.0] * 5
    assert td.world("effect-0", [0.87] * 5).factor("baseline", 0) == pytest.approx(0.87)


def test_a_stretched_record_keeps_its_first_token_and_stretches_its_decode() -> None:
    cv = _load().cv
    w = cv.World("plain", False, False)
    run = cv._window(w, "baseline", 1, cv.Cell(4.0), 0.0, 2.0, 10.0)
    kw = {"step": 0, "repeat": 0, "block": None, "warmup_s": 2.0, "step_s": 10.0, "tag": "t"}
    plain = cv._records(run, cv.Cell(4.0), **kw)
    stretched = cv._records(run, cv.Cell(4.0), **kw, tpot_factor=1.5)
    assert plain and len(plain) == len(stretched)
    for a, b in zip(plain, stretched, strict=True):
        assert b["ttft_s"] == a["ttft_s"] and b["tpot_s"] == pytest.approx(1.5 * a["tpot_s"])
        assert b["e2e_s"] - b["ttft_s"] == pytest.approx(1.5 * (a["e2e_s"] - a["ttft_s"]))
        assert b["done_at"] - b["sent_at"] == pytest.approx(b["e2e_s"])


@pytest.mark.slow
def test_short_run_scores_both_designs_against_the_set_truth(monkeypatch, tmp_path: Path) -> None:
    td = _load()
    cv = td.cv
    monkeypatch.setattr(cv, "CELLS", (cv.Cell(4.0), cv.Cell(12.0)))
    monkeypatch.setattr(cv, "STEP_S", 20.0)
    monkeypatch.setattr(cv, "BOOTSTRAP", 200)
    monkeypatch.setattr(td, "FIXED_MAX", 2)
    monkeypatch.setattr(td, "FIXED_KS", (1, 2))
    row = td.one_seed((1, "effect-10", [0.9, 1.0], None))
    fixed, until = row["fixed"], row["until"]
    assert [r["k"] for r in fixed] == [1, 2]
    assert 0 < fixed[0]["server_s"] < fixed[1]["server_s"] < 2.5 * fixed[0]["server_s"]
    # --until-decided starts with the same session, and its first look is a widened interval
    assert until[0]["server_s"] == fixed[0]["server_s"]
    for f, u in zip(fixed[0]["width"], until[0]["width"], strict=True):
        assert u > f
    assert len(until) == 1 or until[-1]["server_s"] > until[0]["server_s"]
    result = {"seeds": 1, "first_seed": 1, "cells": ["4 req/s", "12 req/s"],
              "regime_truth": [0.9, 1.0], "fixed_max": 2, "looks": 4,
              "worlds": {"effect-10": {"target": 0.9, "designs": td.summarise([row]),
                                       "per_seed": [row]}}}  # fmt: skip
    d = result["worlds"]["effect-10"]["designs"]
    assert set(d["fixed"]["decided_by_k"]) == {"1", "2"}
    text = td.markdown(result)
    assert "## effect-10: true ratio 0.90 at every step" in text and "| fixed |" in text
    assert "| 50% |" in text and "| until |" in text

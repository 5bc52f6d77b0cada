"""The h200-llama8b profile still meets its calibration criteria (virtual time, no sockets).

Measured p50 TPOT (ms) from vLLM 0.26 on one H200 (512 in / 256 out, Poisson arrivals), read
from the repo's copy of the calibration, benchmarks/data/h200-vllm0.26-llama8b-draft1b.json.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from specload.sim import load_profile, parse_spec_config
from specload.sim.engine import EngineConfig
from tests.conftest import REPO

sys.path.append(str(REPO / "benchmarks"))  # virtual.py: the engine in virtual time
from virtual import run_poisson

CALIBRATION = (
    Path(__file__).resolve().parents[2]
    / "benchmarks"
    / "data"
    / "h200-vllm0.26-llama8b-draft1b.json"
)
BASELINE = {
    int(r["rate_rps"]): r["tpot_p50_ms"]
    for r in json.loads(CALIBRATION.read_text())["rows"]
    if r["condition"] == "baseline" and 1 <= r["rate_rps"] <= 28
}
SPEC = {
    "method": "draft_model",
    "num_speculative_tokens": 4,
    "synthetic_acceptance_rates": [0.8, 0.55, 0.3, 0.15],
}


def _p50_tpot_ms(spec, rate: float) -> float:
    n = min(max(32, int(20 * rate)), 800)
    cfg = EngineConfig(load_profile("h200-llama8b"), parse_spec_config(spec) if spec else None)
    run = run_poisson(cfg, rate, n, seed=0)
    return 1e3 * statistics.median(r.tpot_s for r in run.results)


def test_h200_profile_meets_calibration_criteria() -> None:
    assert sorted(BASELINE) == [1, 4, 8, 16, 20, 24, 28]  # every measured rate is checked
    base = {rate: _p50_tpot_ms(None, rate) for rate in BASELINE}
    for rate, measured in BASELINE.items():
        assert base[rate] == pytest.approx(measured, rel=0.15), rate
    spec = {rate: _p50_tpot_ms(SPEC, rate) for rate in (8, 16, 24, 28)}
    assert spec[8] < base[8] and spec[16] < base[16]
    assert spec[24] > base[24] and spec[28] > base[28]
    # crossover, interpolated in log-rate between 16 and 24 req/s
    d16, d24 = spec[16] / base[16] - 1, spec[24] / base[24] - 1
    x = math.exp(math.log(16) + (-d16 / (d24 - d16)) * (math.log(24) - math.log(16)))
    assert 16 <= x <= 24


@pytest.mark.slow
def test_calibrate_sim_reproduces_the_committed_results() -> None:
    """From a clone, benchmarks/calibrate_sim.py recomputes the committed profile's figures
    exactly (virtual time, seeded arrivals) from the measurements in benchmarks/data/."""
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "benchmarks/calibrate_sim.py", "--check"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "reproduces the committed calibration_h200.json" in proc.stdout
    assert "PASS: baseline p50 TPOT within 15 %" in proc.stdout

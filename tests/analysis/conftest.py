"""Fixtures for analysis tests: synthetic run directories with known answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.synth_rundir import SPEC, Cond, linear_gain, write_run


@pytest.fixture(scope="session")
def crossing_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Baseline and spec runs whose p50 TPOT gain falls linearly in log-QPS (true crossover known)."""
    d = tmp_path_factory.mktemp("pair")
    base = write_run(d / "base", Cond("baseline"))
    spec = write_run(
        d / "spec",
        Cond(
            "spec-ngram-k4",
            speculative=SPEC,
            tpot=linear_gain(0.25, 2, 0.1),
            ttft=lambda q: 1.2,
            acceptance_rate=0.6,
        ),
    )
    return base, spec

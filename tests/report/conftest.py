"""A four-condition comparison shared by the report tests (built once per session)."""

from __future__ import annotations

import pytest
from analysis.synth_rundir import SPEC, Cond, linear_gain, write_run

from specload.analysis.compare import compare_runs
from specload.analysis.comparison import Comparison


@pytest.fixture(scope="session")
def four_way(tmp_path_factory: pytest.TempPathFactory) -> Comparison:
    d = tmp_path_factory.mktemp("four")
    conds = [
        Cond("baseline"),
        Cond("prefix", prefix_caching=True, ttft=lambda q: 0.6, prefix_hit_rate=0.5),
        Cond(
            "spec-ngram-k4",
            speculative=SPEC,
            tpot=linear_gain(0.25, 2, 0.1),
            ttft=lambda q: 1.1,
            acceptance_rate=0.6,
            error_rate=0.02,
        ),
        Cond(
            "both",
            speculative=SPEC,
            prefix_caching=True,
            tpot=linear_gain(0.25, 2, 0.1),
            ttft=lambda q: 0.66,
            acceptance_rate=0.6,
            prefix_hit_rate=0.5,
            output_mismatch=0.05,
        ),
    ]
    runs = [write_run(d / c.label, c, n=250) for c in conds]
    return compare_runs(runs, bootstrap=500)

"""The regime-reading benchmark's machinery, one seed (the figures are the benchmark's:
``python benchmarks/regime_reading.py``, results committed).

One virtual interleaved session of the demo scenario: the records carry chunk gaps and
steps.json the blocks' windows, so the report's own regime analysis reads every step, and
the truth comes from the simulator's regime over the spec blocks' measured seconds.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.benchmarks import load_benchmark


def _load() -> Any:
    return load_benchmark("regime_reading.py")


@pytest.mark.slow
def test_one_session_reads_every_step_against_the_simulators_truth() -> None:
    rr = _load()
    row = rr.one_session(("interleaved-demo", 1))
    steps = row["steps"]
    assert list(steps) == ["c=1", "4 req/s", "10 req/s", "20 req/s"]
    for cell in steps.values():
        assert cell["seconds"] > 0 and cell["reading"] is not None
        assert 0.0 <= cell["truth"] <= 1.0
        assert not cell["baseline_bimodal"]  # the flat baseline raises no alarm
    assert any(cell["bimodal"] for cell in steps.values())
    summary = rr.summarise([row])["interleaved-demo"]
    assert summary["4 req/s"]["seeds"] == 1
    assert "| interleaved-demo | c=1 |" in rr.markdown(
        {"seeds": 1, "summary": {"interleaved-demo": summary}}
    )

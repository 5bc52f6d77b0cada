"""Small words of the verdict: one tested step is "at any tested load (2 req/s)", not
"2–2 req/s"."""

from __future__ import annotations

from pathlib import Path

from analysis.synth_rundir import SPEC, Cond, write_run

from specload.analysis.compare import compare_runs
from specload.report.verdict_words import verdicts
from specload.report.wording import load_range


def test_one_tested_step_is_one_load(tmp_path: Path) -> None:
    base = write_run(tmp_path / "b", Cond("baseline"), qps=(2,), n=80, metrics=False)
    spec = write_run(tmp_path / "s", Cond("spec", speculative=SPEC), qps=(2,), n=80, metrics=False)
    verdict = verdicts(compare_runs([base, spec], bootstrap=200, min_gain=0.25))["spec"]
    assert "(2 req/s)" in verdict and "2–2" not in verdict
    assert load_range(4, 16) == "4–16 req/s"

"""Which steps are complete enough to conclude from (``analysis/statistics/completeness.py``):
a step over the error budget or with a lost worker is left out, as a fact of why."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import orjson

from analysis.synth_rundir import SPEC, Cond, write_run
from specload.analysis.compare import compare_runs
from specload.analysis.statistics.completeness import (
    OverBudget,
    WorkerLost,
    error_budget,
    incomplete_steps,
)
from specload.report.model import build_report
from specload.report.verdict_words import verdicts


def _step(qps: float, n: int, n_ok: int) -> SimpleNamespace:
    return SimpleNamespace(
        condition="spec", target_qps=qps, n=n, n_ok=n_ok, error_rate=(n - n_ok) / n if n else 0.0
    )


def test_a_step_over_the_budget_and_one_with_a_lost_worker_are_left_out() -> None:
    steps = [_step(2.0, 100, 99), _step(4.0, 200, 181), _step(8.0, 100, 100)]
    lost = [{"run": "spec2", "target_qps": 8.0}, {"run": "spec2", "target_qps": 4.0}]
    found = incomplete_steps(steps, lost, 0.05)
    # the budget's reason wins at a step with both; the figures are the step's own
    assert found == {4.0: OverBudget("spec", 19, 200, 0.095, 0.05), 8.0: WorkerLost("spec2")}


def test_a_lost_worker_outside_any_step_leaves_nothing_out() -> None:
    steps = [_step(2.0, 100, 100)]
    assert incomplete_steps(steps, [{"run": "r", "target_qps": None}], 0.05) == {}


def test_the_budget_is_the_strictest_recorded_unless_overridden() -> None:
    runs = [SimpleNamespace(meta=SimpleNamespace(max_error_rate=v)) for v in (0.1, 0.02, None)]
    assert error_budget(runs) == 0.02
    assert error_budget(runs, override=0.2) == 0.2
    assert error_budget([]) == 0.05


def test_compare_carries_the_facts_and_the_verdict_words_them(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", Cond("baseline"), qps=(2, 4, 8), n=100)
    spec = write_run(
        tmp_path / "spec",
        Cond("spec", speculative=SPEC, error_rate=0.12, tpot=lambda q: 0.8),
        qps=(2, 4, 8),
        n=100,
    )
    c = compare_runs([base, spec], bootstrap=100)
    left_out = c.incomplete["spec"]
    assert left_out and all(isinstance(why, OverBudget) for why in left_out.values())
    assert all(why.error_rate > why.budget == 0.05 for why in left_out.values())
    verdict = verdicts(c)["spec"]
    # 12 % errors pass the 5 % budget at every step: nothing is left to conclude from
    assert sorted(left_out) == [2.0, 4.0, 8.0]
    assert verdict.startswith("spec: no complete step to compare (left out 2, 4, 8 req/s: ")
    for why in left_out.values():
        assert f"spec: errors {why.errors}/{why.requests} (" in verdict


def test_a_lost_worker_is_said_in_every_conclusion(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", Cond("baseline"), qps=(2, 4, 8), n=100)
    spec = write_run(tmp_path / "spec", Cond("spec", speculative=SPEC), qps=(2, 4, 8), n=100)
    step = orjson.loads((spec / "steps.json").read_bytes())[1]
    meta = orjson.loads((spec / "run.json").read_bytes())
    meta["lost_workers"] = [{"worker": "w2", "at": (step["start"] + step["end"]) / 2}]
    (spec / "run.json").write_bytes(orjson.dumps(meta))
    c = compare_runs([base, spec], bootstrap=100)
    assert c.incomplete["spec"] == {4.0: WorkerLost("spec")}
    report = build_report(c)
    assert "spec: 4 req/s left out of every conclusion (spec: a worker was lost)" in report.findings

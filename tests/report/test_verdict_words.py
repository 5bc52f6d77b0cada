"""Small words of the verdict: one tested step is "at any tested load (2 req/s)", not
"2–2 req/s"."""

from __future__ import annotations

from pathlib import Path

import orjson
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


def _with_closed_loop(path: Path) -> Path:
    """The run's 1-req/s step as a closed-loop step at concurrency 1 (as a sweep records
    ``{concurrency: 1}``: target 0, the level on every record), beside its 4-req/s step."""
    recs = [orjson.loads(x) for x in (path / "requests.jsonl").read_bytes().splitlines()]
    for r in recs:
        if r["target_qps"] == 1:
            r["target_qps"], r["concurrency"] = 0.0, 1
    (path / "requests.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    return path


def test_the_closed_loop_steps_answers_follow_the_ladders(tmp_path: Path) -> None:
    """The crossover is about open-loop load; a closed-loop step (one user at a time) is
    answered in the same sentence, by the same rule, not left to its table alone."""
    base = write_run(tmp_path / "b", Cond("baseline"), qps=(1, 4), n=120, metrics=False)
    faster = Cond("spec", speculative=SPEC, tpot=lambda q: 0.7)
    spec = write_run(tmp_path / "s", faster, qps=(1, 4), n=120, metrics=False)
    c = compare_runs([_with_closed_loop(base), _with_closed_loop(spec)], bootstrap=200)
    assert [level.concurrency for level in c.closed_loop] == [1]
    verdict = verdicts(c)["spec"]
    assert (
        "p50 TPOT with a fixed number of requests in flight: helps at concurrency 1: 30 % lower (CI "
        in verdict
    ), verdict


def test_a_sweep_of_closed_loop_steps_alone_is_answered_by_them(tmp_path: Path) -> None:
    base = write_run(tmp_path / "b", Cond("baseline"), qps=(1,), n=120, metrics=False)
    faster = Cond("spec", speculative=SPEC, tpot=lambda q: 0.7)
    spec = write_run(tmp_path / "s", faster, qps=(1,), n=120, metrics=False)
    c = compare_runs([_with_closed_loop(base), _with_closed_loop(spec)], bootstrap=200)
    verdict = verdicts(c)["spec"]
    assert verdict.startswith(
        "spec: p50 TPOT with a fixed number of requests in flight: helps at concurrency 1: 30 % lower"
    ), verdict
    assert "nothing to compare" not in verdict

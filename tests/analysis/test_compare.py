"""compare_runs: baseline choice, repeats pooled, gates, per-step figures."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from analysis.synth_rundir import SPEC, Cond, rewrite_records, write_run
from specload.analysis.compare import compare_runs
from specload.analysis.comparison import ReplicatesPooled
from specload.analysis.decisions.gates import Skipped, parse_gate
from specload.analysis.statistics.effect import INCOMPLETE
from specload.core.errors import ConfigError
from specload.metrics.host import HostDifference
from specload.report.finding_words import disagreement_message
from specload.report.gate_words import gate_message
from specload.report.model import build_report


def test_baseline_is_the_first_given_and_a_spec_run_first_is_asked_about(
    tmp_path: Path,
) -> None:
    spec = write_run(tmp_path / "s", Cond("spec", speculative=SPEC), qps=(2,), metrics=False)
    base = write_run(tmp_path / "b", Cond("plain"), qps=(2,), metrics=False)
    assert compare_runs([base, spec]).baseline == "plain"
    with pytest.raises(ConfigError, match="'spec', given first, runs speculative decoding"):
        compare_runs([spec, base])
    assert compare_runs([spec, base], baseline="spec").baseline == "spec"
    with pytest.raises(ConfigError, match="--baseline: 'nope' is no condition"):
        compare_runs([spec, base], baseline="nope")


def test_same_label_run_dirs_are_pooled_as_replicates(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", Cond("baseline"), qps=(2, 4), n=100, seed=1, metrics=False)
    b = write_run(tmp_path / "b", Cond("baseline"), qps=(2, 4), n=100, seed=2, metrics=False)
    cmp = compare_runs([a, b])
    step = cmp.steps["baseline"][0]
    assert step.n == 200 and step.executions == 2
    assert step.achieved_qps == pytest.approx(2.0, rel=0.05)
    assert ReplicatesPooled("baseline", 2) in cmp.notes
    assert len(step.execution_p50["tpot"]) == 2
    assert cmp.disagreements == []


def test_replicates_that_disagree_are_called_out_first(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", Cond("baseline"), qps=(2,), n=200, seed=1, metrics=False)
    b = write_run(
        tmp_path / "b", Cond("baseline", tpot=lambda q: 1.2), qps=(2,), n=200, seed=2, metrics=False
    )
    cmp = compare_runs([a, b])
    [d] = [d for d in cmp.disagreements if d.metric == "tpot_p50"]
    assert (
        d.condition == "baseline"
        and d.target_qps == 2
        and [r for r, _ in d.figures]
        == [
            "a",
            "b",
        ]
    )
    # a level, not an effect: worded so that it never reads against "all agree" in the table
    assert disagreement_message(d).startswith(
        "server starts differ in level: baseline at 2 req/s, p50 TPOT "
    )
    assert build_report(cmp).findings[0] == disagreement_message(d)


def test_per_step_figures_error_kinds_and_throughput(tmp_path: Path) -> None:
    run = write_run(
        tmp_path / "b",
        Cond("baseline", error_rate=0.1, acceptance_rate=0.5),
        qps=(4,),
        n=1000,
        out_tokens=64,
        metrics=False,
    )
    s = compare_runs([run]).steps["baseline"][0]
    assert s.n == 1000 and 0.07 < s.error_rate < 0.13 and set(s.error_kinds) == {"http"}
    assert s.output_tok_s == pytest.approx(4 * 64 * (1 - s.error_rate), rel=0.06)
    assert s.tokens_per_chunk == pytest.approx(64 / round(64 / 2.5), rel=1e-6)
    assert s.output_tokens_p50 == 64
    for name in ("ttft_p99", "tpot_p95", "e2e_p50", "queue_delay_p95"):
        e = s.latency[name]
        assert e.lo <= e.value <= e.hi


def test_regression_gate_fails_only_up_to_the_operating_point(tmp_path: Path) -> None:
    base = write_run(tmp_path / "b", Cond("baseline"), qps=(2, 8, 32), metrics=False)
    spec = write_run(
        tmp_path / "s",
        Cond("spec", speculative=SPEC, tpot=lambda q: 0.8 if q < 20 else 1.3),
        qps=(2, 8, 32),
        metrics=False,
    )
    gate = [parse_gate("tpot_p50=10")]
    assert compare_runs([base, spec], gates=gate, operating_qps=8).gates.passed
    failed = compare_runs([base, spec], gates=gate).gates
    assert not failed.passed and [f.target_qps for f in failed.failures] == [32.0]
    msg = gate_message(failed.failures[0])
    assert re.match(r"spec: tpot_p50 \+\d+\.\d % \(CI \+\d+\.\d…\+\d+\.\d %\)", msg)
    assert msg.endswith("at 32 req/s exceeds the allowed +10 % with its whole CI")


def _fail_at(run: Path, step: int | None) -> Path:
    """Fail every fourth measured request of ``run`` at ``step`` (every step: None), so the
    step's errors exceed the budget and its data is incomplete."""

    def fail(r: dict[str, Any]) -> None:
        at_step = step is None or r["step"] == step
        if at_step and not r["warmup"] and int(r["request_id"].rsplit("-", 1)[1]) % 4 == 0:
            r.update(ok=False, status=500, error={"kind": "http", "detail": "500"})
            r.update(ttft_s=None, tpot_s=None, e2e_s=None, output_tokens=None)

    return rewrite_records(run, fail)


def test_a_gate_skips_an_incomplete_step_and_says_so(tmp_path: Path) -> None:
    base = write_run(tmp_path / "b", Cond("baseline"), qps=(2, 4), metrics=False)
    spec = write_run(tmp_path / "s", Cond("spec", speculative=SPEC), qps=(2, 4), metrics=False)
    gates = compare_runs([base, _fail_at(spec, 1)], gates=[parse_gate("tpot_p95=10")]).gates
    assert gates.skipped == [Skipped("spec", 4.0, INCOMPLETE)] and gates.checked == 1


def test_a_gate_whose_every_step_is_incomplete_is_exit_2(tmp_path: Path) -> None:
    base = write_run(tmp_path / "b", Cond("baseline"), qps=(2, 4), metrics=False)
    spec = write_run(tmp_path / "s", Cond("spec", speculative=SPEC), qps=(2, 4), metrics=False)
    with pytest.raises(ConfigError) as err:
        compare_runs([base, _fail_at(spec, None)], gates=[parse_gate("tpot_p95=10")])
    assert str(err.value) == (
        "--max-regression: every step in scope is incomplete (spec at 2 req/s (incomplete); "
        "spec at 4 req/s (incomplete)); the gate would check nothing"
    )


@pytest.mark.parametrize("spec", ["tpot_p50", "nope=3", "tpot_p50=x", "tpot_p50=-1"])
def test_bad_gate_specs_are_config_errors(spec: str) -> None:
    with pytest.raises(ConfigError, match="--max-regression"):
        parse_gate(spec)


def test_a_folder_of_run_dirs_stands_for_its_runs(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    write_run(sweep / "1-baseline", Cond("baseline"), qps=(2,), n=50, metrics=False)
    write_run(sweep / "2-spec", Cond("spec", speculative=SPEC), qps=(2,), n=50, metrics=False)
    (sweep / "report").mkdir()
    cmp = compare_runs([sweep])
    assert [c.label for c in cmp.conditions] == ["baseline", "spec"] and cmp.baseline == "baseline"
    with pytest.raises(ConfigError, match="no run.json"):
        compare_runs([tmp_path / "sweep" / "report"])


def test_runs_from_different_hosts_are_compared_with_a_warning_naming_the_fields(
    tmp_path: Path,
) -> None:
    def host(name: str, gpu_driver: str) -> dict[str, object]:
        return {
            "host": {
                "hostname": name,
                "cpu_model": "Xeon",
                "cpu_count": 16,
                "kernel": "6.1",
                "gpu": {"name": "NVIDIA H200", "driver_version": gpu_driver},
            }
        }

    base = write_run(
        tmp_path / "b",
        Cond("baseline", extra_meta=host("gpu-a", "580.1")),
        qps=(2,),
        n=60,
        metrics=False,
    )
    spec = write_run(
        tmp_path / "s",
        Cond("spec", speculative=SPEC, extra_meta=host("gpu-b", "580.1")),
        qps=(2,),
        n=60,
        metrics=False,
    )
    cmp = compare_runs([base, spec])
    assert cmp.host_differences == [
        HostDifference("hostname", "hosts", (("gpu-a", ("baseline/b",)), ("gpu-b", ("spec/s",))))
    ]
    assert (
        "runs come from different hosts: hostname gpu-a (baseline/b) vs gpu-b (spec/s)"
        in build_report(cmp).findings
    )
    same = compare_runs(
        [
            base,
            write_run(
                tmp_path / "s2",
                Cond("spec", speculative=SPEC, extra_meta=host("gpu-a", "580.1")),
                qps=(2,),
                n=60,
                metrics=False,
            ),
        ]
    )
    assert same.host_differences == []

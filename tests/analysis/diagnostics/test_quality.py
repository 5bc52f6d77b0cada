"""Output contract against the baseline: mismatches in text, finish reasons, length, JSON."""

from __future__ import annotations

from pathlib import Path

from analysis.synth_rundir import SPEC, Cond, scenario, write_run
from specload.analysis.compare import compare_runs
from specload.analysis.diagnostics.quality import (
    FinishMixDiffers,
    LengthDiffers,
    OutputsDiffer,
    ShareDiffers,
)
from specload.report.verdict_words import verdicts


def test_identical_outputs_pass_the_contract(tmp_path: Path) -> None:
    base = write_run(tmp_path / "b", Cond("baseline"), metrics=False, qps=(2, 4))
    spec = write_run(tmp_path / "s", Cond("spec", speculative=SPEC), metrics=False, qps=(2, 4))
    chk = compare_runs([base, spec]).contract[0]
    assert chk.passed and chk.exact_match == 1.0 and chk.compared > 500


def test_changed_outputs_and_stop_points_are_detected(tmp_path: Path) -> None:
    base = write_run(
        tmp_path / "b", Cond("baseline", json_valid_share=1.0), metrics=False, qps=(2, 4)
    )
    spec = write_run(
        tmp_path / "s",
        Cond("spec", speculative=SPEC, output_mismatch=0.1, stop_share=0.2, json_valid_share=0.9),
        metrics=False,
        qps=(2, 4),
    )
    cmp = compare_runs([base, spec])
    chk = cmp.contract[0]
    assert not chk.passed
    assert 0.6 < chk.exact_match < 0.8  # 10 % changed text and 20 % stopped early
    mix, length, outputs, json_valid = chk.issues
    assert isinstance(mix, FinishMixDiffers) and mix.shares[0][:2] == ("length", 1.0)
    assert dict((k, cond) for k, _, cond in mix.shares)["stop"] > 0.1
    assert isinstance(length, LengthDiffers) and length.condition < length.baseline
    assert outputs == OutputsDiffer(chk.exact_match, chk.compared, 1.0)
    assert isinstance(json_valid, ShareDiffers) and json_valid.share == "json_valid"
    assert json_valid.baseline == 1.0 and 0.85 < json_valid.condition < 0.95
    assert (
        "its outputs break the baseline's contract (finish-reason mix differs (length 100%→"
        in (verdicts(cmp)["spec"])
    )


def test_exact_match_is_not_judged_when_sampling(tmp_path: Path) -> None:
    sc = scenario(temperature=0.7)
    base = write_run(tmp_path / "b", Cond("baseline"), metrics=False, qps=(2,), sc=sc)
    spec = write_run(
        tmp_path / "s",
        Cond("spec", speculative=SPEC, output_mismatch=0.5),
        metrics=False,
        qps=(2,),
        sc=sc,
    )
    chk = compare_runs([base, spec]).contract[0]
    assert chk.temperature == 0.7 and chk.exact_match is None and chk.passed

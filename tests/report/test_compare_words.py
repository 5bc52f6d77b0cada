"""The comparison's warnings and notes in words (``report/compare_words.py``), golden: the
analysis finds facts (``analysis.comparison.CompareWarning`` / ``CompareNote``), every output
prints these sentences."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from analysis.synth_rundir import SPEC, Cond, write_run

from specload.analysis.compare import compare_runs
from specload.analysis.comparison import (
    Comparison,
    ExecutionsDiffer,
    FeaturesContradicted,
    FellBehind,
    FewSuccesses,
    LoadBelowTarget,
    RepeatsPooled,
    ReplicatesPooled,
    ServerGapNote,
    ShortWarmup,
    SuspectTelemetry,
)
from specload.analysis.inputs.comparable import ConditionsDiffer, ValueDiffers
from specload.analysis.inputs.features import OtherFeatures, ServerSaysOtherwise
from specload.analysis.inputs.run_columns import (
    BadLine,
    NewerSchema,
    RunNotCompleted,
    StepsUnreadable,
    Unrecorded,
)
from specload.analysis.inputs.server import ServerGap
from specload.analysis.inputs.telemetry import CpuStolen, GpuThrottled, LoadgenSaturated
from specload.metrics.host import HostDifference
from specload.report import write_reports
from specload.report.compare_words import (
    comparison_notes,
    comparison_warnings,
    difference_text,
    host_difference_text,
    note_text,
    warning_text,
)


def test_each_warning_in_its_words() -> None:
    assert warning_text(ExecutionsDiffer("spec", 8.0, (0.0101, 0.0123, 0.011))) == (
        "spec at 8 req/s: executions differ, p50 TPOT 10.10–12.30 ms across 3 step "
        "executions (pooled; check for drift)"
    )
    assert warning_text(FewSuccesses("baseline", 1.0, 32)) == (
        "baseline at 1 req/s: only 32 successful requests; p95/p99 rest on the top few "
        "values (lengthen the step)"
    )
    assert warning_text(LoadBelowTarget("baseline", 1.0, 0.8)) == (
        "baseline at 1 req/s: achieved only 0.8 req/s"
    )
    assert warning_text(FellBehind("spec", 16.0, 0.12, 0.234)) == (
        "spec at 16 req/s: the client fell behind (12 % sent over 50 ms late, p95 234 ms; "
        "raise max_concurrency or workers)"
    )
    assert warning_text(ShortWarmup("baseline", 1.0, "warmup_s", ((8.0, 1.2), (32.0, 1.76)))) == (
        "baseline: the warm-up (1 s) is shorter than a request (p50 E2E) at 8 req/s (1.2 s), "
        "32 req/s (1.8 s): measuring began while the batch was still filling, below the step's "
        "steady load (lengthen warmup_s to at least 2 s)"
    )


def test_each_reader_warning_in_its_words() -> None:
    """The run readers' facts, worded as compare always printed them (the status and the
    unrecorded requests as ``recorder.read_run`` says them too)."""
    r1 = Path("runs/r1")
    assert warning_text(BadLine(r1 / "requests.jsonl", 100, "not_json")) == (
        "runs/r1/requests.jsonl: line 100: not valid JSON, skipped"
    )
    assert warning_text(BadLine(r1 / "requests.jsonl", 1727, "partial")) == (
        "runs/r1/requests.jsonl: line 1727: partial trailing line ignored (writer was interrupted?)"
    )
    assert warning_text(NewerSchema(r1 / "requests.jsonl", 7, 1)) == (
        "runs/r1/requests.jsonl: schema_version 7 is newer than 1; extra fields ignored"
    )
    assert warning_text(RunNotCompleted(r1, "running")) == (
        "runs/r1: run status is 'running', not 'completed'"
    )
    assert warning_text(Unrecorded(r1, 3)) == (
        "runs/r1: 3 requests sent without a record (their last batch never arrived)"
    )
    assert warning_text(StepsUnreadable(r1 / "steps.json", "not valid JSON")) == (
        "runs/r1/steps.json: not valid JSON; achieved QPS estimated from record times"
    )


def test_each_note_in_its_words() -> None:
    assert note_text(ReplicatesPooled("spec", 2)) == (
        "spec: 2 run directories are replicates (server starts) of one condition; pooled, "
        "with CIs that include the variance between starts"
    )
    assert note_text(RepeatsPooled("spec", 3)) == (
        "spec: up to 3 executions per step (repeats within a server start) pooled"
    )
    assert note_text(ServerGapNote("spec", "spec-r1", ServerGap(4.0, restarted=True))) == (
        "spec (spec-r1): the server restarted during the step at 4 req/s (its counters went "
        "back); that step's server counters are left out"
    )
    gap = ServerGap(4.0, restarted=False, why="2 scrapes failed")
    assert note_text(ServerGapNote("spec", "spec-r1", gap)) == (
        "spec (spec-r1): server figures for the step at 4 req/s are incomplete: 2 scrapes failed"
    )


def test_telemetry_says_each_kind_once_per_step_with_its_executions(
    four_way: Comparison,
) -> None:
    """The telemetry's lines go where its first fact was found; a step's executions that
    showed the same thing are one line, with how many of them did."""
    hot = GpuThrottled(("hw_slowdown",), 1400.0, 1980.0)
    c = replace(
        four_way,
        warnings=[
            FewSuccesses("baseline", 1.0, 32),
            SuspectTelemetry("spec", 8.0, 0, hot, 4),
            SuspectTelemetry("spec", 8.0, 0, LoadgenSaturated(0.95, 4), 4),
            SuspectTelemetry("spec", 8.0, 0, replace(hot, sm_clock_mhz_min=1500.0), 4),
            SuspectTelemetry("spec", 0.0, 8, CpuStolen(12.0), 1),
        ],
        notes=[ReplicatesPooled("spec", 2)],
        closed_loop=[],
    )
    assert comparison_warnings(c) == [
        "baseline at 1 req/s: only 32 successful requests; p95/p99 rest on the top few values "
        "(lengthen the step)",
        "spec at 8 req/s: GPU throttled (hw_slowdown; SM clock down to 1400 MHz from 1980) "
        "[in 2 of 4 executions]",
        "spec at 8 req/s: the load generator used 95% of its 4 cores (its own lag is in the "
        "timings: add --processes or a bigger host) [in 1 of 4 executions]",
        "spec at concurrency 8: 12 % of the host's CPU was stolen (steal)",
    ]
    assert comparison_notes(c) == [note_text(ReplicatesPooled("spec", 2))]


def test_a_reader_s_warning_reaches_the_comparison_and_report_json_in_its_words(
    tmp_path: Path,
) -> None:
    """The reader finds a fact (a line skipped), compare keeps it, report.json words it."""
    base = write_run(tmp_path / "b", Cond("baseline"), qps=(2,), n=30, warm=0, partial_tail=True)
    spec = write_run(tmp_path / "s", Cond("spec"), qps=(2,), n=30, warm=0)
    c = compare_runs([base, spec], bootstrap=50)
    (fact,) = [w for w in c.warnings if isinstance(w, BadLine)]
    assert fact == BadLine(base / "requests.jsonl", 31, "partial")
    paths = write_reports(c, tmp_path / "out", html=False)
    warnings = json.loads(paths["json"].read_text())["warnings"]
    assert (
        f"{base}/requests.jsonl: line 31: partial trailing line ignored (writer was "
        "interrupted?)" in warnings
    )


def test_a_declaration_the_server_contradicts_is_a_warning_in_its_words(tmp_path: Path) -> None:
    """run.json declares speculation on, the server's /metrics have no spec_decode counters:
    the condition keeps the declaration and every output says so (once, the contradiction
    was kept and printed nowhere)."""
    base = write_run(tmp_path / "b", Cond("baseline"), qps=(2,), n=30, warm=0)
    spec = write_run(
        tmp_path / "s", Cond("spec", speculative=SPEC, acceptance_rate=0.6), qps=(2,), n=30, warm=0
    )
    meta = json.loads((base / "run.json").read_text())
    meta["condition"] = {"speculative": SPEC, "prefix_caching": False,
                         "source": {"speculative": "declared", "prefix_caching": "declared"}}  # fmt: skip
    (base / "run.json").write_text(json.dumps(meta))
    c = compare_runs([base, spec], baseline="baseline", bootstrap=50)
    (fact,) = [w for w in c.warnings if isinstance(w, FeaturesContradicted)]
    assert fact == FeaturesContradicted("baseline", ServerSaysOtherwise("speculative", True))
    text = (
        "baseline: run.json declares speculative decoding on, but the server's /metrics show "
        "it off; the report keeps the declaration (check the server command)"
    )
    paths = write_reports(c, tmp_path / "out", html=False)
    assert text in json.loads(paths["json"].read_text())["warnings"]
    assert warning_text(FeaturesContradicted("spec", OtherFeatures("spec-r2", "spec-r1"))) == (
        "spec: run spec-r2 ran with other features (speculative decoding or prefix caching) "
        "than spec-r1; the condition takes spec-r1's"
    )


def test_each_difference_between_runs_in_its_words() -> None:
    """What a forced report keeps of each difference: full paths, both values."""
    a, b = Path("runs/base"), Path("runs/spec")
    key = "scenario.max_tokens"
    assert difference_text(ValueDiffers(b, "spec", a, "baseline", key, 128, 256)) == (
        "runs/spec (spec) vs runs/base (baseline): scenario.max_tokens 128 != 256"
    )
    assert difference_text(ValueDiffers(b, "spec", a, "baseline", "target.model", "x", "m")) == (
        "runs/spec (spec) vs runs/base (baseline): target.model 'x' != 'm'"
    )
    prompt = "median prompt_tokens (code)"
    assert difference_text(ValueDiffers(b, "spec", a, "baseline", prompt, 150.0, 13.5)) == (
        "runs/spec (spec) vs runs/base (baseline): median prompt_tokens (code) 150 != 13.5"
    )
    off, on = {"prefix_caching": False}, {"prefix_caching": True}
    assert difference_text(ConditionsDiffer(b, a, "x", on, off)) == (
        "runs/spec and runs/base share label 'x' but declare different conditions "
        "({'prefix_caching': True} vs {'prefix_caching': False})"
    )


def test_each_host_difference_in_its_words() -> None:
    gpu = HostDifference("gpu", "hosts", (("H200", ("a", "b")), ("H100", ("c",))))
    assert (
        host_difference_text(gpu) == "runs come from different hosts: gpu H200 (a, b) vs H100 (c)"
    )
    version = HostDifference(
        "server_version", "server versions", (("0.26.0", ("a",)), ("0.27.0", ("b",)))
    )
    assert host_difference_text(version) == (
        "runs come from different server versions: server_version 0.26.0 (a) vs 0.27.0 (b)"
    )

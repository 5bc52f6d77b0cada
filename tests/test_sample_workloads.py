"""The example workloads specload ships (``scripts/sample_workloads.py``, ``scenarios/``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from specload.analysis.compare import compare_runs
from specload.report.advice import advice_for
from specload.scenario import load_scenario
from specload.scenario.prompts import build_prompt_set
from specload.sim.textgen import repetition
from specload.sim.tokenizer import tokenize
from tests.conftest import REPO, specload_run

sys.path.append(str(REPO / "scripts"))  # sample_workloads.py: the code that makes them
from sample_workloads import CATEGORIES, mixed_traffic, sample_trace

MIXED = REPO / "scenarios" / "prompts" / "mixed-traffic.jsonl"
NGRAM = '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4,"prompt_lookup_min":2}'


def test_the_shipped_mixed_file_is_what_the_code_makes() -> None:
    lines = MIXED.read_text(encoding="utf-8").splitlines()
    assert [json.loads(x) for x in lines] == mixed_traffic()
    assert len(lines) == 240
    sc = load_scenario(REPO / "scenarios" / "mixed-traffic.yaml")
    prompts = build_prompt_set(sc)
    assert prompts.source_format == "specload"
    assert [p.category for p in prompts][:4] == list(CATEGORIES)  # interleaved: any prefix mixes
    caps = {p.category: p.max_tokens for p in prompts}
    assert caps == {"code": 256, "summary": 96, "qa": 32, "writing": 256}


def test_code_edits_repeat_their_input_and_writing_briefs_do_not() -> None:
    """What makes the classes differ under n-gram drafting: the prompt's self-repetition (the
    fraction of its token trigrams seen earlier in it, as the simulator measures it)."""
    by_cat: dict[str, list[float]] = {c: [] for c in CATEGORIES}
    for x in mixed_traffic(per_category=20):
        by_cat[x["category"]].append(repetition(tokenize(x["messages"][0]["content"])))
    mean = {c: sum(v) / len(v) for c, v in by_cat.items()}
    assert mean["code"] > 0.5 and mean["writing"] < 0.05, mean


@pytest.mark.slow
def test_ngram_gains_for_code_edits_and_not_for_open_ended_writing(
    sim_factory, tmp_path: Path
) -> None:
    """The shipped mixed workload on the simulator, baseline vs n-gram drafting: the per-class
    verdicts go the way the content implies."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "name: mixed-check\nmax_tokens: 256\nmin_tokens: 256\nignore_eos: true\n"
        "arrival: constant\nsteps: [16]\nstep_duration_s: 14\nwarmup_s: 1\n"
        f"max_concurrency: 256\nrequest_timeout_s: 60\nprompts:\n  file: {MIXED}\n"
    )
    dirs = []
    for label, extra in (("baseline", ()), ("ngram", ("--speculative-config", NGRAM))):
        sim = sim_factory("--profile", "tiny", *extra)
        dirs.append(specload_run(sim.url, scenario, label, tmp_path / label))
        sim.stop()
    records = [json.loads(x) for x in (dirs[1] / "requests.jsonl").read_text().splitlines()]
    assert {r["category"] for r in records} == set(CATEGORIES)
    assert all(r["output_tokens"] == {"qa": 32, "summary": 96}.get(r["category"], 256)
               for r in records if r["ok"])  # fmt: skip
    c = compare_runs(dirs, bootstrap=500)
    effect = {a.name: a.ratios["ngram"]["tpot_p50"][0].effect for a in c.classes}
    assert effect["code"] == "helps", effect
    assert effect["writing"] != "helps", effect
    advice = [a.text for a in advice_for(c)]
    assert any("draft for `code` requests only" in t for t in advice), advice


def test_the_shipped_traces_are_what_the_code_makes_and_are_bursty() -> None:
    import statistics

    from specload.scenario.trace import read_trace

    for fmt, name in (("specload", "sample.jsonl"), ("mooncake", "mooncake-sample.jsonl")):
        path = REPO / "scenarios" / "traces" / name
        rows = [json.loads(x) for x in path.read_text().splitlines()]
        assert rows == sample_trace(fmt=fmt)
        trace = read_trace(str(path))
        gaps = [b.at_s - a.at_s for a, b in zip(trace.entries, trace.entries[1:], strict=False)]
        assert statistics.pstdev(gaps) / statistics.fmean(gaps) > 1.5  # bursts: CV about 2
        assert 1.5 < trace.rate_qps < 2.5
    sc = load_scenario(REPO / "scenarios" / "trace-replay.yaml")
    assert [round(p.target_qps / sc.trace_rate_qps, 6) for p in sc.schedule()] == [1, 2, 4]
    assert load_scenario(REPO / "scenarios" / "bursty.yaml").burstiness == 0.25

"""``specload demo``: four conditions on the simulator, then the verdict and the report.

The shortened demo runs the real thing (simulator subprocesses, Locust runs, compare) with
two conditions (``--conditions spec``), fewer and shorter steps; it asserts the verdict's structure and that the verdict, the
status table and report.json say the same about three starts (a boundary where they agree
step by step, "server starts disagree" where they do not), never any timing: with 2-s steps
a start's own CI is wide, and whether three starts agree is the data's to say.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from specload.analysis.statistics.stats import MIN_STARTS_FOR_CONFIG
from specload.cli.demo import DEMO_REPLICATES, SPEC_CONFIGS, demo_conditions
from specload.report.crossover_words import fmt_qps
from specload.scenario import load_scenario
from tests.conftest import REPO

DEMO_YAML = REPO / "scenarios" / "demo.yaml"


def test_demo_conditions_isolate_each_feature() -> None:
    conds = {c.name: c.as_json() for c in demo_conditions("h200-llama8b")}
    spec = SPEC_CONFIGS["h200-llama8b"]
    assert {k: (v["speculative"], v["prefix_caching"]) for k, v in conds.items()} == {
        "baseline": (None, False),
        "spec": (spec, False),
        "prefix": (None, True),
        "both": (spec, True),
    }
    # speculation is declared where a flag turns it on; without one the server's /metrics say
    assert [v["source"]["speculative"] for v in conds.values()] == [
        "unknown", "declared", "unknown", "declared"]  # fmt: skip
    # The calibration table's spec rows: draft model, k=4, mean acceptance length 2.8.
    assert spec["method"] == "draft_model" and spec["num_speculative_tokens"] == 4
    assert 1 + sum(spec["synthetic_acceptance_rates"]) == pytest.approx(2.8)


def test_demo_scenario_brackets_the_calibrated_crossover_and_fits_the_budget() -> None:
    scenario = load_scenario(DEMO_YAML)
    # below the crossover, near it, and where a short step's batch is already as large as
    # the calibration's at 24 req/s, where speculation costs 25 % (scenarios/demo.yaml)
    assert min(scenario.steps) < 8 and max(scenario.steps) >= 28
    assert any(12 <= q <= 24 for q in scenario.steps)
    # Four conditions x three starts (the fewest with an interval over starts) x these three
    # steps of 2.5 s warm-up + 3 s measured: 12 x 16.5 s = 198 s of load, which with the
    # starts and drains is the "about 4-5 minutes" of the README and demo.yaml. Written out
    # by hand: a longer demo is a decision to make here too, with those words.
    assert DEMO_REPLICATES == 3 and DEMO_REPLICATES >= MIN_STARTS_FOR_CONFIG
    assert [(p.target_qps, p.warmup_s, p.duration_s) for p in scenario.schedule()] == [
        (4, 2.5, 3), (16, 2.5, 3), (32, 2.5, 3)]  # fmt: skip
    # The calibration's request shape: it sets how many requests are in flight at a rate.
    assert (scenario.max_tokens, scenario.min_tokens, scenario.ignore_eos) == (256, 256, True)
    assert scenario.prompts.input_tokens == 512


def test_conditions_keeps_the_baseline_and_names_what_a_workload_lacks() -> None:
    from specload.cli.demo import chosen_conditions
    from specload.core.errors import ConfigError

    conds = demo_conditions("h200-llama8b")
    assert [c.name for c in chosen_conditions(conds, "spec")] == ["baseline", "spec"]
    assert [c.name for c in chosen_conditions(conds, "both, prefix")] == [
        "baseline", "prefix", "both"]  # fmt: skip
    assert chosen_conditions(conds, None) == conds
    with pytest.raises(ConfigError, match="'ngram'.*expected names from baseline, spec"):
        chosen_conditions(conds, "ngram")
    with pytest.raises(ConfigError, match="besides the baseline, from spec, prefix, both"):
        chosen_conditions(conds, "baseline")


@pytest.mark.slow
def test_short_demo_prints_a_verdict_the_status_table_and_report_json_share(tmp_path: Path) -> None:
    raw = yaml.safe_load(DEMO_YAML.read_text())
    raw.update(steps=[4, 24], warmup_s=0.5, step_duration_s=2)
    short = tmp_path / "demo-short.yaml"
    short.write_text(yaml.safe_dump(raw))
    out = tmp_path / "demo"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "specload",
            "demo",
            "--out",
            str(out),
            "--scenario",
            str(short),
            "--conditions",
            "spec",
        ],  # fmt: skip
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    print(res.stdout[-4000:])
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    html = out / "report" / "report.html"
    assert html.is_file() and str(html) in res.stdout
    names = ("baseline", "spec")  # --conditions spec: the prefix runs are not started
    assert not (out / "prefix-r1").exists() and not (out / "both-r1").exists()
    metas = {
        (name, r): json.loads((out / f"{name}-r{r}" / "run.json").read_text())
        for name in names
        for r in (1, 2, 3)
    }
    assert all(m["status"] == "completed" for m in metas.values())
    # three fresh starts per condition, interleaved: every condition's k-th before any k+1-th
    for k in (1, 2):
        assert max(metas[n, k]["started_at"] for n in names) < min(
            metas[n, k + 1]["started_at"] for n in names
        )
    report = json.loads((out / "report" / "report.json").read_text())
    assert {c["label"]: c["server_starts"] for c in report["conditions"]} == {
        "baseline": 3, "spec": 3}  # fmt: skip
    # the three starts' units pooled decide; the interval about the config stands beside
    assert {c["ci_scope"] for c in report["conditions"]} == {"these_starts"}
    assert {c["config_ci"] for c in report["conditions"]} == {"between_starts"}
    headline = report["headline"]
    assert f"Verdict: {headline}" in res.stdout
    assert headline.startswith(("spec ", "spec:")) and "p50 TPOT" in headline
    cross = report["crossover"]["spec"]["tpot_p50"]
    assert cross["tested_range"] == [4, 24]
    # what the status table says about the starts is what the verdict says (per step)
    md = (out / "report" / "report.md").read_text()
    [row] = [line for line in md.splitlines() if line.startswith("| spec | p50 TPOT |")]
    if cross["split_qps"]:
        assert not cross["decided"] and "3: disagree at " in row and "all agree" not in row
        assert "server starts disagree" in headline and "stops helping at ≈" not in headline
    else:
        assert "3: all agree" in row and "server starts disagree" not in headline
    if cross["decided"] and cross["status"] == "crosses":
        stop = cross["stops_at"]
        # the headline states the boundary report.json holds, with its CI
        if stop["qps"] is not None:
            lo, hi = stop["ci"]
            assert f"stops helping at ≈ {fmt_qps(stop['qps'])} req/s" in headline, (stop, headline)
            assert lo is None or hi is None or lo <= stop["qps"] <= hi, stop


def test_mixed_workload_demo_compares_ngram_with_the_baseline_on_the_mixed_scenario() -> None:
    from specload.cli.demo import _scenario_path, demo_conditions
    from specload.scenario import load_scenario

    conds = demo_conditions("h200-llama8b", "mixed")
    assert [c.name for c in conds] == ["baseline", "ngram"]
    assert '"method":"ngram"' in " ".join(conds[1].flags)
    sc = load_scenario(_scenario_path(None, "mixed"))
    assert sc.name == "mixed-demo" and sc.prompts.file is not None
    assert sc.prompts.file.endswith("mixed-traffic.jsonl")


def test_interleaved_demo_measures_baseline_and_spec_in_blocks_on_drifting_simulators() -> None:
    from collections import Counter

    from specload.cli.demo import REGIME_FLAGS, _scenario_path, demo_conditions
    from specload.protocol.interleave import plan_blocks

    conds = demo_conditions("h200-llama8b", "interleaved")
    assert [c.name for c in conds] == ["baseline", "spec"]
    assert "--spec-regime calibrated" in REGIME_FLAGS
    sc = load_scenario(_scenario_path(None, "interleaved"))
    assert sc.interleave is not None and sc.concurrency_steps == (1,)
    blocks = plan_blocks(sc, [c.name for c in conds])
    # a demo of "about 5 minutes" (README): 4 steps x 2 conditions x 4 blocks, each 3 s of
    # warm-up and 3 s measured (written out by hand: 192 s of load), the "block n/32" of the
    # README's recorded output
    assert Counter((b.condition, b.cell) for b in blocks) == {
        (c, cell): 4 for c in ("baseline", "spec") for cell in range(4)}  # fmt: skip
    assert {(b.warmup_s, b.duration_s) for b in blocks} == {(3.0, 3.0)}
    assert re.search(r"^block \d+/32 \(baseline\)", (REPO / "README.md").read_text(), re.M)


#: The form of a decided answer for spec, as the demo prints it when it crosses
#: (``verdict._headline``): the gain at the lowest load, the last helping step, the stop and
#: its CI (the tested loads that bracket it).
DECIDED_SPEC = re.compile(
    r"▶ spec lowers p50 TPOT by \d+ % \(CI \d+–\d+ %\) at 4 req/s, helps up to \d+ req/s "
    r"and stops helping at ≈ [\d.]+ req/s \(CI [<>\d.]+–[<>\d.]+\)"
)


def test_the_readmes_first_example_is_the_decided_answer_the_demo_prints() -> None:
    """The README's recorded demo ends in a decided answer for spec, in the form the verdict
    writes; ``benchmarks/results/demo_decisions.json`` holds the demo's answer on ten seeds
    (``benchmarks/demo_decisions.py``), decided on nine or more."""
    readme = (REPO / "README.md").read_text()
    first = readme[readme.index("\n> spec ") + 1 :]
    quote = " ".join(ln[2:] for ln in first[: first.index("\n\n")].splitlines())
    assert DECIDED_SPEC.match("▶ " + quote), quote  # the very first example, at the top
    demo = readme[readme.index("## The demo") :]
    block = demo[demo.index("```") + 3 :]
    block = block[: block.index("```")]
    assert "$ make demo" in block
    [spec] = [ln for ln in block.splitlines() if ln.startswith("▶ spec")]
    assert DECIDED_SPEC.match(spec), spec
    runs = json.loads((REPO / "benchmarks" / "results" / "demo_decisions.json").read_text())
    assert len(runs) >= 10 and sum(r["decided"] for r in runs) >= 0.9 * len(runs)
    seed0 = next(r for r in runs if r["seed"] == 0)
    assert DECIDED_SPEC.match("▶ " + seed0["verdict"]), seed0["verdict"]

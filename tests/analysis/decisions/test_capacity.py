"""SLO capacity and goodput on constructed runs whose answer is known.

The synthetic baseline's median TPOT is 10 ms × (1 + q/20) at q req/s, so ``tpot_p50 ≤ 16 ms``
holds up to 12 req/s: between the 8 and 16 req/s steps, where the log-QPS interpolation of the
margins (0.125 and −0.125 at the true medians) puts it at √(8·16) ≈ 11.3 req/s. The spec
condition's TPOT is lower by a gain that falls linearly in log-QPS, so it carries more: at the
true medians its margins cross at ≈ 13.3 req/s.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest

from analysis.synth_rundir import SPEC, Cond, linear_gain, scenario, write_run
from specload.analysis.compare import compare_runs
from specload.analysis.decisions.capacity import CROSSES, VIOLATES, WITHIN
from specload.analysis.inputs.run_columns import load_run
from specload.cli.main import main
from specload.core.slo import Slo
from specload.report.verdict_words import verdicts

QPS = (2, 4, 8, 16, 32)
SPEC_TPOT = linear_gain(0.25, 2, 0.1)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("capacity")
    return {
        "base": write_run(d / "base", Cond("baseline"), qps=QPS),
        "spec": write_run(
            d / "spec", Cond("spec", speculative=SPEC, tpot=SPEC_TPOT, acceptance_rate=0.6), qps=QPS
        ),
        "slow": write_run(d / "slow", Cond("slow", speculative=SPEC, tpot=lambda q: 1.3), qps=QPS),
        "slo_in_scenario": write_run(
            d / "scen", Cond("baseline"), qps=QPS, sc=scenario(slo={"tpot_p50": "16ms"})
        ),
    }


def _compare(*dirs: Path, slos: list[Slo] | None) -> object:
    return compare_runs(list(dirs), baseline="baseline", bootstrap=400, slos=slos)


def test_capacity_of_each_condition_matches_the_constructed_curves(runs: dict[str, Path]) -> None:
    c = _compare(runs["base"], runs["spec"], slos=[Slo("tpot_p50", 0.016)])
    base, spec = c.capacity["baseline"], c.capacity["spec"]  # type: ignore[attr-defined]
    assert base.status == spec.status == CROSSES
    assert base.limiting_slo == "tpot_p50"
    assert base.steps == list(QPS) and base.within == [True, True, True, False, False]
    assert abs(base.qps - math.sqrt(8 * 16)) < 1.0, base.qps
    assert abs(spec.qps - 13.3) < 1.0, spec.qps
    for cap in (base, spec):  # the CI holds the estimate and stays between the steps
        lo, hi = cap.boundary.ci
        assert lo is not None and hi is not None and 8 <= lo <= cap.qps <= hi <= 16
    change = c.capacity_changes["spec"]  # type: ignore[attr-defined]
    assert change.value == pytest.approx(spec.qps / base.qps - 1)
    lo = change.ci[0]
    assert 0.05 < change.value < 0.35 and lo is not None and lo > 0 and change.ci_beyond == ("", "")
    verdict = verdicts(c)["spec"]
    assert "Within the SLO (tpot_p50 ≤ 16 ms), spec carries" in verdict
    assert "against the baseline's" in verdict and "it buys" in verdict


def test_each_status_and_the_limiting_slo(runs: dict[str, Path]) -> None:
    c = _compare(runs["base"], runs["spec"], slos=[Slo("tpot_p50", 1.0), Slo("e2e_p99", 60.0)])
    assert {k: v.status for k, v in c.capacity.items()} == {"baseline": WITHIN, "spec": WITHIN}  # type: ignore[attr-defined]
    assert c.capacity["baseline"].qps is None and c.capacity["baseline"].boundary.qps == math.inf  # type: ignore[attr-defined]
    assert (
        "holds it at every tested load (up to 32 req/s), as does the baseline"
        in verdicts(c)["spec"]
    )  # type: ignore[attr-defined]
    c = _compare(runs["base"], runs["spec"], slos=[Slo("tpot_p50", 0.001)])
    assert (
        c.capacity["baseline"].status == VIOLATES
        and c.capacity["baseline"].boundary.qps == -math.inf
    )  # type: ignore[attr-defined]
    # two SLOs: the one that fails at the lower load limits the capacity
    c = _compare(runs["base"], slos=[Slo("tpot_p50", 0.016), Slo("ttft_p50", 0.070)])
    cap = c.capacity["baseline"]  # type: ignore[attr-defined]
    # median TTFT 50 ms × (1 + q/30): 70 ms is reached at 12 req/s as well, but TTFT's
    # margins cross lower in log-QPS (8: 0.048 vs 16: −0.095 → ≈ 10.8)
    assert cap.limiting_slo == "ttft_p50" and cap.per_slo["ttft_p50"] < cap.per_slo["tpot_p50"]
    assert cap.qps == pytest.approx(cap.per_slo["ttft_p50"])


def test_goodput_against_a_hand_count(runs: dict[str, Path]) -> None:
    slos = [Slo("tpot_p95", 0.016), Slo("ttft_p95", 0.080)]
    c = _compare(runs["base"], slos=slos)
    run = load_run(runs["base"])
    steps = {s["target_qps"]: s for s in run.steps}
    recs = [json.loads(line) for line in (runs["base"] / "requests.jsonl").read_text().splitlines()]
    for q in QPS:
        mine = [r for r in recs if r["target_qps"] == q and not r["warmup"] and r["ok"]]
        good = sum(1 for r in mine if r["tpot_s"] <= 0.016 and r["ttft_s"] <= 0.080)
        window = steps[q]["end"] - steps[q]["warmup_end"]
        assert c.goodput["baseline"][float(q)] == pytest.approx(good / window)  # type: ignore[attr-defined]
    g = [c.goodput["baseline"][float(q)] for q in QPS]  # type: ignore[attr-defined]
    assert g[0] > 1.5 and g[-1] < 1.0  # nearly all good at 2 req/s, nearly none at 32


def test_the_scenario_slo_is_used_when_none_is_given(runs: dict[str, Path]) -> None:
    c = _compare(runs["slo_in_scenario"], slos=None)
    assert [s.metric for s in c.slos] == ["tpot_p50"] and c.slos[0].limit_s == 0.016  # type: ignore[attr-defined]
    assert c.capacity["baseline"].status == CROSSES  # type: ignore[attr-defined]
    assert _compare(runs["base"], slos=None).capacity == {}  # type: ignore[attr-defined]


def test_capacity_gate_exit_codes_and_report_json(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def compare(*args: str) -> int:
        return main(["compare", *args, "--out", str(tmp_path / "r"), "--no-html", "--quiet",
                     "--bootstrap", "200"])  # fmt: skip

    base, spec, slow = (str(runs[k]) for k in ("base", "spec", "slow"))
    assert compare(base, spec, "--slo", "tpot_p50=16ms", "--max-regression", "capacity=10") == 0
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["slo"] == [{"metric": "tpot_p50", "limit_s": 0.016}]
    cap = report["capacity"]["spec"]
    assert (
        cap["status"] == CROSSES
        and cap["limiting_slo"] == "tpot_p50"
        and cap["change"]["value"] > 0
    )
    assert all(s["goodput"] is not None for s in report["steps"]["spec"])
    capsys.readouterr()
    # 30 % slower TPOT everywhere: 16 ms is reached at ≈ 4.3 req/s instead of ≈ 11: −61 %
    junit = str(tmp_path / "junit.xml")
    gate = ["--max-regression", "capacity=10", "--junit", junit]
    assert compare(base, slow, "--slo", "tpot_p50=16ms", *gate) == 1
    case = (
        ElementTree.parse(junit).getroot().find(".//testcase[@name='capacity loses at most 10 %']")
    )
    assert case is not None and case.find("failure") is not None
    err = capsys.readouterr().err
    assert (
        "gate failed: slow: capacity within the SLO" in err
        and "loses more than the allowed 10 %" in err
    )
    assert compare(base, slow, "--slo", "tpot_p50=16ms", "--max-regression", "capacity=70") == 0
    # a capacity gate without an SLO would check nothing: bad input
    assert compare(base, slow, "--max-regression", "capacity=10") == 2
    assert "needs an SLO" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("tpot_p95=25", "a positive duration with a unit"),
        ("tpot_p95", "expected METRIC=DURATION"),
        ("queue_delay_p95=1s", "expected METRIC=DURATION with METRIC one of"),
        ("tpot_p95=-5ms", "a positive duration"),
    ],
)
def test_a_bad_slo_is_one_line_and_exit_2(
    spec: str, expected: str, runs: dict[str, Path], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    rc = main(["compare", str(runs["base"]), "--slo", spec, "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert (
        rc == 2
        and expected in err
        and "Traceback" not in err
        and len(err.strip().splitlines()) == 1
    )


def test_a_violating_condition_bounds_its_loss_by_the_tested_range(
    runs: dict[str, Path],
) -> None:
    c = _compare(runs["base"], runs["slow"], slos=[Slo("tpot_p50", 0.0125)])
    # baseline: 10 ms × (1 + 2/20) = 11 ms at 2 req/s holds 12.5 ms; slow: 14.3 ms does not
    assert c.capacity["slow"].status == VIOLATES and c.capacity["baseline"].status == CROSSES  # type: ignore[attr-defined]
    assert c.capacity_changes["slow"].value is None  # type: ignore[attr-defined]
    assert "misses it already at 2 req/s" in verdicts(c)["slow"]
    assert np.isneginf(c.capacity["slow"].boundary.qps)  # type: ignore[attr-defined]

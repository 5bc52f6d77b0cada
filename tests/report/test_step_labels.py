"""Step tables name a step by its nominal load with the achieved load beside it ("16 (17.1)")."""

from __future__ import annotations

import copy

import pytest

from specload.analysis.comparison import Comparison
from specload.report.finding_words import flag_message
from specload.report.gate_words import gate_message
from specload.report.markdown import render_markdown
from specload.report.model import build_report
from specload.report.tables import ratio_table, server_table, step_table
from specload.report.wording import step_label


@pytest.mark.parametrize(
    ("nominal", "achieved", "label"),
    [(16, 17.05, "16 (17.1)"), (20, 18.6, "20 (18.6)"), (1, 0.8, "1 (0.80)"), (8, 8.01, "8"),
     (4, None, "4")],
)  # fmt: skip
def test_step_label(nominal: float, achieved: float | None, label: str) -> None:
    assert step_label(nominal, achieved) == label


def test_every_step_table_shows_the_achieved_load(four_way: Comparison) -> None:
    c = copy.deepcopy(four_way)  # the fixture is shared
    for steps in c.steps.values():  # the server carried 6 % more than asked at every step
        for s in steps:
            s.achieved_qps = s.target_qps * 1.06
    report = build_report(c)
    assert [s.target_qps for s in c.steps["baseline"]] == [2, 4, 8, 16, 32]
    want = ["2 (2.1)", "4 (4.2)", "8 (8.5)", "16 (17.0)", "32 (33.9)"]  # 6 % above each
    assert [r[0] for r in ratio_table(report, "spec-ngram-k4").rows] == want
    assert [r[0] for r in step_table(report, "baseline").rows] == want
    server = server_table(report)
    assert server is not None
    assert [r[1] for r in server.rows if r[0] == "baseline"] == want
    assert "| 32 (33.9) |" in render_markdown(report)


def test_the_status_table_and_the_verdict_name_steps_with_their_achieved_load(
    four_way: Comparison,
) -> None:
    from specload.analysis.statistics.effect import HELPS, UNDECIDED
    from specload.analysis.statistics.ratios import RatioRow
    from specload.analysis.statistics.stats import Estimate
    from specload.report.crossover_words import where_effect
    from specload.report.tables import crossover_table

    c = copy.deepcopy(four_way)
    # prefix caching cuts TTFT at every step of the fixture (0.6 of the baseline's)
    x = next(x for x in c.crossovers if (x.condition, x.metric) == ("prefix", "ttft_p50"))
    assert x.helping == [2, 4, 8, 16, 32]
    # compare fills each crossover with its condition's achieved loads
    assert x.achieved == {s.target_qps: s.achieved_qps for s in c.steps[x.condition]}
    x.achieved = {q: q * 1.06 for q in x.achieved}
    row = next(r for r in crossover_table(build_report(c)).rows if r[:2] == ["prefix", "p50 TTFT"])
    assert row[6] == "2 (2.1), 4 (4.2), 8 (8.5), 16 (17.0), 32 (33.9)"
    rows = [RatioRow("s", "tpot_p50", q, Estimate(0.8, 0.7, 0.9), e, q * 1.06)
            for q, e in ((2, UNDECIDED), (16, HELPS), (32, UNDECIDED))]  # fmt: skip
    assert where_effect(rows, HELPS) == "at 16 (17.0) req/s"


def test_gate_and_p95_lines_name_the_step_with_its_achieved_load() -> None:
    from specload.analysis.decisions.gates import GateFailure
    from specload.analysis.statistics.ratios import Flag
    from specload.analysis.statistics.stats import Estimate

    gate = GateFailure("spec", "tpot_p95", 16.0, 12.0, 10.0, (8.0, 15.0), achieved_qps=17.05)
    assert "+12.0 % (CI +8.0…+15.0 %) at 16 (17.1) req/s exceeds" in gate_message(gate)
    flag = Flag("spec", "tpot", 20.0, Estimate(0.8, 0.7, 0.9), Estimate(1.3, 1.1, 1.5), 18.6)
    assert flag_message(flag).startswith("spec at 20 (18.6) req/s: p50 TPOT")

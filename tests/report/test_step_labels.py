"""Step tables name a step by its nominal load with the achieved load beside it ("16 (17.1)")."""

from __future__ import annotations

import copy

import pytest

from specload.analysis.comparison import Comparison
from specload.analysis.wording import step_label
from specload.report.markdown import render_markdown
from specload.report.model import build_report
from specload.report.tables import ratio_table, server_table, step_table


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
    want = [step_label(s.target_qps, s.target_qps * 1.06) for s in c.steps["baseline"]]
    assert want[0] == "2 (2.1)" and want[-1] == "32 (33.9)"
    assert [r[0] for r in ratio_table(report, "spec-ngram-k4").rows] == want
    assert [r[0] for r in step_table(report, "baseline").rows] == want
    server = server_table(report)
    assert server is not None
    assert [r[1] for r in server.rows if r[0] == "baseline"] == want
    assert "| 32 (33.9) |" in render_markdown(report)

"""The output contract's issues in words (``report/contract_words.py``), golden: the analysis
finds facts (``analysis.diagnostics.quality.ContractIssue``), every output prints these."""

from __future__ import annotations

from specload.analysis.diagnostics.quality import (
    FinishMixDiffers,
    LengthDiffers,
    OutputsDiffer,
    ShareDiffers,
)
from specload.report.contract_words import contract_issue_text


def test_each_contract_issue_in_its_words() -> None:
    mix = FinishMixDiffers((("length", 1.0, 0.95), ("stop", 0.0, 0.05)))
    assert contract_issue_text(mix) == "finish-reason mix differs (length 100%→95%, stop 0%→5%)"
    assert contract_issue_text(LengthDiffers("p50", 256.0, 230.4)) == (
        "output length p50 256.0→230.4 tokens"
    )
    assert contract_issue_text(OutputsDiffer(0.712, 3454, 1.0)) == (
        "exact match with the baseline 71.2% over 3454 outputs at temperature 0; the baseline "
        "agrees with itself 100.0%"
    )
    assert contract_issue_text(OutputsDiffer(0.5, 10, None)) == (
        "exact match with the baseline 50.0% over 10 outputs at temperature 0"
    )
    assert contract_issue_text(ShareDiffers("json_valid", 1.0, 0.903)) == (
        "JSON valid share 100.0%→90.3%"
    )
    assert contract_issue_text(ShareDiffers("tool_call", 0.0, 0.147)) == (
        "tool-call share 0.0%→14.7%"
    )

"""The steps a gate left unchecked, worded from their facts (``gates.Skipped``)."""

from __future__ import annotations

from specload.analysis.decisions.gates import GateResult, Skipped, parse_gate
from specload.report.gate_words import skipped_line, skipped_text


def test_a_skipped_step_reads_as_its_condition_load_and_why() -> None:
    assert skipped_text(Skipped("spec", 4.0)) == "spec at 4 req/s (incomplete)"
    assert skipped_text(Skipped("spec-k4", 0.5)) == "spec-k4 at 0.5 req/s (incomplete)"


def test_the_skipped_steps_make_one_line_or_none() -> None:
    result = GateResult([parse_gate("tpot_p95=10")], None)
    assert skipped_line(result) is None
    result.skipped += [Skipped("spec", 4.0), Skipped("both", 16.0)]
    assert skipped_line(result) == (
        "gates skipped incomplete steps: spec at 4 req/s (incomplete); both at 16 req/s "
        "(incomplete)"
    )

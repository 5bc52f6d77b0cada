"""Server starts agree by their per-step effects (the one rule), never by their status label.

Three starts of spec, each against its interleaved baseline start: starts 1 and 2 help at 2,
8 and 32 req/s and hurt at 4 and 16; start 3 helps at 2 and 16 and hurts at 4, 8 and 32. All
three are "mixed", so comparing labels said "3: all agree"; by steps they disagree at 8, 16
and 32 req/s, and the status table, the verdict, the findings and the advice all say so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.synth_rundir import SPEC, Cond, write_run
from specload.analysis.compare import compare_runs
from specload.analysis.comparison import Comparison
from specload.analysis.decisions.crossover import MIXED
from specload.report.crossover_words import split_text
from specload.report.model import build_report
from specload.report.tables import crossover_table
from specload.report.verdict_words import verdicts

QPS = (2, 4, 8, 16, 32)
#: per start: spec's TPOT factor at each load (0.7 helps, 1.25 hurts, far beyond the noise)
PATTERN_A = {2: 0.7, 4: 1.25, 8: 0.7, 16: 1.25, 32: 0.7}
PATTERN_B = {2: 0.7, 4: 1.25, 8: 1.25, 16: 0.7, 32: 1.25}


def _starts(d: Path, patterns: list[dict[int, float]]) -> list[Path]:
    """Baseline and spec run dirs, one pair per start (``replicate`` orders and pairs them)."""
    dirs = []
    for k, pattern in enumerate(patterns, 1):
        meta = {"replicate": k}
        dirs.append(write_run(d / f"baseline-r{k}", Cond("baseline", extra_meta=meta), qps=QPS,
                              n=150, seed=k, metrics=False))  # fmt: skip
        spec = Cond("spec", speculative=SPEC, tpot=lambda q, p=pattern: p[int(q)], extra_meta=meta)
        dirs.append(write_run(d / f"spec-r{k}", spec, qps=QPS, n=150, seed=k, metrics=False))
    return dirs


@pytest.fixture(scope="module")
def split(tmp_path_factory: pytest.TempPathFactory) -> Comparison:
    d = tmp_path_factory.mktemp("split")
    return compare_runs(_starts(d, [PATTERN_A, PATTERN_A, PATTERN_B]), bootstrap=300)


def _row(c: Comparison, metric_label: str = "p50 TPOT") -> list[str]:
    t = crossover_table(build_report(c))
    return next(r for r in t.rows if r[0] == "spec" and r[1] == metric_label)


def test_starts_with_one_status_label_but_other_effects_do_not_all_agree(
    split: Comparison,
) -> None:
    x = split.crossover("spec", "tpot_p50")
    assert x is not None
    # the case the label comparison got wrong: every start analysed alone is "mixed"
    assert [s.status for s in x.starts] == [MIXED, MIXED, MIXED]
    assert x.split_qps == [8.0, 16.0, 32.0]
    assert not x.replicates_agree and not x.decided
    cell = _row(split)[8]  # "server starts"
    assert "all agree" not in cell and cell == "3: disagree at 8, 16, 32"
    assert "undecided" in _row(split)[2]


def test_the_verdict_findings_and_advice_say_what_the_table_says(split: Comparison) -> None:
    x = split.crossover("spec", "tpot_p50")
    assert x is not None
    where = split_text(x)
    assert where.startswith("at 8 req/s (helps in spec-r1, spec-r2; hurts in spec-r3)")
    verdict = verdicts(split)["spec"]
    assert verdict.startswith(f"spec: server starts disagree on p50 TPOT {where}")
    report = build_report(split)
    assert f"server starts disagree: spec on p50 TPOT {where}: no boundary is claimed" in (
        report.findings
    )
    [undecided] = [a for a in report.advice if a.kind == "undecided"]
    assert f"server starts disagree on p50 TPOT {where}" in undecided.text
    # a level difference between starts never reads "replicates disagree" next to the table
    assert not any(f.startswith("replicates disagree") for f in report.findings)


def test_starts_whose_effects_match_at_every_step_all_agree(tmp_path: Path) -> None:
    c = compare_runs(_starts(tmp_path, [PATTERN_A, PATTERN_A]), bootstrap=300)
    x = c.crossover("spec", "tpot_p50")
    assert x is not None and x.split_qps == [] and x.replicates_agree
    assert _row(c)[8] == "2: all agree"
    findings = build_report(c).findings
    assert not any(f.startswith("server starts disagree: spec on p50 TPOT") for f in findings)


def test_starts_in_folders_of_one_name_are_told_apart_by_number(tmp_path: Path) -> None:
    # The GPU kit's sessions are each ``out/sweep/{baseline,spec}``: pooled, three starts
    # named "spec" made "helps in spec, spec; hurts in spec", which names nothing.
    dirs = []
    for k, pattern in enumerate([PATTERN_A, PATTERN_A, PATTERN_B], 1):
        meta = {"started_at": 1000.0 * k}  # no replicate number: start time orders them
        base = Cond("baseline", extra_meta=meta)
        spec = Cond("spec", speculative=SPEC, tpot=lambda q, p=pattern: p[int(q)], extra_meta=meta)
        dirs.append(write_run(tmp_path / f"s{k}" / "baseline", base, qps=QPS, n=150, seed=k,
                              metrics=False))  # fmt: skip
        dirs.append(write_run(tmp_path / f"s{k}" / "spec", spec, qps=QPS, n=150, seed=k,
                              metrics=False))  # fmt: skip
    x = compare_runs(dirs, bootstrap=200).crossover("spec", "tpot_p50")
    assert x is not None
    assert [s.run for s in x.starts] == ["spec #1", "spec #2", "spec #3"]
    assert split_text(x).startswith("at 8 req/s (helps in spec #1, spec #2; hurts in spec #3)")


def test_starts_add_up_a_start_without_significant_change_vetoes_nothing() -> None:
    """One start hurts, two show neither helps nor hurts: no contradiction, the pooled interval
    decides. Only a start that helps beside one that hurts is a disagreement."""
    from specload.analysis.decisions.crossover import StartEffects, split_steps

    no, hurt, helps = "undecided", "hurts", "helps"
    starts = [
        StartEffects("r1", MIXED, {2.0: no, 4.0: no, 8.0: helps}),
        StartEffects("r2", MIXED, {2.0: hurt, 4.0: no, 8.0: hurt}),
        StartEffects("r3", MIXED, {2.0: no, 4.0: helps}),
    ]
    assert split_steps(starts) == [8.0]
    assert split_steps(starts[:1] + starts[2:]) == []  # helps beside undecided: adds up

"""Capacity within the SLOs per class of request: code helped by drafting carries more load
within a TPOT SLO than the baseline's code, questions hurt carry less."""

from __future__ import annotations

from pathlib import Path

from analysis.synth_rundir import SPEC, Cond, with_classes, write_run

from specload.analysis.compare import compare_runs
from specload.core.slo import Slo
from specload.report.capacity_words import qps_text
from specload.report.class_tables import class_capacity_table
from specload.report.jsonout import report_dict
from specload.report.model import build_report


def test_capacity_is_given_per_class_against_the_same_class_in_the_baseline(
    tmp_path: Path,
) -> None:
    qps = (2, 4, 8, 16, 32)
    base = with_classes(write_run(tmp_path / "b", Cond("baseline"), qps=qps, n=200))
    spec = write_run(tmp_path / "s", Cond("spec", speculative=SPEC), qps=qps, n=200)
    with_classes(spec, code=0.75, questions=1.25)
    # baseline p50 TPOT is 10 ms x (1 + q/20): 18 ms at 16 req/s, 26 ms at 32
    c = compare_runs([base, spec], bootstrap=200, slos=[Slo("tpot_p50", 0.020)])
    caps = {a.name: a.capacity for a in c.classes}
    assert 16 < caps["code"]["baseline"].qps < 32 and qps_text(caps["code"]["spec"]) == ">32"
    assert 8 < caps["questions"]["spec"].qps < 16
    table = class_capacity_table(build_report(c))
    assert table is not None
    rows = {(r[0], r[1]): r for r in table.rows}
    assert rows[("code", "spec")][5] == "spec >32 req/s: not reached"
    assert rows[("questions", "spec")][5].startswith("-")
    assert rows[("code", "baseline")][5] == "—"
    data = report_dict(build_report(c))
    assert data["classes"]["questions"]["capacity"]["spec"]["status"] == "crosses"

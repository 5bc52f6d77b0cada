"""One rule everywhere: the verdict, the tables, the advice, the gates, the flags and
report.json classify every step the same way, so they cannot contradict each other.

Each test builds run dirs whose steps sit on both sides of the rule (significantly better,
significantly worse, a change whose CI crosses zero) and checks every part against the
step classifications; a part with its own rule would disagree somewhere here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.synth_rundir import SPEC, Cond, write_run
from specload.analysis.compare import compare_runs
from specload.analysis.decisions.gates import parse_gate
from specload.analysis.statistics.effect import HELPS, HURTS, SAME, UNDECIDED
from specload.core.errors import ConfigError
from specload.report import write_reports
from specload.report.crossover_words import fmt_qps, where_effect
from specload.report.model import build_report
from specload.report.tables import ratio_table
from specload.report.verdict_words import verdicts


def _loads(qs: list[float]) -> str:
    return ", ".join(f"{q:g}" for q in qs)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Spec 25 % faster at 2 and 4 req/s, 2 % slower at 8 (its whole CI within ±5 %: the
    same), 30 % slower at 16 and 32."""
    d = tmp_path_factory.mktemp("rule")
    factor = {2: 0.75, 4: 0.75, 8: 1.02, 16: 1.3, 32: 1.3}
    base = write_run(d / "b", Cond("baseline"), n=120, metrics=False)
    spec = write_run(
        d / "s",
        Cond(
            "spec", speculative=SPEC, tpot=lambda q: factor[int(q)], ttft=lambda q: factor[int(q)]
        ),
        n=120,
        metrics=False,
    )
    return base, spec


def test_the_steps_cover_every_effect(mixed: tuple[Path, Path]) -> None:
    rows = compare_runs(list(mixed)).ratios["spec"]["tpot_p50"]
    assert [r.effect for r in rows] == [HELPS, HELPS, SAME, HURTS, HURTS]


def test_verdict_table_json_and_crossover_say_the_same(
    mixed: tuple[Path, Path], tmp_path: Path
) -> None:
    cmp = compare_runs(list(mixed))
    rows = cmp.ratios["spec"]["tpot_p50"]
    helping = [r.target_qps for r in rows if r.effect == HELPS]
    hurting = [r.target_qps for r in rows if r.effect == HURTS]
    x = cmp.crossover("spec", "tpot_p50")
    assert x is not None and x.status == "crosses" and x.helping == helping
    verdict = verdicts(cmp)["spec"]
    assert f"helps up to {helping[-1]:g} req/s" in verdict
    assert f"p50 TPOT is worse {where_effect(rows, HURTS)}" in verdict
    assert where_effect(rows, HURTS) == f"from {hurting[0]:g} req/s"
    # the step that is 2 % slower, the same within the margin, is in no clause
    assert "8 req/s" not in verdict.replace(f"≈ {fmt_qps(x.stop.qps)}", "")
    # the table's last column and its cell effects
    t = ratio_table(build_report(cmp), "spec")
    assert [r[-1] for r in t.rows] == ["helps", "helps", "same", "hurts", "hurts"]
    assert [e[1] for e in t.effects] == [r.effect for r in rows]
    data = json.loads(write_reports(cmp, tmp_path, html=False)["json"].read_text())
    assert [r["effect"] for r in data["ratios"]["spec"]["tpot_p50"]] == [r.effect for r in rows]
    assert [s["effect"] for s in data["crossover"]["spec"]["tpot_p50"]["steps"]] == [
        r.effect for r in rows
    ]


def test_advice_follows_the_same_boundary(mixed: tuple[Path, Path]) -> None:
    cmp = compare_runs(list(mixed), operating_qps=8)
    x = cmp.crossover("spec", "tpot_p50")
    advice = build_report(cmp).advice
    keep = [a for a in advice if a.kind == "keep"]
    assert len(keep) == 1 and f"up to ≈ {fmt_qps(x.stop.qps)} req/s" in keep[0].text
    assert not [a for a in advice if a.kind == "off"]


def test_a_gate_fails_exactly_where_the_table_says_hurts(mixed: tuple[Path, Path]) -> None:
    cmp = compare_runs(list(mixed), gates=[parse_gate("tpot_p50=1")])
    rows = cmp.ratios["spec"]["tpot_p50"]
    assert cmp.gates is not None
    failed = [f.target_qps for f in cmp.gates.failures]
    assert failed == [r.target_qps for r in rows if r.effect == HURTS]
    # +2 % at 8 req/s is over the gate's 1 %, but the report says the same there
    # (not hurts), so the gate does not fail there either
    assert 8.0 not in failed and cmp.gates.checked == len(rows)


def test_not_significant_reads_the_same_everywhere(tmp_path: Path) -> None:
    """Two short runs at one load, spec a few % faster inside the noise (two 4
    req/s smoke runs): no part may call it a gain, none may call it a loss."""
    base = write_run(tmp_path / "b", Cond("baseline"), qps=(4,), n=12, metrics=False, seed=4)
    spec = write_run(
        tmp_path / "s",
        Cond("spec", speculative=SPEC, tpot=lambda q: 0.96),
        qps=(4,),
        n=12,
        metrics=False,
        seed=4,
    )
    cmp = compare_runs([base, spec])
    [row] = cmp.ratios["spec"]["tpot_p50"]
    assert row.effect == UNDECIDED and row.ratio.lo < 1 < row.ratio.hi
    assert row.to_decide_s is not None and row.to_decide_s > 0
    verdict = verdicts(cmp)["spec"]
    assert verdict.startswith("spec: no decision yet on p50 TPOT: undecided at 4 req/s; about ")
    report = build_report(cmp)
    assert ratio_table(report, "spec").rows[0][-1] == "undecided"
    [wait] = [a for a in report.advice if a.kind == "undecided"]
    assert "undecided at 4 req/s" in wait.text
    assert not {"keep", "off"} & {a.kind for a in report.advice}
    # nor does the schedule proposal turn speculation off on an undecided step
    from specload.analysis.schedules.batch_schedule import propose_schedules
    from specload.analysis.schedules.schedule_results import NothingDecided

    [prop] = propose_schedules(cmp)
    assert not prop.ranges and prop.errors == [NothingDecided((4.0,))]
    assert "about this server start only" in verdict  # one run each: said next to the CI


def test_a_gate_over_zero_steps_is_bad_input(mixed: tuple[Path, Path]) -> None:
    with pytest.raises(ConfigError, match=r"--operating-qps 1: no tested step at or below it"):
        compare_runs(list(mixed), gates=[parse_gate("tpot_p95=10")], operating_qps=1)


def _without_tpot(run: Path) -> Path:
    """As if every request had one output token: no TPOT in any record."""
    path = run / "requests.jsonl"
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({**r, "tpot_s": None}) + "\n" for r in recs))
    return run


def test_a_gate_on_a_metric_no_run_measured_is_bad_input(tmp_path: Path) -> None:
    base = _without_tpot(write_run(tmp_path / "b", Cond("baseline"), qps=(2,), n=40, metrics=False))
    spec = _without_tpot(
        write_run(tmp_path / "s", Cond("spec", speculative=SPEC), qps=(2,), n=40, metrics=False)
    )
    with pytest.raises(ConfigError, match="no run measured tpot_p95"):
        compare_runs([base, spec], gates=[parse_gate("tpot_p95=10")])


def test_gate_over_zero_steps_exits_2_on_the_command_line(
    mixed: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from specload.cli.main import main

    rc = main(
        [
            "compare",
            *map(str, mixed),
            "--out",
            str(tmp_path / "r"),
            "--no-html",
            "--max-regression",
            "tpot_p95=10",
            "--operating-qps",
            "1",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "the gate would check nothing" in err and "Traceback" not in err
    assert err.count("\n") == 1

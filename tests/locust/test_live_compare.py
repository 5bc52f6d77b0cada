"""The live comparison (``locust/live_compare.py``) in-process, on synthetic run dirs.

The figures the specload tab shows are the child's report.json read back (``summary``):
compare's own ratios, CIs and wording. A comparison child that fails on one update is shown,
and the next update still runs; the run's end makes the comparison final whatever happened,
with its verdict line or why it has none (headless: exit 1).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import gevent
import orjson
import pytest

from specload.analysis.compare import compare_runs
from specload.locust.live_compare import LiveComparison, last_message, summary
from specload.protocol.provisional import main, write_view
from specload.recorder.baseline_run import load_baseline
from specload.report.jsonout import report_dict
from specload.report.markdown import render_markdown
from specload.report.model import build_report
from specload.report.report_json import parse_report, read_report
from tests.analysis.synth_rundir import SPEC, Cond, linear_gain, scenario, write_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("runs")
    base = write_run(root / "base", Cond("baseline"), qps=(2, 4), n=80)
    spec = Cond("spec", speculative=SPEC, tpot=linear_gain(0.3, 2.0, 0.0))
    return base, write_run(root / "spec", spec, qps=(2, 4), n=80)


#: Target rates of the runs whose figures the tab shows (``figure_runs``).
QPS = (2.0, 4.0, 8.0, 16.0)


@pytest.fixture(scope="module")
def figure_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("figure-runs")
    base = write_run(root / "base", Cond("baseline"), qps=QPS, n=120)
    spec = Cond("spec", speculative=SPEC, tpot=linear_gain(0.3, 2.0, 0.25))
    return base, write_run(root / "spec", spec, qps=QPS, n=120)


def test_the_tab_shows_compares_own_figures(figure_runs: tuple[Path, Path], tmp_path: Path) -> None:
    """Two settled steps through the child (in-process): the ratios, CIs and verdict the tab
    shows equal ``compare_runs`` on those steps, worded as compare's report.md words them."""
    base, spec = figure_runs
    out = str(tmp_path / "out")
    code = main([str(spec), str(base), out, "--steps", "0,1", "--baseline", "baseline"])
    assert code == 0
    got = summary(read_report(tmp_path / "out"), "baseline", "spec")
    view = write_view(spec, tmp_path / "expected-view", {0, 1})
    report = build_report(compare_runs([base, view], baseline="baseline"))
    want = summary(parse_report(report_dict(report)), "baseline", "spec")
    assert [r["target_qps"] for r in got["ratios"]] == [2.0, 4.0]
    assert got["ratios"] == want["ratios"] and got["verdict"] == want["verdict"]
    assert got["crossover"] == want["crossover"]
    assert set(got["ratios"][0]) == {"target_qps", "tpot_p50", "tpot_p95", "ttft_p50", "e2e_p50"}
    # the synthetic condition is 30 % faster on TPOT at 2 req/s: the rule says it helps
    assert got["ratios"][0]["tpot_p50"]["effect"] == "helps"
    cell = got["ratios"][0]["tpot_p50"]
    assert 0.6 < cell["value"] < 0.8
    # the page's text is the reports' own wording of that change: written out here, and
    # word for word the cell of the ratio table in compare's report.md on the same steps
    assert cell["text"] == "-29.6 % (-35.5…-23.1)"
    assert "| 2 | ▼ -29.6 % (-35.5…-23.1) |" in render_markdown(report)
    assert got["verdict"] and "spec" in got["verdict"]
    assert [s["target_qps"] for s in got["baseline_steps"]] == list(QPS)
    assert [s["target_qps"] for s in got["steps"]] == [2.0, 4.0]


def test_without_settled_steps_the_tab_shows_the_baseline_curve(
    figure_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    base, spec = figure_runs
    assert main([str(spec), str(base), str(tmp_path / "out"), "--baseline", "baseline"]) == 0
    got = summary(read_report(tmp_path / "out"), "baseline", None)
    assert got["ratios"] == [] and got["verdict"] is None and got["steps"] == []
    assert len(got["baseline_steps"]) == len(QPS)
    assert all(s["tpot_p50"] and s["tpot_p50"] > 0 for s in got["baseline_steps"])


def _wait(live: LiveComparison) -> None:
    while live.computing:
        gevent.sleep(0.05)


def test_a_failed_update_is_said_and_the_next_one_still_runs(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    base, spec = runs
    run_dir = shutil.copytree(spec, tmp_path / "live")
    meta = orjson.loads((spec / "run.json").read_bytes())
    other = {**meta, "target": {**meta["target"], "model": "other"}}
    (run_dir / "run.json").write_bytes(orjson.dumps(other))  # not comparable: the child fails
    said: list[str] = []
    live = LiveComparison(load_baseline(base), run_dir, "spec", scenario(), said.append)
    try:
        _wait(live)
        live.update({0})
        _wait(live)
        assert live.problem and live.problem.startswith("live comparison failed: runs are not")
        assert "target.model" in live.problem
        assert any("(the next step tries again)" in x for x in said)
        (run_dir / "run.json").write_bytes(orjson.dumps(meta))
        live.update({0, 1})
        _wait(live)
        assert live.problem is None and live.compared == (0, 1) and not live.final
        live.update({0, 1}, final=True)  # nothing new: final at once, the verdict said again
        assert live.final and live.failure is None
        assert said[-1].startswith("vs baseline (final, 2 steps): spec ")
    finally:
        live.close()


def test_the_end_is_final_even_when_the_comparison_fails(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    base, _ = runs
    said: list[str] = []
    live = LiveComparison(load_baseline(base), tmp_path / "none", "spec", scenario(), said.append)
    try:
        _wait(live)
        live.update({0}, final=True)
        _wait(live)
        assert live.final and live.failure and live.failure.startswith("live comparison failed")
        assert said[-1].startswith("vs baseline: no final comparison: live comparison failed")
        assert live.view()["provisional"] is False and live.view()["failure"] == live.failure
    finally:
        live.close()


def test_a_report_of_another_schema_is_a_failed_update_with_its_line(
    runs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child exits 0 but its report.json is not this specload's (``read_report``
    refuses it): the update failed, said in one line naming the file and the key, and the
    run goes on; nothing is read from the bad file."""
    import specload.locust.live_compare as live_compare

    def child(*args: str) -> tuple[int, str]:
        out = Path(args[3])
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.json").write_bytes(orjson.dumps({"schema": "specload.report/1"}))
        return 0, ""

    monkeypatch.setattr(live_compare, "_child", child)
    base, spec = runs
    said: list[str] = []
    live = LiveComparison(load_baseline(base), spec, "spec", scenario(), said.append)
    try:
        _wait(live)
        live.update({0})
        _wait(live)
        assert live.problem is not None and live.result is None
        assert live.problem.startswith("live comparison failed: ")
        assert live.problem.endswith(
            "report.json: schema: 'specload.report/1' is not this specload's report layout "
            "(expected 'specload.report/3')"
        )
        assert said[-1].endswith("(the next step tries again)") and not live.final
    finally:
        live.close()


def test_a_baseline_of_this_label_is_final_at_the_end_with_the_reason(
    runs: tuple[Path, Path],
) -> None:
    base, spec = runs
    said: list[str] = []
    live = LiveComparison(load_baseline(base), spec, "baseline", scenario(), said.append)
    live.update({0, 1})
    assert not live.computing and not live.final
    live.update({0, 1}, final=True)
    assert live.final and live.failure == live.blocked and "this run's label" in said[-1]


def test_last_message_keeps_the_head_line_of_a_many_line_error() -> None:
    text = "specload: runs are not comparable; 1 key differs:\n  median prompt_tokens: 7 | 157\n"
    assert (
        last_message(text)
        == "runs are not comparable; 1 key differs: median prompt_tokens: 7 | 157"
    )
    assert last_message("specload compare: error: x: bad\n") == "x: bad"
    assert last_message("") == "no message"


class _Job:
    """Stands in for ``ReportJob``: records what it was asked to compare."""

    def start(self, dirs: list[Path], out: Path, baseline: str | None, extra: tuple) -> None:
        self.args = (dirs, out, baseline, extra)


def test_report_compares_against_the_baseline_after_a_failed_update(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    """The Report button (and headless gates) compare with the baseline even when a live
    update failed: compare's own message then says why. Only a baseline that could never
    be used (``blocked``) gives the run's own report."""
    from types import SimpleNamespace

    from specload.locust.session import RunSession
    from specload.options.gates import GateOptions

    base, spec = runs
    live = LiveComparison(load_baseline(base), spec, "spec", scenario(), lambda _: None)
    try:
        live.problem = "live comparison failed: something"
        job = _Job()
        gates = GateOptions(max_regression=("tpot_p50=5",), junit="ci.xml")
        session = SimpleNamespace(
            writer=SimpleNamespace(path=tmp_path / "runs" / "spec"),
            compare=live,
            report=job,
            opts=SimpleNamespace(gates=gates),
        )
        RunSession.start_report(session)  # type: ignore[arg-type]
        dirs, out, baseline, extra = job.args
        assert dirs == [base, tmp_path / "runs" / "spec"] and baseline == "baseline"
        assert out == tmp_path / "runs" / "reports" / "spec-vs-base"
        assert extra == ("--max-regression=tpot_p50=5", "--gate-on", "ci", "--junit", "ci.xml")
        live.blocked = "the baseline has this run's label"
        RunSession.start_report(session)  # type: ignore[arg-type]
        assert job.args[0] == [tmp_path / "runs" / "spec"] and job.args[2] is None
    finally:
        live.close()

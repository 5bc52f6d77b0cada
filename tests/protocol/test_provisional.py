"""The provisional comparison behind the web UI's live answer (``specload/protocol/provisional.py``).

Synthetic run dirs with known ratios: the view keeps only the settled steps, the child's
report is ``specload compare``'s own (same ratios, same CIs, same verdict), and runs that
are not comparable exit 2 with one line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from specload.analysis.compare import compare_runs
from specload.protocol.provisional import main, write_view
from specload.report.jsonout import report_dict
from specload.report.model import build_report
from specload.report.report_json import parse_report, read_report
from tests.analysis.synth_rundir import SPEC, Cond, linear_gain, scenario, write_run

QPS = (2.0, 4.0, 8.0, 16.0)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("runs")
    base = write_run(root / "base", Cond("baseline"), qps=QPS, n=120)
    spec = Cond("spec", speculative=SPEC, tpot=linear_gain(0.3, 2.0, 0.25))
    return base, write_run(root / "spec", spec, qps=QPS, n=120)


def _lines(path: Path) -> list[dict]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines() if x.strip()]


def test_the_view_holds_the_settled_steps_only(runs: tuple[Path, Path], tmp_path: Path) -> None:
    _, spec = runs
    view = write_view(spec, tmp_path / "view", {0, 1})
    records = _lines(view / "requests.jsonl")
    assert {r["step"] for r in records} == {0, 1}
    assert len(records) == sum(1 for r in _lines(spec / "requests.jsonl") if r["step"] < 2)
    assert {s["index"] for s in orjson.loads((view / "steps.json").read_bytes())} == {0, 1}
    assert {m["step"] for m in _lines(view / "metrics.jsonl")} == {0, 1}
    meta = orjson.loads((view / "run.json").read_bytes())
    assert meta["counts"]["recorded"] == len(records) and meta["label"] == "spec"


def test_a_half_written_last_line_is_left_out(runs: tuple[Path, Path], tmp_path: Path) -> None:
    _, spec = runs
    live = tmp_path / "live"
    live.mkdir()
    for name in ("run.json", "steps.json", "metrics.jsonl"):
        (live / name).write_bytes((spec / name).read_bytes())
    body = (spec / "requests.jsonl").read_bytes()
    (live / "requests.jsonl").write_bytes(body + b'{"request_id": "x", "step": 0, "ttf')
    view = write_view(live, tmp_path / "view", {0})
    assert all(r["request_id"] != "x" for r in _lines(view / "requests.jsonl"))


def test_the_child_writes_compares_own_report(runs: tuple[Path, Path], tmp_path: Path) -> None:
    """Two settled steps: the ratios, CIs, effects and verdict equal ``compare_runs`` on a
    view of those steps (the web UI's figures of them: ``tests/locust/test_live_compare.py``)."""
    base, spec = runs
    out = str(tmp_path / "out")
    code = main([str(spec), str(base), out, "--steps", "0,1", "--baseline", "baseline"])
    assert code == 0
    got = read_report(tmp_path / "out")
    view = write_view(spec, tmp_path / "expected-view", {0, 1})
    want = parse_report(report_dict(build_report(compare_runs([base, view], baseline="baseline"))))
    assert [r.target_qps for r in got.ratios["spec"]["tpot_p50"]] == [2.0, 4.0]
    assert got.ratios == want.ratios and got.verdicts == want.verdicts
    assert got.crossovers == want.crossovers
    # the synthetic condition is 30 % faster on TPOT at 2 req/s: the rule says it helps
    cell = got.ratios["spec"]["tpot_p50"][0]
    assert cell.effect == "helps" and cell.ratio.value is not None
    assert 0.6 < cell.ratio.value < 0.8
    assert "spec" in got.verdicts["spec"]
    assert [s.target_qps for s in got.steps["baseline"]] == list(QPS)


def test_without_settled_steps_only_the_baseline(runs: tuple[Path, Path], tmp_path: Path) -> None:
    base, spec = runs
    assert main([str(spec), str(base), str(tmp_path / "out"), "--baseline", "baseline"]) == 0
    got = read_report(tmp_path / "out")
    assert "spec" not in got.ratios and "spec" not in got.verdicts
    assert [s.target_qps for s in got.steps["baseline"]] == list(QPS)


def test_incomparable_runs_exit_2_with_one_line(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", Cond("baseline"), qps=QPS, n=60)
    other = write_run(
        tmp_path / "other",
        Cond("spec", speculative=SPEC),
        qps=QPS,
        n=60,
        sc={**scenario(), "max_tokens": 999},
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "specload.protocol.provisional",
            str(other),
            str(base),
            str(tmp_path / "out"),
            "--steps",
            "0",
            "--baseline",
            "baseline",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "max_tokens" in proc.stderr and "Traceback" not in proc.stderr

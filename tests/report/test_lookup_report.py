"""The compare report shows the prompt-lookup match rate per step and overall, per condition."""

from __future__ import annotations

import io
import json
from pathlib import Path

import orjson
import pytest
from analysis.synth_rundir import Cond, write_run

from specload.analysis.compare import compare_runs
from specload.report import write_reports
from specload.report.model import build_report
from specload.report.tables import lookup_table
from specload.report.terminal import render_terminal

#: Known per-step means: at QPS q every successful request carries RATE[q].
RATE = {2.0: 0.1, 8.0: 0.5}


def with_lookup(run: Path, rates: dict[float, float] | None) -> Path:
    """Give each record the rate of its step (or none, like a run made before lookup existed)."""
    lines = (run / "requests.jsonl").read_bytes().splitlines()
    out = []
    for line in lines:
        rec = orjson.loads(line)
        if rates is not None and rec.get("ok"):
            rec["lookup_match_rate"] = rates[rec["target_qps"]]
        out.append(orjson.dumps(rec))
    (run / "requests.jsonl").write_bytes(b"\n".join(out) + b"\n")
    meta = json.loads((run / "run.json").read_text())
    meta["lookup_method"] = "words" if rates is not None else None
    (run / "run.json").write_text(json.dumps(meta))
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("lookup")
    base = with_lookup(write_run(d / "baseline", Cond("baseline"), qps=(2, 8), n=120), RATE)
    spec = write_run(d / "spec", Cond("spec", speculative={"method": "ngram"}), qps=(2, 8), n=120)
    return [base, with_lookup(spec, None)]


def test_steps_carry_the_mean_rate_of_their_requests(runs: list[Path]) -> None:
    c = compare_runs(runs, bootstrap=50)
    base = {s.target_qps: s for s in c.steps["baseline"]}
    assert base[2.0].lookup_match_rate == pytest.approx(0.1)
    assert base[8.0].lookup_match_rate == pytest.approx(0.5)
    assert base[2.0].lookup_n == base[2.0].n_ok
    assert all(s.lookup_match_rate is None and s.lookup_n == 0 for s in c.steps["spec"])


def test_table_has_per_step_rows_an_overall_row_and_only_conditions_that_recorded_it(
    runs: list[Path],
) -> None:
    c = compare_runs(runs, bootstrap=50)
    table = lookup_table(build_report(c))
    assert table is not None
    assert table.headers == ["QPS", "baseline"]
    assert table.rows[0] == ["2", "10%"] and table.rows[1] == ["8", "50%"]
    n2, n8 = (s.lookup_n for s in c.steps["baseline"])
    overall = (0.1 * n2 + 0.5 * n8) / (n2 + n8)
    assert table.rows[-1] == ["overall", f"{overall * 100:.0f}%"]


def test_markdown_json_and_terminal_show_it(runs: list[Path], tmp_path: Path) -> None:
    c = compare_runs(runs, bootstrap=50)
    paths = write_reports(c, tmp_path, html=False)
    md = paths["md"].read_text()
    assert "Would n-gram drafting help? Prompt-lookup match rate" in md
    data = json.loads(paths["json"].read_text())
    assert data["steps"]["baseline"][0]["lookup_match_rate"] == pytest.approx(0.1)
    cond = {x["label"]: x for x in data["conditions"]}
    assert cond["baseline"]["lookup_method"] == "words"
    assert 0.1 < cond["baseline"]["lookup_match_rate"] < 0.5
    assert cond["spec"]["lookup_match_rate"] is None
    buf = io.StringIO()
    render_terminal(build_report(c), file=buf, width=160)
    assert "Prompt-lookup match rate" in buf.getvalue()
    assert "2 req/s 10%, 8 req/s 50%" in buf.getvalue()


def test_no_table_when_no_run_recorded_rates(tmp_path: Path) -> None:
    runs = [
        write_run(tmp_path / "b", Cond("baseline"), qps=(2,), n=40),
        write_run(tmp_path / "s", Cond("spec", speculative={"method": "ngram"}), qps=(2,), n=40),
    ]
    assert lookup_table(build_report(compare_runs(runs, bootstrap=20))) is None

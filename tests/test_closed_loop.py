"""Closed-loop ``{concurrency: N}`` steps: N requests in flight, kept apart from the ladder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from specload.analysis.compare import compare_runs
from specload.core.errors import ConfigError
from specload.recorder import read_run
from specload.scenario import parse_scenario
from tests.conftest import specload_run
from tests.records import max_in_flight


def test_concurrency_steps_run_first_and_round_trip() -> None:
    sc = parse_scenario(
        {"steps": [4, {"concurrency": 1}, 8], "repeats": 2, "step_duration_s": 5}, file="s"
    )
    assert sc.steps == (4.0, 8.0) and sc.concurrency_steps == (1,)
    plans = sc.schedule()
    assert [(p.concurrency, p.target_qps) for p in plans] == [(1, 0.0), (0, 4.0), (0, 8.0)] * 2
    assert parse_scenario(json.loads(json.dumps(sc.to_dict())), file="s") == sc
    with pytest.raises(ConfigError, match=r"steps\[0\].concurrency: .*integer >= 1"):
        parse_scenario({"steps": [{"concurrency": 0}, 2]}, file="s")
    with pytest.raises(ConfigError, match="only closed-loop steps"):
        parse_scenario({"steps": [{"concurrency": 1}]}, file="s")
    block = {"steps": [{"concurrency": 1}], "interleave": {"blocks": 2}}  # sweep --interleave
    alone = parse_scenario(block, file="s")
    assert alone.steps == () and [p.concurrency for p in alone.schedule()] == [1]


@pytest.mark.slow
def test_closed_loop_keeps_n_in_flight_across_workers(sim_factory, tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(
        "name: closed\nsteps: [{concurrency: 1}, {concurrency: 4}, 8]\nstep_duration_s: 3\n"
        "warmup_s: 0.5\narrival: constant\nmax_tokens: 32\nmax_concurrency: 16\n"
        "prompts: {synthetic: {input_tokens: 32, count: 20}}\n"
    )
    sim = sim_factory("--profile", "tiny")
    out = specload_run(
        sim.url, tmp_path / "s.yaml", "baseline", tmp_path / "base", "--processes", "2"
    )
    run = read_run(out)
    records = list(run.record_dicts())
    assert run.meta.counts["sent"] == len(records) and all(r["ok"] for r in records)
    one = [r for r in records if r["step"] == 0]
    four = [r for r in records if r["step"] == 1]
    assert all(r["target_qps"] == 0 and r["concurrency"] == 1 for r in one)
    assert max_in_flight(one) == 1 and len(one) > 10  # each sent when the last returned
    assert max_in_flight(four) == 4 and len(four) > 3 * len(one)
    assert len({r["worker"] for r in four}) == 2  # the 4 slots split over both workers
    # compare: closed-loop levels apart from the ladder (a relabelled copy as the condition)
    other = tmp_path / "copy"
    shutil.copytree(out, other)
    meta = json.loads((other / "run.json").read_text())
    (other / "run.json").write_text(json.dumps({**meta, "label": "again"}))
    c = compare_runs([out, other], baseline="baseline", bootstrap=200)
    assert [lv.concurrency for lv in c.closed_loop] == [1, 4]
    assert [s.target_qps for s in c.steps["baseline"]] == [8.0]  # the ladder: QPS steps only
    level = c.closed_loop[0]
    assert level.steps["baseline"].n_ok == sum(1 for r in one if not r["warmup"])
    assert level.ratios["again"]["tpot_p50"].ratio.value == pytest.approx(1.0)

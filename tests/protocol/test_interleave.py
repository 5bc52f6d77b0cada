"""Block-randomized A/B: the plan's balance, the merge's bookkeeping, and one real session.

The session test runs ``specload sweep --interleave --url baseline=URL --url spec=URL``
against two real simulators (one with n-gram drafting) and reads what compare reads.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from specload.analysis.run_columns import load_run
from specload.analysis.steps import condition_steps
from specload.core.errors import ConfigError
from specload.protocol.interleave import block_overrides, cells_of, merge_blocks, plan_blocks
from specload.scenario import parse_scenario
from tests.conftest import REPO


def _scenario(**kw: object) -> object:
    raw = {"steps": [{"concurrency": 1}, 4, 8], "step_duration_s": 12, "warmup_s": 2}
    return parse_scenario({**raw, **kw}, file="s")


def test_plan_pairs_each_cells_blocks_and_balances_who_goes_first() -> None:
    sc = _scenario(interleave={"blocks": 4, "block_warmup_s": 1})
    blocks = plan_blocks(sc, ["baseline", "spec"])
    assert len(blocks) == 3 * 4 * 2 and [b.number for b in blocks] == list(range(24))
    assert {b.duration_s for b in blocks} == {3.0} and {b.warmup_s for b in blocks} == {1.0}
    for unit in range(12):  # a unit is one cell's k-th block of both conditions, adjacent
        pair = [b for b in blocks if b.unit == unit]
        assert len(pair) == 2 and pair[1].number == pair[0].number + 1
        assert {b.condition for b in pair} == {"baseline", "spec"}
        assert pair[0].cell == pair[1].cell and pair[0].k == pair[1].k
    firsts = Counter((b.cell, b.condition) for b in blocks[::2])
    assert set(firsts.values()) == {2}  # each condition first in half of each cell's units
    cells_in_order = [b.cell for b in blocks[::2]]
    assert cells_in_order != sorted(cells_in_order)  # shuffled, not a ladder


def test_plan_is_seeded_and_each_replicate_gets_its_own_order() -> None:
    sc = _scenario()
    a, b = plan_blocks(sc, ["x", "y"]), plan_blocks(sc, ["x", "y"])
    assert a == b
    assert plan_blocks(sc, ["x", "y"], salt=1) != a
    assert plan_blocks(_scenario(interleave={"seed": 7}), ["x", "y"]) != a


def test_block_overrides_cut_the_scenario_to_one_step() -> None:
    sc = _scenario()
    cells = cells_of(sc)
    blocks = plan_blocks(sc, ["x", "y"])
    closed = next(b for b in blocks if cells[b.cell].concurrency)
    assert block_overrides(closed, cells) == {
        "steps": [{"concurrency": 1}],
        "step_duration_s": 2.0,
        "warmup_s": 5.0,
        "repeats": 1,
        "interleave": {"block_warmup_s": 5.0},
    }
    cut = parse_scenario({**sc.to_dict(), **block_overrides(blocks[0], cells)}, file="s")
    assert len(cut.schedule()) == 1


def test_a_trace_scenario_cannot_be_interleaved(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        "".join(
            f'{{"timestamp": {t}, "input_length": 8, "output_length": 4}}\n' for t in (0, 60000)
        )
    )
    sc = parse_scenario({"arrival": "trace", "trace": str(trace), "steps": [1]}, file="s")
    with pytest.raises(ConfigError, match="arrival: trace"):
        cells_of(sc)


def _block_dir(root: Path, n: int, qps: float, ok: bool = True) -> Path:
    d = root / f"b{n}"
    d.mkdir()
    meta = {
        "label": "spec",
        "status": "completed" if ok else "degraded",
        "degraded": [] if ok else ["errors 10 % > 5 %"],
        "counts": {"sent": 2, "recorded": 2, "by_worker": {"local": {"sent": 2, "recorded": 2}}},
        "workers": ["local"],
        "started_at": 100.0 + n,
        "ended_at": 101.0 + n,
    }
    (d / "run.json").write_text(json.dumps(meta))
    (d / "steps.json").write_text(json.dumps([{"index": 0, "target_qps": qps, "start": 1.0}]))
    recs = [{"request_id": f"{n}-{i}", "step": 0, "repeat": 0, "target_qps": qps} for i in (0, 1)]
    (d / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs) + '{"partial')
    (d / "metrics.jsonl").write_text(json.dumps({"t": 1.0, "step": 0}) + "\n")
    (d / "locust.log").write_text(f"log of block {n}\n")
    (d / "telemetry.jsonl").write_text(json.dumps({"t": 100.0 + n, "source": "host"}) + "\n")
    return d


def test_merge_keeps_every_record_names_each_block_and_takes_the_worst_status(
    tmp_path: Path,
) -> None:
    sc = _scenario(interleave={"blocks": 2})
    blocks = [b for b in plan_blocks(sc, ["baseline", "spec"]) if b.condition == "spec"][:3]
    dirs = [_block_dir(tmp_path, b.number, 4.0, ok=i != 1) for i, b in enumerate(blocks)]
    never = tmp_path / "never"  # a block whose run never started
    out = tmp_path / "spec"
    status = merge_blocks(
        out,
        [*zip(blocks, dirs, strict=True), (blocks[0], never)],
        {"name": "s"},
        {"plan": []},
    )
    assert status == "degraded"
    recs = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    assert len(recs) == 6  # the partial line was never a record
    assert [r["block"] for r in recs] == [b.number for b in blocks for _ in (0, 1)]
    assert [r["step"] for r in recs] == [0, 0, 1, 1, 2, 2]
    assert [r["repeat"] for r in recs] == [b.k for b in blocks for _ in (0, 1)]
    steps = json.loads((out / "steps.json").read_text())
    assert [(s["index"], s["block"]) for s in steps] == [
        (i, b.number) for i, b in enumerate(blocks)
    ]
    meta = json.loads((out / "run.json").read_text())
    assert meta["counts"]["sent"] == 6 and meta["counts"]["by_worker"]["local"]["recorded"] == 6
    assert meta["degraded"][0].startswith(f"block {blocks[1].number + 1}: errors")
    assert "never ran" in meta["degraded"][-1]
    assert meta["interleave"] == {"plan": []} and meta["scenario"] == {"name": "s"}
    assert "log of block" in (out / "blocks.log").read_text()
    telemetry = [json.loads(x) for x in (out / "telemetry.jsonl").read_text().splitlines()]
    assert [t["block"] for t in telemetry] == [b.number for b in blocks]  # kept, per block
    assert not any(d.exists() for d in dirs)


SESSION = """\
name: interleave-test
max_tokens: 24
steps: [{concurrency: 1}, 6]
step_duration_s: 4
warmup_s: 0.5
max_concurrency: 32
metrics_interval_s: 1
request_timeout_s: 20
prompts:
  synthetic: {input_tokens: 64, count: 20, repetition: 1.0}
interleave: {blocks: 2, block_warmup_s: 0.5}
"""


@pytest.mark.slow
def test_an_interleaved_session_gives_each_condition_one_run_of_blocks(
    tmp_path: Path, sim_factory
) -> None:
    base = sim_factory("--profile", "tiny")
    spec = sim_factory(
        "--profile", "tiny", "--speculative-config", '{"method":"ngram","num_speculative_tokens":4}'
    )
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SESSION)
    out = tmp_path / "out"
    # the README's form: the spec label's flags declared by a --condition typed first; the
    # baseline is still the condition labelled baseline
    declare = ["--condition", 'spec=--speculative-config {"method":"ngram"}']
    proc = subprocess.run(
        [sys.executable, "-m", "specload", "sweep", "--interleave", "--scenario", str(scenario)]
        + [*declare, "--url", f"baseline={base.url}", "--url", f"spec={spec.url}"]
        + ["--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.splitlines()[0] == "[sweep] baseline: baseline; measured against it: spec"
    assert "[interleave] block 8/8" in proc.stdout
    design = None
    for name in ("baseline", "spec"):
        run = out / name
        meta = json.loads((run / "run.json").read_text())
        assert meta["status"] == "completed" and meta["label"] == name
        design = design or meta["interleave"]
        assert meta["interleave"] == design  # one plan, both runs
        recs = [json.loads(x) for x in (run / "requests.jsonl").read_text().splitlines()]
        mine = [b["number"] for b in design["plan"] if b["condition"] == name]
        assert sorted({r["block"] for r in recs}) == mine
        assert meta["counts"]["recorded"] == len(recs) == meta["counts"]["sent"]
        closed = [r for r in recs if r.get("concurrency")]
        assert closed and all(r["target_qps"] == 0 for r in closed)
        cols = load_run(run)
        stats = condition_steps(name, [cols], b=200)
        assert {s.target_qps for s in stats} >= {6.0}
        assert all(s.blocks == 2 for s in stats if s.target_qps == 6.0)
    assert not (out / ".blocks" / "r1").exists() or not any((out / ".blocks" / "r1").iterdir())
    report = json.loads((out / "report" / "report.json").read_text())
    assert report["baseline"] == "baseline"
    first = (out / "report" / "report.md").read_text().splitlines()[0]
    assert first == "## specload: spec vs baseline (the baseline)"
    assert np.isfinite(report["ratios"]["spec"]["tpot_p50"][-1]["value"])
    assert report["closed_loop"][0]["concurrency"] == 1  # closed-loop blocks compared too

"""Block-randomized A/B: the plan's balance, the split's bookkeeping, and one real session.

The session test runs ``specload sweep --interleave --url baseline=URL --url spec=URL``
against two real simulators (one with n-gram drafting) and reads what compare reads.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from specload.analysis.inputs.run_columns import load_run
from specload.analysis.statistics.steps import condition_steps
from specload.core.errors import ConfigError
from specload.protocol.interleave import (
    Round,
    blocks_so_far,
    cells_of,
    continues,
    next_round,
    plan_blocks,
    split_session,
)
from specload.scenario import parse_scenario
from tests.conftest import REPO
from tests.records import max_in_flight


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


def test_grouped_order_runs_a_cells_pairs_back_to_back_in_mirrored_order() -> None:
    """``order: grouped``: each cell's units in a row, A B then B A, so a server runs two
    blocks of one cell in a row (the second ``continues`` the first) at every unit edge."""
    sc = _scenario(interleave={"blocks": 4, "order": "grouped"})
    blocks = plan_blocks(sc, ["baseline", "spec"])
    cells = [b.cell for b in blocks]
    assert sorted(set(cells)) == [0, 1, 2]
    assert all(len(set(cells[i : i + 8])) == 1 for i in range(0, 24, 8))  # a cell at a time
    for i in range(0, 24, 8):
        run = blocks[i : i + 8]
        assert [b.k for b in run] == [0, 0, 1, 1, 2, 2, 3, 3]
        a, b = run[0].condition, run[1].condition
        assert [x.condition for x in run] == [a, b, b, a, a, b, b, a]  # mirrored: ABBA ABBA
    edges = [continues(p, b) for p, b in zip(blocks, blocks[1:], strict=False)]
    assert (
        sum(edges) == 3 * 3
    )  # every edge between a cell's units, none inside one or between cells
    assert not any(edges[i] for i in range(0, 23, 2))  # never inside a unit
    assert not continues(None, blocks[0])
    firsts = Counter((b.cell, b.condition) for b in blocks[::2])
    assert set(firsts.values()) == {2}  # each condition first in half of each cell's units
    spread = plan_blocks(_scenario(interleave={"blocks": 4}), ["baseline", "spec"])
    assert sum(continues(p, b) for p, b in zip(spread, spread[1:], strict=False)) < 9
    later = Round(1, {2: 2}, {2: 4}, 24, 12)  # a later round keeps the mirrored order going
    more = plan_blocks(sc, ["baseline", "spec"], later=later)
    c = [b.condition for b in more]
    assert [b.k for b in more] == [4, 4, 5, 5] and c == [c[0], c[1], c[1], c[0]]
    assert c[0] != c[1]


def test_plan_is_seeded_and_each_replicate_gets_its_own_order() -> None:
    sc = _scenario()
    a, b = plan_blocks(sc, ["x", "y"]), plan_blocks(sc, ["x", "y"])
    assert a == b
    assert plan_blocks(sc, ["x", "y"], salt=1) != a
    assert plan_blocks(_scenario(interleave={"seed": 7}), ["x", "y"]) != a


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


def _session_dir(root: Path) -> Path:
    """A session's run dir as ``locust/blocks.py`` leaves it: blocks 0 (baseline) and 1 (spec)."""
    d = root / ".session" / "r1"
    d.mkdir(parents=True)
    plan = [
        {"number": 0, "condition": "baseline", "k": 0},
        {"number": 1, "condition": "spec", "k": 0},
    ]
    meta = {
        "label": "interleaved-session",
        "status": "completed",
        "target": {"url": "http://a", "model": "m"},
        "counts": {"sent": 5, "recorded": 5, "sent_by_condition": {"baseline": 3, "spec": 2}},
        "interleave": {
            "plan": plan,
            "targets": {"baseline": {"url": "http://a"}, "spec": {"url": "http://b"}},
        },
    }
    (d / "run.json").write_text(json.dumps(meta))
    steps = [{"index": n, "block": n, "condition": c} for n, c in ((0, "baseline"), (1, "spec"))]
    (d / "steps.json").write_text(json.dumps(steps))
    recs = [("baseline", 0), ("baseline", 0), ("spec", 1), ("spec", 1), (None, 0)]
    lines = [json.dumps({"request_id": str(i), "condition": c, "block": b, "step": b})
             for i, (c, b) in enumerate(recs)]  # fmt: skip
    (d / "requests.jsonl").write_text("\n".join(lines) + '\n{"partial')
    (d / "metrics.jsonl").write_text(
        "".join(json.dumps({"t": t, "step": t}) + "\n" for t in (0, 1, None))  # type: ignore[misc]
    )
    (d / "telemetry.jsonl").write_text(json.dumps({"t": 1.0, "source": "host"}) + "\n")
    return d


def test_a_session_splits_into_one_run_dir_per_condition_with_records_unchanged(
    tmp_path: Path,
) -> None:
    session = _session_dir(tmp_path)
    written = [json.loads(x) for x in (session / "requests.jsonl").read_text().splitlines()[:5]]
    dirs = {"baseline": tmp_path / "baseline", "spec": tmp_path / "spec"}
    assert split_session(session, dirs) == {"baseline": "completed", "spec": "completed"}
    for label, blocks in (("baseline", [0]), ("spec", [1])):
        recs = [json.loads(x) for x in (dirs[label] / "requests.jsonl").read_text().splitlines()]
        assert recs == [r for r in written if r["condition"] == label]  # as written
        metrics = (dirs[label] / "metrics.jsonl").read_text().splitlines()
        assert [json.loads(x)["step"] for x in metrics] == blocks
        steps = json.loads((dirs[label] / "steps.json").read_text())
        assert [x["block"] for x in steps] == blocks
        assert (dirs[label] / "telemetry.jsonl").is_file()
        meta = json.loads((dirs[label] / "run.json").read_text())
        assert meta["label"] == label
        assert meta["target"]["url"] == {"baseline": "http://a", "spec": "http://b"}[label]
        counts = meta["counts"]
        assert counts["recorded"] == 2 and counts["sent"] == {"baseline": 3, "spec": 2}[label]
        assert counts["unrecorded"] == {"baseline": 1, "spec": 0}[label]
        assert counts["unassigned"] == 1  # the record with no condition: counted, not dropped
    assert not session.exists()


def test_a_later_round_adds_blocks_at_its_cells_numbered_on_from_the_last() -> None:
    """``--until-decided``'s round: only the cells it names, k and numbers continuing, so
    its blocks pair with each other and never with a block of an earlier round."""
    sc = _scenario(interleave={"blocks": 2, "block_warmup_s": 1})
    first = plan_blocks(sc, ["baseline", "spec"])
    design = {"plan": [
        {"number": b.number, "unit": b.unit, "condition": b.condition, "cell": b.cell, "k": b.k}
        for b in first
    ]}  # fmt: skip
    later = next_round(design, {2: 3}, index=1)
    assert later == Round(1, {2: 3}, {2: 2}, first_block=12, first_unit=6)
    assert Round.from_json(json.loads(json.dumps(later.to_json()))) == later
    more = plan_blocks(sc, ["baseline", "spec"], later=later)
    assert [b.number for b in more] == list(range(12, 18))
    assert blocks_so_far(first) == 12 and blocks_so_far(more) == 18  # progress: block 13/18
    assert {b.cell for b in more} == {2} and sorted({b.k for b in more}) == [2, 3, 4]
    assert sorted({b.unit for b in more}) == [6, 7, 8]
    for unit in (6, 7, 8):
        assert {b.condition for b in more if b.unit == unit} == {"baseline", "spec"}


def test_a_later_rounds_session_adds_to_the_run_dirs_of_the_earlier(tmp_path: Path) -> None:
    dirs = {"baseline": tmp_path / "baseline", "spec": tmp_path / "spec"}
    split_session(_session_dir(tmp_path), dirs)
    second = _session_dir(tmp_path)  # the same files again, standing in for round 2
    meta = json.loads((second / "run.json").read_text())
    for b in meta["interleave"]["plan"]:
        b["number"] += 2
    meta["status"] = "interrupted"
    (second / "run.json").write_text(json.dumps(meta))
    split_session(second, dirs)
    for label in dirs:
        recs = (dirs[label] / "requests.jsonl").read_text().splitlines()
        assert len(recs) == 4  # two rounds of two
        merged = json.loads((dirs[label] / "run.json").read_text())
        assert merged["interleave"]["rounds"] == 2
        assert [b["number"] for b in merged["interleave"]["plan"]] == [0, 1, 2, 3]
        assert merged["counts"]["recorded"] == 4 and merged["status"] == "interrupted"
        # the session's own counts speak for both rounds, as the condition's do
        session = merged["counts"]["session"]
        assert session["sent"] == 10 and session["sent_by_condition"] == {"baseline": 6, "spec": 4}
        assert len(json.loads((dirs[label] / "steps.json").read_text())) == 2
        assert len((dirs[label] / "telemetry.jsonl").read_text().splitlines()) == 2


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


def _sweep(
    scenario: Path, urls: list[str], out: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    """``specload sweep --interleave`` of ``scenario`` against the baseline and spec servers
    at ``urls``, into ``out``; it must exit 0."""
    proc = subprocess.run(
        [sys.executable, "-m", "specload", "sweep", "--interleave", "--scenario", str(scenario)]
        + [*extra, "--url", f"baseline={urls[0]}", "--url", f"spec={urls[1]}", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


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
    # a master and two workers share each block
    proc = _sweep(scenario, [base.url, spec.url], out, *declare, "--processes", "2")
    assert proc.stdout.splitlines()[0] == "[sweep] baseline: baseline; measured against it: spec"
    assert re.search(r"^block 8/8 \((baseline|spec)\): .* min left$", proc.stdout, re.M)
    assert re.search(
        r"^\[interleave\] wall time: .* measured .* of the .*-s block phase", proc.stdout, re.M
    )
    design = None
    steps: dict[int, dict] = {}
    measured: dict[int, list[dict]] = {}
    served_until: dict[int, float] = {}  # each block's last request in, cool-down's too
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
        assert {r["condition"] for r in recs} == {name}  # written with its condition
        assert len({r["worker"] for r in recs if not r["warmup"]}) == 2
        steps |= {x["block"]: x for x in json.loads((run / "steps.json").read_text())}
        for r in recs:
            if not r["warmup"]:
                measured.setdefault(r["block"], []).append(r)
            served_until[r["block"]] = max(served_until.get(r["block"], 0.0), r["done_at"])
        closed = [r for r in recs if r.get("concurrency")]
        assert closed and all(r["target_qps"] == 0 for r in closed)
        cols = load_run(run)
        stats = condition_steps(name, [cols], b=200)
        assert {s.target_qps for s in stats} >= {6.0}
        assert all(s.blocks == 2 for s in stats if s.target_qps == 6.0)
    assert not (out / ".session").exists()  # split into the conditions' run dirs
    assert sorted(steps) == list(range(8))
    for n, recs in measured.items():  # every measured request done before the load moved on
        last_done = max(r["done_at"] for r in recs)
        assert last_done <= steps[n]["cooldown_end"]
        if n + 1 in steps:
            assert steps[n + 1]["start"] >= last_done
            # the next window opens once this block's server has nothing in flight
            assert steps[n + 1]["warmup_end"] >= served_until[n]
    # each block draws its own arrivals; the two conditions' blocks of a unit the same draw
    open_loop = [b for b in design["plan"] if design["cells"][b["cell"]]["concurrency"] == 0]
    draws = {
        (b["condition"], b["k"]): [
            round(r["scheduled_at"] - steps[b["number"]]["warmup_end"], 3)
            for r in sorted(measured[b["number"]], key=lambda r: r["scheduled_at"])
        ]
        for b in open_loop
    }
    assert draws[("baseline", 0)] == draws[("spec", 0)] != draws[("baseline", 1)]
    report = json.loads((out / "report" / "report.json").read_text())
    assert report["baseline"] == "baseline"
    split = report["time_split"]["1"]  # where the session's wall time went, as run.json has it
    assert split == design["time_split"] and 0 < split["measured_s"] < split["block_phase_s"]
    first = (out / "report" / "report.md").read_text().splitlines()[0]
    assert first == "## specload: spec vs baseline (the baseline)"
    assert np.isfinite(report["ratios"]["spec"]["tpot_p50"][-1]["value"])
    assert report["closed_loop"][0]["concurrency"] == 1  # closed-loop blocks compared too


@pytest.mark.slow
def test_a_grouped_session_runs_a_servers_two_blocks_as_one_load(
    tmp_path: Path, sim_factory
) -> None:
    """``order: grouped``: where a server runs two blocks of a step in a row, the second's
    window opens at the first's end with no warm-up, the first's measured requests finish
    under the second's load, a closed-loop step never has more than N in flight, and the
    wall-time split counts that overlap as measured, not as cool-down."""
    urls = [sim_factory("--profile", "tiny").url for _ in range(2)]
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        SESSION.replace("{concurrency: 1}", "{concurrency: 3}").replace(
            "block_warmup_s: 0.5}", "block_warmup_s: 0.5, order: grouped}"
        )
    )
    out = tmp_path / "out"
    _sweep(scenario, urls, out)
    steps: dict[int, dict] = {}
    recs: dict[int, list[dict]] = {}
    for name in ("baseline", "spec"):
        meta = json.loads((out / name / "run.json").read_text())
        assert meta["counts"]["recorded"] == meta["counts"]["sent"]
        steps |= {x["block"]: x for x in json.loads((out / name / "steps.json").read_text())}
        for line in (out / name / "requests.jsonl").read_text().splitlines():
            r = json.loads(line)
            recs.setdefault(r["block"], []).append(r)
        closed = [r for rs in recs.values() for r in rs if r["condition"] == name]
        closed = [r for r in closed if r.get("concurrency")]
        assert max_in_flight(closed) == 3  # N, never N of each block
    plan = meta["interleave"]["plan"]
    assert meta["interleave"]["order"] == "grouped"
    pairs = [(a, b) for a, b in zip(plan, plan[1:], strict=False)
             if (a["condition"], a["cell"]) == (b["condition"], b["cell"])]  # fmt: skip
    assert len(pairs) == 2  # one per cell: A B B A
    overlap = 0.0
    for a, b in pairs:
        first, second = steps[a["number"]], steps[b["number"]]
        assert second["start"] == second["warmup_end"] == first["end"]  # no warm-up, no gap
        measured = [r for r in recs[a["number"]] if not r["warmup"]]
        assert not any(r.get("cooldown") for r in recs[a["number"]])  # the next took over
        assert max(r["done_at"] for r in measured) <= first["cooldown_end"]
        assert min(r["scheduled_at"] for r in recs[b["number"]]) >= first["end"]
        overlap += first["cooldown_end"] - first["end"]
    split = meta["interleave"]["time_split"]
    cool = sum(x["cooldown_end"] - x["end"] for x in steps.values())
    assert split["cooldown_s"] == pytest.approx(cool - overlap, abs=1e-6)
    assert split["measured_s"] == pytest.approx(
        sum(x["end"] - x["warmup_end"] for x in steps.values())
    )


def test_the_sessions_first_line_counts_no_warm_up_for_a_continued_block(tmp_path: Path) -> None:
    """``describe``'s estimate: a grouped step of 4 pairs has 5 warm-ups (A B B A A B B A),
    not 8: the blocks that continue their server's load add only their window."""
    from types import SimpleNamespace

    from specload.protocol.interleaved_sweep import BLOCK_OVERHEAD_S, describe

    path = tmp_path / "s.yaml"
    path.write_text(
        "steps: [4, 8]\nstep_duration_s: 24\n"
        "interleave: {blocks: 4, block_warmup_s: 2, order: grouped}\n"
    )
    plan = SimpleNamespace(
        scenario=path, conditions=[SimpleNamespace(name=n) for n in ("baseline", "spec")],
        replicates=1,
    )  # fmt: skip
    minutes = 2 * (4 * 2 * 6 + 5 * (2 + BLOCK_OVERHEAD_S)) / 60
    assert describe(plan) == (  # type: ignore[arg-type]
        f"[interleave] 16 blocks per session (baseline, spec), about {minutes:.1f} min each, "
        "1 session(s)"
    )

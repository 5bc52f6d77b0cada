"""The GPU kit's usage, its reference client's request counts, and its interleaved mode end to
end on two simulators (MODE=starts with vLLM's own client runs in
tests/vllm/test_gpu_kit_dry_run.py)."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from specload.core.procgroup import group_alive
from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks" / "gpu"))
import kit


def _run_kit(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "benchmarks/gpu/run.sh", *args],
        cwd=REPO,
        text=True,
        capture_output=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", **env},
        check=False,
    )


def test_help_lists_the_knobs_and_a_wrong_argument_is_refused() -> None:
    helped = _run_kit("--help")
    assert helped.returncode == 0
    for knob in ("--dry-run", "REPLICATES", "TARGET", "SPEC_CONFIG", "SITE", "BENCH_S",
                 "UNTIL_DECIDED"):  # fmt: skip
        assert knob in helped.stdout
    wrong = _run_kit("--gpu")
    assert wrong.returncode == 2 and "usage: bash benchmarks/gpu/run.sh" in wrong.stderr


def test_an_earlier_run_is_never_overwritten(tmp_path) -> None:
    out = tmp_path / "kit"
    out.mkdir()
    (out / "keep.txt").write_text("earlier")
    res = _run_kit("--dry-run", OUT=str(out))
    assert res.returncode == 2 and "already holds files" in res.stderr
    assert (out / "keep.txt").read_text() == "earlier" and len(list(out.iterdir())) == 1


def test_reference_request_counts_are_the_calibrations() -> None:
    """vLLM's bench serve at rate R sent min(max(32, 20 R), 800) prompts in the calibration;
    the kit sends the same counts, so its reference is the calibration's load."""
    data = json.loads(
        (REPO / "benchmarks" / "data" / "h200-vllm0.26-llama8b-draft1b.json").read_text()
    )
    for row in data["rows"]:
        assert kit.num_prompts(row["rate_rps"], 20, 32) == row["completed"] + row["failed"], row


def test_until_decided_hands_the_sweep_its_budget_and_lets_it_compare() -> None:
    """UNTIL_DECIDED=S: the sweep runs --until-decided --budget-s S, and compares itself (it
    must: each look is a comparison); without it the sweep leaves comparing to run.sh."""
    base = {"spec_declared": "{}", "specload": "specload", "scenario": "s.yaml", "out": "o"}
    urls = {"baseline": "http://b", "spec": "http://s"}
    until = kit.interleaved_sweep_argv(argparse.Namespace(**base, until_decided=600.0), urls)
    assert until[-3:] == ["--until-decided", "--budget-s", "600"]
    assert "--no-compare" not in until
    plain = kit.interleaved_sweep_argv(argparse.Namespace(**base, until_decided=0.0), urls)
    assert plain[-1] == "--no-compare" and "--until-decided" not in plain


def test_an_aa_check_declares_no_speculation_for_either_server() -> None:
    """SPEC_CONFIG=off (an A/A check: both servers the baseline) must not declare a config the
    second server does not run: its run.json would then call it speculative."""
    base = {"specload": "specload", "scenario": "s.yaml", "out": "o", "until_decided": 0.0}
    urls = {"baseline": "http://b", "spec": "http://s"}
    argv = kit.interleaved_sweep_argv(argparse.Namespace(**base, spec_declared="off"), urls)
    conditions = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--condition"]
    assert conditions == [
        f"{cond}=--speculative-config '{{}}' --no-enable-prefix-caching"
        for cond in ("baseline", "spec")
    ]


@pytest.mark.slow
def test_interleaved_dry_run_leaves_merged_blocks_the_plan_and_a_report(tmp_path: Path) -> None:
    """MODE=interleaved (the default) on two simulators, both up at once, the spec one with the
    calibrated fast/slow regime: one interleaved sweep, both servers stopped, compared, packed.
    Two cells (one closed-loop) x 2 conditions x 2 blocks keep it near a minute."""
    out = tmp_path / "kit"
    env = os.environ | {
        "PY": sys.executable,
        "OUT": str(out),
        "STEPS": "{concurrency: 1}, 8",
        "STEP_S": "2",
        "BLOCKS": "2",
        "BLOCK_WARMUP_S": "1",
    }
    proc = subprocess.Popen(
        ["bash", "benchmarks/gpu/run.sh", "--dry-run"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        log, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # kit.py stops both servers on SIGTERM
            proc.wait(timeout=60)
    assert proc.returncode == 0, log[-4000:]
    assert "mode=interleaved" in log

    sweep = out / "sweep"
    for cond in ("baseline", "spec"):
        run = sweep / cond
        meta = json.loads((run / "run.json").read_text())
        plan = meta["interleave"]["plan"]
        assert meta["interleave"]["blocks_per_cell"] == 2 and len(plan) == 8
        assert meta["interleave"]["order"] == "grouped"  # the scenario's, kept by BLOCKS
        records = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
        assert records and all("block" in r for r in records)
        mine = {b["number"] for b in plan if b["condition"] == cond}
        assert {r["block"] for r in records} == mine
        assert (run / "telemetry.jsonl").is_file(), f"{cond}: no telemetry.jsonl"
        server_log = (out / "servers" / f"{cond}.log").read_text()
        pgid = int(re.search(r"process group (\d+)", server_log).group(1))  # type: ignore[union-attr]
        assert not group_alive(pgid), f"the kit left the {cond} server running"

    report = json.loads((sweep / "report" / "report.json").read_text())
    conds = {c["label"]: c for c in report["conditions"]}
    assert conds["baseline"]["role"] == "baseline" and conds["spec"]["role"] == "spec"
    assert conds["spec"]["speculative"]["method"] == "draft_model"
    with tarfile.open(f"{out}.tar.gz") as tar:
        names = set(tar.getnames())
    assert {"kit/sweep/report/report.json", "kit/sweep/spec/requests.jsonl"} <= names
    assert {"kit/servers/baseline.log", "kit/servers/spec.log"} <= names


def _report(changes: dict[str, tuple[float, float, float, str]]) -> dict[str, object]:
    """A report.json reduced to what sessions_table reads: closed-loop and QPS ratios."""
    ratios = []
    closed = []
    for step, (v, lo, hi, effect) in changes.items():
        cell = {"value": v, "lo": lo, "hi": hi, "effect": effect}
        if step.startswith("c="):
            closed.append({"concurrency": int(step[2:]), "ratios": {"spec": {"tpot_p50": cell}}})
        else:
            ratios.append({"target_qps": float(step), **cell})
    return {"closed_loop": closed, "ratios": {"spec": {"tpot_p50": ratios}}}


def test_sessions_table_reads_a_single_run_sweep_and_one_run_per_block(tmp_path: Path) -> None:
    """A single-run sweep writes no blocks.log and derives its warm-ups (block_warmup_s None):
    its blocks are its records' distinct ``block``; the older sweep counts blocks.log headers."""
    import sessions_table

    single = tmp_path / "single"
    single.mkdir()
    rows = [{"block": b} for b in (0, 1, 1, 3)]
    (single / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    per_block = tmp_path / "per-block"
    per_block.mkdir()
    (per_block / "blocks.log").write_text("===== block 1\nx\n===== block 2\n")
    assert sessions_table._blocks_run(single) == 3
    assert sessions_table._blocks_run(per_block) == 2
    plan = {"seed": 7, "block_s": 6.0, "block_warmup_s": None}
    assert "warm-ups derived from each cell's p50 E2E" in sessions_table.plan_words(plan)
    assert "5 s warm-up" in sessions_table.plan_words({**plan, "block_warmup_s": 5.0})


def test_sessions_agree_by_the_effect_at_each_step_not_by_a_status() -> None:
    """Two sessions agree at a step only when both give it the same effect; 'inside' asks
    each estimate to lie in the other's CI (benchmarks/gpu/sessions_table.py)."""
    import sessions_table

    one = _report({"c=1": (0.91, 0.7, 1.4, "undecided"), "4": (0.80, 0.75, 0.86, "helps")})
    two = _report({"c=1": (0.94, 0.8, 1.5, "undecided"), "4": (0.97, 0.90, 1.10, "undecided")})
    rows = [r for r in sessions_table.table(["s1", "s2"], [one, two], "tpot_p50") if "|" in r]
    by_step = {r.split("|")[1].strip(): r for r in rows[2:]}
    assert by_step["c=1"].rstrip(" |").endswith("yes | yes")
    assert "**no** | no" in by_step["4 req/s"]  # helps vs no change; 0.80 outside 0.90-1.10

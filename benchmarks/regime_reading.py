"""Does the report read the regime right? The simulator's known regime against the reading.

The issue "Same windows, same answer" asks the report to flag a speculative step that flips
between a fast and a slow level in time (``regimes`` in report.json: ``bimodal``,
``slow_share``) with a slow share near the truth. On the simulator the truth is known: the
calibrated time regime (``--spec-regime calibrated``: fast and slow windows of exponential
length, means 4.7 s and 3.2 s, a long-run slow share of 0.405) is a seeded function of time.

For each seed, one interleaved session of a scenario runs on the virtual clock (both servers
up at once, the blocks of ``plan_blocks`` in order, each block's window simulated from the
session second it starts at): the spec server with the regime (regime seed = the seed), the
baseline without. Records keep their chunk gaps (``itl_s``) and steps.json the blocks'
measured windows, so ``analysis/diagnostics/regimes.py`` reads them as it reads a real run. The truth per
step: the share of the spec blocks' measured seconds that the regime spent mostly (> half)
slow. Reported per scenario and step: how often the step is flagged bimodal, the median
reading and truth, the reading's error (median and 90th percentile of |reading - truth|), and
how often the flat baseline is flagged (a false alarm).

No wall clock: the virtual driver is exact and repeatable, so a busy machine changes nothing.

Usage: python benchmarks/regime_reading.py [--seeds N] [--workers N] [--scenario NAME ...]
Results: benchmarks/results/regime_reading.md and .json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import zlib
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent))  # virtual.py, beside this file

from virtual import VirtualRun, run_closed, run_poisson

from specload.analysis.diagnostics.regimes import find_regimes
from specload.analysis.inputs.run_columns import load_runs
from specload.cli.demo import SPEC_CONFIGS
from specload.core.condition import parse_condition
from specload.core.records import RequestRecord
from specload.protocol.interleave import Block, Cell, cells_of, plan_blocks
from specload.scenario import Scenario, load_scenario
from specload.sim.engine import EngineConfig
from specload.sim.host import HostDraw, draw_host
from specload.sim.profiles import load_profile
from specload.sim.regime import RegimeParams, TimeRegime
from specload.sim.spec import parse_spec_config

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results"
PROFILE = "h200-llama8b"
SPEC = SPEC_CONFIGS[PROFILE]
#: The two interleaved scenarios a user meets: the H200 validation's and the demo's.
SCENARIOS = {
    "gpu-h200-interleaved": ROOT / "scenarios" / "gpu-h200-interleaved.yaml",
    "interleaved-demo": ROOT / "scenarios" / "interleaved-demo.yaml",
}
LABELS = ("baseline", "spec")
#: The unix second the virtual session clock starts at (whole, so seconds bin alike).
T0 = 1_800_000_000.0
#: Seconds between a block's last request and the next block (a block's own overhead).
BLOCK_GAP_S = 1.0
INPUT_TOKENS = 512


def _host(label: str, seed: int) -> HostDraw:
    if label != "spec":
        return HostDraw()
    params = RegimeParams.from_profile(load_profile(PROFILE))
    return draw_host(regime=params, regime_seed=seed)


def _window(sc: Scenario, label: str, seed: int, cell: Cell, b: Block, t: float) -> VirtualRun:
    host = _host(label, seed)
    rng_seed = zlib.crc32(f"{label}:{seed}:{b.number}".encode())
    cfg = EngineConfig(  # the engine's draws seeded per block too (``coverage._window``)
        load_profile(PROFILE),
        parse_spec_config(SPEC) if label == "spec" else None,
        host=host,
        seed=rng_seed,
    )
    span = b.warmup_s + b.duration_s
    out = sc.max_tokens or 256
    if cell.concurrency:
        return run_closed(
            cfg, cell.concurrency, duration_s=span, input_len=INPUT_TOKENS, output_len=out,
            seed=rng_seed, t0=t, host=host,
        )  # fmt: skip
    n = max(4, round(cell.target_qps * span))
    return run_poisson(cfg, cell.target_qps, n, INPUT_TOKENS, out, rng_seed, t0=t, host=host)


def _records(run: VirtualRun, cell: Cell, b: Block, tag: str) -> list[dict[str, Any]]:
    """The block's requests as specload records, chunk gaps included (session clock + T0)."""
    out = []
    end = run.t0 + b.warmup_s + b.duration_s
    for i, r in enumerate(run.results):
        if r.arrival >= end or r.output_tokens < 2 or len(r.chunk_times) < 2:
            continue
        sent = T0 + r.arrival
        rec = RequestRecord(
            request_id=f"{tag}-{i}", worker="local", step=b.number, target_qps=cell.target_qps,
            warmup=r.arrival < run.t0 + b.warmup_s, scheduled_at=sent, sent_at=sent,
            first_token_at=T0 + r.first_token_at, done_at=T0 + r.done_at, ttft_s=r.ttft_s,
            tpot_s=r.tpot_s, e2e_s=r.e2e_s, content_chunks=len(r.chunk_times),
            prompt_tokens=INPUT_TOKENS, output_tokens=r.output_tokens, tokens_source="usage",
            finish_reason="length", status=200, ok=True, repeat=b.k, block=b.number,
            concurrency=cell.concurrency or None,
        ).to_dict()  # fmt: skip
        rec["itl_s"] = np.diff(np.asarray(r.chunk_times)).tolist()
        out.append(rec)
    return out


def _write(path: Path, label: str, recs: list[dict[str, Any]], steps: list[dict[str, Any]]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    with (path / "requests.jsonl").open("w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in recs)
    (path / "steps.json").write_text(json.dumps(steps))
    meta = {
        "schema_version": 1, "run_id": path.name, "label": label, "replicate": 1,
        "condition": parse_condition(f"{label}=").as_json()
        | {"speculative": SPEC if label == "spec" else None},
        "target": {"url": "virtual", "model": "llama-8b", "server_version": "0.26.0"},
        "scenario": {"name": "regime-reading"}, "status": "completed",
    }  # fmt: skip
    (path / "run.json").write_text(json.dumps(meta))
    return path


def _truth_share(regime: TimeRegime, windows: list[tuple[float, float]]) -> float:
    """Share of the windows' whole seconds (session clock) the regime spent mostly slow."""
    slow = total = 0
    for lo, hi in windows:
        for s in range(math.ceil(lo), math.floor(hi)):
            total += 1
            slow += regime.slow_share_between(float(s), float(s + 1)) > 0.5
    return slow / total if total else float("nan")


def one_session(args: tuple[str, int]) -> dict[str, Any]:
    """One seeded session of one scenario: the reading and the truth per step."""
    name, seed = args
    sc = load_scenario(SCENARIOS[name], overrides={"seed": seed})
    cells = cells_of(sc)
    recs: dict[str, list[dict[str, Any]]] = {lb: [] for lb in LABELS}
    steps: dict[str, list[dict[str, Any]]] = {lb: [] for lb in LABELS}
    windows: dict[str, list[tuple[float, float]]] = {c.label: [] for c in cells}
    t = 0.0
    for b in plan_blocks(sc, list(LABELS)):
        cell = cells[b.cell]
        run = _window(sc, b.condition, seed, cell, b, t)
        recs[b.condition] += _records(run, cell, b, f"{b.condition}-{b.number}")
        lo, hi = t + b.warmup_s, t + b.warmup_s + b.duration_s
        steps[b.condition].append(
            {"index": b.number, "start": T0 + t, "warmup_end": T0 + lo, "end": T0 + hi}
        )
        if b.condition == "spec":
            windows[cell.label].append((lo, hi))
        t = max(hi, run.end_s) + BLOCK_GAP_S
    regime = _host("spec", seed).regime
    assert regime is not None
    with TemporaryDirectory() as tmp:
        dirs: list[str | Path] = [_write(Path(tmp) / lb, lb, recs[lb], steps[lb]) for lb in LABELS]
        groups = {run.label: [run] for run in load_runs(dirs)}
        every = find_regimes(groups, "baseline").by_condition
    found, base = every["spec"], every["baseline"]
    out = {}
    for cell in cells:
        key = (
            ("concurrency", float(cell.concurrency))
            if cell.concurrency
            else ("qps", cell.target_qps)
        )
        r = found.get(key)
        out[cell.label] = {
            "truth": _truth_share(regime, windows[cell.label]),
            "reading": None if r is None else r.slow_share,
            "bimodal": bool(r is not None and r.bimodal),
            "seconds": 0 if r is None else r.seconds,
            "baseline_bimodal": bool(key in base and base[key].bimodal),
        }
    return {"scenario": name, "seed": seed, "steps": out}


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per scenario and step: bimodal rate, median reading and truth, |error| median / p90."""
    out: dict[str, Any] = {}
    for name in dict.fromkeys(r["scenario"] for r in rows):
        mine = [r for r in rows if r["scenario"] == name]
        out[name] = {}
        for step in mine[0]["steps"]:
            cells = [r["steps"][step] for r in mine]
            truth = np.array([c["truth"] for c in cells])
            read = np.array([c["reading"] if c["reading"] is not None else np.nan for c in cells])
            err = np.abs(read - truth)
            out[name][step] = {
                "seeds": len(cells),
                "bimodal_rate": float(np.mean([c["bimodal"] for c in cells])),
                "truth_median": float(np.nanmedian(truth)),
                "reading_median": float(np.nanmedian(read)),
                "abs_error_median": float(np.nanmedian(err)),
                "abs_error_p90": float(np.nanquantile(err, 0.9)),
                "bias": float(np.nanmean(read - truth)),
                "seconds_median": float(np.median([c["seconds"] for c in cells])),
                "baseline_bimodal_rate": float(np.mean([c["baseline_bimodal"] for c in cells])),
            }
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# Regime reading against the simulator's truth (benchmarks/regime_reading.py)",
        "",
        f"Simulator `{PROFILE}` with the calibrated time regime on the spec server (long-run "
        f"slow share {RegimeParams.from_profile(load_profile(PROFILE)).slow_share:.3f}), "
        f"{result['seeds']} seeds per scenario, one interleaved session each on the virtual "
        "clock. Truth: the share of the spec blocks' measured seconds the regime spent mostly "
        "slow. Reading: report.json `regimes` (`slow_share`, `bimodal`) by today's rule.",
        "",
        "| scenario | step | seconds read | flagged bimodal | truth (median) | reading (median) "
        "| bias | abs error median | abs error p90 | baseline flagged |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, steps in result["summary"].items():
        for step, s in steps.items():
            lines.append(
                f"| {name} | {step} | {s['seconds_median']:.0f} | {s['bimodal_rate'] * 100:.0f} % "
                f"| {s['truth_median']:.2f} | {s['reading_median']:.2f} | {s['bias']:+.2f} "
                f"| {s['abs_error_median']:.2f} | {s['abs_error_p90']:.2f} "
                f"| {s['baseline_bimodal_rate'] * 100:.0f} % |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    names = a.scenario or list(SCENARIOS)
    jobs = [(n, s) for n in names for s in range(1, a.seeds + 1)]
    rows: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=a.workers) as pool:
        for i, row in enumerate(pool.map(one_session, jobs), 1):
            rows.append(row)
            print(f"[regime_reading] {i}/{len(jobs)} {row['scenario']} seed {row['seed']}",
                  file=sys.stderr, flush=True)  # fmt: skip
    result = {"seeds": a.seeds, "summary": summarise(rows), "sessions": rows}
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "regime_reading.json").write_text(json.dumps(result, indent=1))
    text = markdown(result)
    (a.out / "regime_reading.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

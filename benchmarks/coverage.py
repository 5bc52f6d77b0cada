"""Do compare's intervals mean what they say? Coverage measured on the simulator, whose truth is
known.

Many seeded sessions of each *design* on the calibrated simulator profile (``h200-llama8b``:
vLLM 0.26 on one H200, Llama-8B-shaped target with a 1B draft, ``draft_model`` k = 4), in
virtual time (``benchmarks/virtual.py``, the engine model the simulator serves), each turned
into real run directories and read by compare's own analysis (``analysis.statistics.steps``,
``ratios``, ``crossover``), against the truth:

- **designs**: ``contiguous`` (today's ladder: per server start, each condition walks the
  ladder once, 12 s warm-up + 60 s per step, on a start of its own) with 1, 2, 3 or 5 starts
  per condition pooled; ``interleaved`` (``sweep --interleave``: both servers up at once, each
  step's 60 s cut into 6 blocks of 10 s after 2 s of warm-up, in the seeded balanced order of
  ``protocol/interleave.py``, 3 s between blocks for the block run's start) with 1, 2 or 3
  sessions. Equal server time per step and condition: 72 s.
- **with and without the time regime**: the speculative step's host-bound part alternates
  fast and slow windows (``--spec-regime calibrated``, fitted to the H200 records: mean fast
  4.1 s, slow 2.3 s, factor 2.35 on the launch-bound part). Every server start also draws
  the calibrated per-start host factor and slow window (``--start-jitter calibrated``), as
  real starts differ.
- **truth** per step: the p50 TPOT ratio spec / baseline pooled over ``TRUTH_STARTS`` starts
  x ``TRUTH_S`` seconds each, after the designs' warm-up (the population of starts and
  seconds a decision about a new start is about), and the crossover the product's own
  interpolation puts between those true ratios. The deciding CI says it is about the
  server starts measured (one or more, their units pooled: ``steps._latency``), so it is
  scored against those starts' **own truth**: each start's ratio of the conditions' p50
  over ``OWN_S`` seconds per cell on that start's own host draw, far from the seconds the
  design measured (its steady state), and for k starts the mean of their log ratios; how
  often it held the population's truth is reported beside it. In a world whose starts do
  not differ (``regime``) a start's steady state is the population's truth, and that is
  what it is scored against (``own_truth`` says why not a 600-s estimate of it). From three starts, the
  interval about this config (over the starts, ``RatioRow.config_ratio``) is scored
  against the population's truth.

Reported per (regime, design, starts) and step: coverage of the 95 % CI of the ratio, its
median width, how often the step's answer by the one rule (helps / hurts / no change) differs
from the truth's, and the crossover CI's coverage; each start's own p50 per cell is kept in
``coverage.json`` (``start_p50``) so other intervals over starts can be scored against the
same truth without simulating again. Results: ``benchmarks/results/coverage.md`` and
``coverage.json``. Runs of seeds or worlds made apart (``--first-seed``, ``--world``; e.g.
on a machine with more cores) are joined with ``--merge``.

Usage: python benchmarks/coverage.py [--seeds N] [--workers N] [--world W] [--merge FILES]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent))  # virtual.py, beside this file

from shares import wilson
from virtual import VirtualRun, run_closed, run_poisson

from specload.analysis.decisions.crossover import find_crossover
from specload.analysis.inputs.run_columns import load_runs
from specload.analysis.statistics.effect import HELPS, HURTS, SAME, UNDECIDED, classify
from specload.analysis.statistics.ratios import step_ratios
from specload.analysis.statistics.stats import MIN_STARTS_FOR_CONFIG, Estimate
from specload.analysis.statistics.steps import condition_steps
from specload.cli.demo import SPEC_CONFIGS
from specload.core.condition import parse_condition
from specload.core.records import RequestRecord
from specload.protocol.interleave import Cell, cells_of, plan_blocks
from specload.protocol.until_decided import LOOKS as UNTIL_LOOKS
from specload.protocol.until_decided import Look, plan_round
from specload.scenario import parse_scenario
from specload.sim.engine import EngineConfig
from specload.sim.host import HostDraw, JitterParams, draw_host
from specload.sim.profiles import load_profile
from specload.sim.regime import RegimeParams
from specload.sim.spec import parse_spec_config

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results"
PROFILE = "h200-llama8b"
SPEC = SPEC_CONFIGS[PROFILE]  # the profile's calibration config, defined once
CELLS = (Cell(0.0, 1), Cell(4.0), Cell(8.0), Cell(12.0), Cell(16.0))
INPUT_TOKENS, OUTPUT_TOKENS = 512, 128
WARMUP_S, STEP_S = 12.0, 60.0  # contiguous: 72 s per step and condition
BLOCKS, BLOCK_WARMUP_S, BLOCK_GAP_S = 6, 2.0, 3.0  # interleaved: 6 x (2 + 10) = 72 s
KINDS = ("contiguous", "interleaved", "until")
CONTIGUOUS_STARTS = (1, 2, 3, 5)
INTERLEAVED_SESSIONS = (1, 2, 3)
TRUTH_STARTS, TRUTH_S = 40, 150.0
#: A single start's own truth: its steady state, OWN_S measured seconds per cell on its own
#: host draw, far (OWN_T0) from the seconds the design measured and from the draw's one-off
#: slow window (``draw_host``: it starts within the first minutes).
OWN_S, OWN_T0 = 600.0, 20_000.0
METRIC, MIN_GAIN = "tpot_p50", 0.05
BOOTSTRAP = 1000
T0 = 1_790_000_000.0
LABELS = ("baseline", "spec")


@dataclass(frozen=True)
class World:
    """What the simulated servers are like: the time regime (``--spec-regime calibrated``) on
    or off, and each server start's own host draw (``--start-jitter calibrated``: a factor
    with sigma 0.3 on speculation's launch-bound time and, in 30 % of starts, one 15-s slow
    window) on or off."""

    name: str
    regime: bool
    starts_differ: bool
    #: per cell (``CELLS``' order), a factor on the baseline's time per output token: a world
    #: whose true ratio is set at every step (``time_to_decide.py``); none: the engine's own
    baseline_factor: tuple[float, ...] = ()

    def factor(self, label: str, cell: int) -> float:
        """What this world multiplies ``label``'s TPOT by at cell index ``cell``."""
        return self.baseline_factor[cell] if self.baseline_factor and label == "baseline" else 1.0

    def host(self, start: int, condition: str) -> HostDraw:
        prof = load_profile(PROFILE)
        return draw_host(
            1.0,
            JitterParams.from_profile(prof) if self.starts_differ else None,
            seed=start,
            regime=RegimeParams.from_profile(prof) if self.regime else None,
            regime_seed=zlib.crc32(f"{start}:{condition}".encode()),
        )


#: The worlds and the designs measured in each: (kind, starts or sessions pooled).
WORLDS = {
    "regime": (
        World("regime", True, False),
        [("contiguous", 1), ("interleaved", 1), ("until", 1)],
    ),
    "regime+starts": (
        World("regime+starts", True, True),
        [("contiguous", k) for k in CONTIGUOUS_STARTS]
        + [("interleaved", k) for k in INTERLEAVED_SESSIONS]
        + [("until", 1)],
    ),
    "starts": (
        World("starts", False, True),
        [("contiguous", k) for k in CONTIGUOUS_STARTS] + [("interleaved", 1)],
    ),
}


def _window(
    world: World, label: str, start: int, cell: Cell, t0: float, warmup_s: float, step_s: float
) -> VirtualRun:
    """One condition at one cell from session second ``t0`` on a fresh engine of ``start``.

    The engine's own draws (which drafts are accepted) are seeded by the window too: with the
    engine's default seed every window replayed one acceptance sequence, so the first
    requests of every block (every start) were the same lucky or unlucky ones, and short
    blocks read the speculative step 3 % faster than a long run of the same seconds."""
    host = world.host(start, label)
    seed = zlib.crc32(f"{label}:{start}:{cell}:{t0}".encode())
    cfg = EngineConfig(
        load_profile(PROFILE),
        parse_spec_config(SPEC) if label == "spec" else None,
        host=host,
        seed=seed,
    )
    if cell.concurrency:
        return run_closed(
            cfg, cell.concurrency, duration_s=warmup_s + step_s, input_len=INPUT_TOKENS,
            output_len=OUTPUT_TOKENS, seed=seed, t0=t0, host=host,
        )  # fmt: skip
    n = max(8, round(cell.target_qps * (warmup_s + step_s)))
    return run_poisson(cfg, cell.target_qps, n, INPUT_TOKENS, OUTPUT_TOKENS, seed, t0=t0, host=host)


def _records(
    run: VirtualRun, cell: Cell, *, step: int, repeat: int, block: int | None, warmup_s: float,
    step_s: float, tag: str, tpot_factor: float = 1.0,
) -> list[dict[str, Any]]:  # fmt: skip
    """A virtual window's requests as specload records (times on the session clock);
    ``tpot_factor`` stretches each request's decode (``World.baseline_factor``)."""
    out = []
    end = run.t0 + warmup_s + step_s
    for i, r in enumerate(run.results):
        if r.arrival >= end or r.output_tokens < 2:
            continue
        sent = T0 + r.arrival
        e2e = r.ttft_s + tpot_factor * (r.e2e_s - r.ttft_s)
        tpot = None if r.tpot_s is None else tpot_factor * r.tpot_s
        out.append(
            RequestRecord(
                request_id=f"{tag}-{i}", worker="local", step=step, target_qps=cell.target_qps,
                warmup=r.arrival < run.t0 + warmup_s, scheduled_at=sent, sent_at=sent,
                first_token_at=sent + r.ttft_s, done_at=sent + e2e, ttft_s=r.ttft_s,
                tpot_s=tpot, e2e_s=e2e, content_chunks=len(r.chunk_times),
                prompt_tokens=INPUT_TOKENS, output_tokens=r.output_tokens,
                tokens_source="usage", finish_reason="length", status=200, ok=True,
                repeat=repeat, block=block, concurrency=cell.concurrency or None,
            ).to_dict()
        )  # fmt: skip
    return out


def _write_run(
    path: Path,
    label: str,
    records: list[dict[str, Any]],
    replicate: int,
    interleave: dict[str, Any] | None = None,
) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    with (path / "requests.jsonl").open("w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in records)
    meta = {
        "schema_version": 1, "run_id": path.name, "label": label, "replicate": replicate,
        "condition": parse_condition(f"{label}=").as_json()
        | {"speculative": SPEC if label == "spec" else None},
        "target": {"url": "virtual", "model": "llama-8b", "server_version": "0.26.0"},
        "scenario": {"name": "coverage"}, "status": "completed",
    } | ({"interleave": interleave} if interleave else {})  # fmt: skip
    (path / "run.json").write_text(json.dumps(meta))
    return path


def contiguous_start(world: World, start: int, out: Path) -> dict[str, Path]:
    """One server start per condition, each walking the ladder once (today's sweep)."""
    dirs = {}
    for label in LABELS:
        recs: list[dict[str, Any]] = []
        t = 0.0
        for step, cell in enumerate(CELLS):
            run = _window(world, label, start, cell, t, WARMUP_S, STEP_S)
            recs += _records(run, cell, step=step, repeat=0, block=None, warmup_s=WARMUP_S,
                             step_s=STEP_S, tag=f"{label}-{start}-{step}")  # fmt: skip
            t += WARMUP_S + STEP_S
        dirs[label] = _write_run(out / f"c-{label}-r{start}", label, recs, start)
    return dirs


def _session_scenario(session: int) -> Any:
    return parse_scenario(
        {
            "steps": [c.step_entry() for c in CELLS],
            "step_duration_s": STEP_S,
            "seed": session,
            "interleave": {"blocks": BLOCKS, "block_warmup_s": BLOCK_WARMUP_S},
        },
        file="coverage",
    )


def _run_blocks(
    world: World, session: int, blocks: Sequence[Any], cells: list[Cell], t: float,
    recs: dict[str, list[dict[str, Any]]],
) -> float:  # fmt: skip
    """Each block on the session clock from ``t``; its records added; the clock after."""
    for b in blocks:
        run = _window(world, b.condition, 1000 + session, cells[b.cell], t, b.warmup_s,
                      b.duration_s)  # fmt: skip
        recs[b.condition] += _records(
            run, cells[b.cell], step=b.number, repeat=b.k, block=b.number, warmup_s=b.warmup_s,
            step_s=b.duration_s, tag=f"{b.condition}-{session}-{b.number}",
            tpot_factor=world.factor(b.condition, b.cell),
        )  # fmt: skip
        t = max(t + b.warmup_s + b.duration_s, run.end_s) + BLOCK_GAP_S
    return t


def interleaved_session(world: World, session: int, out: Path) -> dict[str, Path]:
    """Both servers up at once; the blocks of ``plan_blocks`` in order on one session clock."""
    sc = _session_scenario(session)
    cells = cells_of(sc)
    recs: dict[str, list[dict[str, Any]]] = {label: [] for label in LABELS}
    _run_blocks(world, session, plan_blocks(sc, list(LABELS)), cells, 0.0, recs)
    return {
        label: _write_run(out / f"i-{label}-r{session}", label, recs[label], session)
        for label in LABELS
    }


#: ``--until-decided``'s budget in the benchmark: three times the session's own server time
UNTIL_BUDGET_FACTOR = 3.0


def until_session(
    world: World, session: int, out: Path, budget_s: float | None = None,
    read: Callable[[dict[str, Path], list[Cell], int, float], Look] | None = None,
) -> dict[str, Path]:  # fmt: skip
    """``sweep --interleave --until-decided`` on the session clock: the session's blocks,
    then looks and rounds as ``protocol.until_decided`` plans them (the product's own
    ``plan_round``), every interval widened for its looks, within ``budget_s`` of server time
    (default: ``UNTIL_BUDGET_FACTOR`` times the session's own). ``read(dirs, cells, look,
    server_s)`` takes each look, the last one too (default: compare's answer, ``_look``, and
    no read of the last, which plans nothing). The server time it used and the looks it took
    go into ``UNTIL_USE`` for the report."""
    sc = _session_scenario(session)
    cells = cells_of(sc)
    recs: dict[str, list[dict[str, Any]]] = {label: [] for label in LABELS}
    blocks = plan_blocks(sc, list(LABELS))
    plan: list[dict[str, Any]] = []
    t, looks, session_s = 0.0, 0, 0.0
    block_s = STEP_S / BLOCKS
    while True:
        t = _run_blocks(world, session, blocks, cells, t, recs)
        session_s = session_s or t
        budget = budget_s or UNTIL_BUDGET_FACTOR * session_s
        plan += [asdict(b) for b in blocks]
        looks += 1
        design = {"looks": UNTIL_LOOKS, "plan": plan, "rounds": looks}
        dirs = {
            label: _write_run(out / f"u-{label}-r{session}", label, recs[label], session, design)
            for label in LABELS
        }
        if looks >= UNTIL_LOOKS and read is None:
            break
        look = (read or _look)(dirs, cells, looks, t)
        if looks >= UNTIL_LOOKS or not look.undecided:
            break
        later = plan_round(look, cells, design, len(LABELS), block_s,
                           BLOCK_WARMUP_S + block_s + BLOCK_GAP_S, budget - t,
                           last=looks + 1 >= UNTIL_LOOKS)  # fmt: skip
        if later is None:
            break
        blocks = plan_blocks(sc, list(LABELS), later=later)
    UNTIL_USE[session] = {"server_s": t, "looks": looks, "session_s": session_s}
    return dirs


#: server time and looks of each ``until_session`` in this process, by session
UNTIL_USE: dict[int, dict[str, float]] = {}


def _look(dirs: dict[str, Path], cells: list[Cell], index: int, server_s: float = 0.0) -> Look:
    """A look as ``protocol.until_decided.look_at`` takes it, from compare's own steps."""
    runs = {label: load_runs([dirs[label]]) for label in LABELS}
    steps = {label: condition_steps(label, runs[label], b=BOOTSTRAP, seed=0) for label in LABELS}
    rows, _ = step_ratios(steps["spec"], steps["baseline"], MIN_GAIN)
    look = Look(index)
    for cell, row in zip(cells, rows[METRIC], strict=True):
        look.effects[cell] = row.effect
        if row.effect == UNDECIDED:
            look.to_decide_s[cell] = row.to_decide_s
    return look


def _tpot(run: VirtualRun, warmup_s: float, step_s: float) -> list[float]:
    """TPOT of the requests sent in the window's measured seconds (its warm-up left out, as
    compare leaves it out of a step)."""
    lo, hi = run.t0 + warmup_s, run.t0 + warmup_s + step_s
    return [r.tpot_s for r in run.results if r.tpot_s is not None and lo <= r.arrival < hi]


def _truth_start(args: tuple[World, int]) -> dict[str, list[list[float]]]:
    """One truth start: every condition's TPOT values at every cell over ``TRUTH_S``, after
    the same warm-up as the designs' steps (a cold engine's first seconds run a smaller
    batch: counted in, they moved the truth's ratio by up to 4 % at 4 req/s)."""
    world, start = args
    out: dict[str, list[list[float]]] = {}
    for label in LABELS:
        out[label] = []
        for i, cell in enumerate(CELLS):
            run = _window(world, label, 50_000 + start, cell, 300.0 * i, WARMUP_S, TRUTH_S)
            out[label].append(_tpot(run, WARMUP_S, TRUTH_S))
    return out


def own_truth(world: World, start: int) -> list[float]:
    """One server start's own long-run p50 TPOT ratio per cell (what a single-start CI,
    "about that start only", claims to cover): each condition's p50 over ``OWN_S`` on that
    start's host draw, in its steady state. Cached per (world, start): the designs that pool
    k starts take the first k of the same ones.

    Only where starts differ (``World.starts_differ``). Where they do not, every start's
    steady state is the population's truth exactly, and a 600-s estimate of it is not: in
    the regime world its log ratio spread by 0.012-0.027 (sd over 48 starts) around the
    truth, about a quarter to half of an until-decided CI's standard error, which scored
    intervals that held the start's truth as misses."""
    key = (world.name, start)
    if key not in _OWN:
        _OWN[key] = _own_truth(world, start)
    return _OWN[key]


#: ``own_truth`` per (world, start) in this process
_OWN: dict[tuple[str, int], list[float]] = {}


def these_starts_truth(world: World, starts: Sequence[int]) -> list[float]:
    """What the deciding CI over k starts' pooled units claims ("about these k server
    starts"): the mean of their own truths' log ratios per cell, exponentiated."""
    own = np.log([own_truth(world, s) for s in starts])
    return [float(v) for v in np.exp(own.mean(axis=0))]


def _own_truth(world: World, start: int) -> list[float]:
    p50: dict[str, list[float]] = {label: [] for label in LABELS}
    for label in LABELS:
        for i, cell in enumerate(CELLS):
            t0 = OWN_T0 + i * (WARMUP_S + OWN_S + 100.0)
            run = _window(world, label, start, cell, t0, WARMUP_S, OWN_S)
            p50[label].append(float(np.median(_tpot(run, WARMUP_S, OWN_S))))
    return [s / b for s, b in zip(p50["spec"], p50["baseline"], strict=True)]


def truth(world: World, workers: int = 1) -> dict[str, Any]:
    """Pooled p50 TPOT per cell over many long windows on many starts, and the crossover.
    ``TRUTH_STARTS`` starts: with 8 the truth's own start draw was off by a third of a
    3-start estimate's spread, and the estimates sat to one side of it."""
    pooled: dict[str, list[list[float]]] = {lb: [[] for _ in CELLS] for lb in LABELS}
    with ProcessPoolExecutor(workers) as pool:
        for part in pool.map(_truth_start, [(world, s) for s in range(TRUTH_STARTS)]):
            for label in LABELS:
                for i in range(len(CELLS)):
                    pooled[label][i] += part[label][i]
    ratios = [
        float(np.median(pooled["spec"][i]) / np.median(pooled["baseline"][i]))
        for i in range(len(CELLS))
    ]
    return {"ratios": ratios, "stop": _true_stop(ratios), "starts": TRUTH_STARTS, "s": TRUTH_S}


def _true_stop(ratios: Sequence[float]) -> float | None:
    """The QPS ladder's stop boundary the product's interpolation puts on the true ratios."""
    q = [c.target_qps for c in CELLS if not c.concurrency]
    r = [x for c, x in zip(CELLS, ratios, strict=True) if not c.concurrency]
    ests = [Estimate(v, v, v) for v in r]
    effects = [classify(e, MIN_GAIN) for e in ests]
    x = find_crossover(METRIC, "spec", "baseline", q, ests, effects,
                       np.asarray([r]), MIN_GAIN)  # fmt: skip
    return None if x is None or x.stop is None else _finite(x.stop.qps)  # beyond: no truth


def _finite(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def evaluate(dirs: Sequence[dict[str, Path]], *truths: dict[str, Any]) -> list[dict[str, Any]]:
    """compare's answer from these runs against each truth: per cell and for the crossover
    (compare's own interval rule: ``stats.over_starts`` over several starts; one start's
    interval over its blocks or time slices)."""
    runs = {label: load_runs([d[label] for d in dirs]) for label in LABELS}
    steps = {label: condition_steps(label, runs[label], b=BOOTSTRAP, seed=0) for label in LABELS}
    rows, reps = step_ratios(steps["spec"], steps["baseline"], MIN_GAIN)
    ladder = [i for i, c in enumerate(CELLS) if not c.concurrency]
    x = find_crossover(
        METRIC, "spec", "baseline", [CELLS[i].target_qps for i in ladder],
        [rows[METRIC][i].ratio for i in ladder], [rows[METRIC][i].effect for i in ladder],
        reps[METRIC][:, ladder], MIN_GAIN,
    )  # fmt: skip
    out: list[dict[str, Any]] = []
    for true in truths:
        cells = []
        for row, t in zip(rows[METRIC], true["ratios"], strict=True):
            lo, hi = row.ratio.lo, row.ratio.hi
            cells.append({
                "covered": lo is not None and hi is not None and lo <= t <= hi,
                "width": None if lo is None or hi is None else hi - lo,
                "effect": row.effect, "true_effect": _effect(t), "ratio": row.ratio.value,
                "truth": t, "ci": [lo, hi], "to_decide_s": row.to_decide_s,
            } | _config_cell(row.config_ratio, row.config_effect, t))  # fmt: skip
        out.append({"cells": cells, "stop": _stop_covered(x, true["stop"]),
                    "stop_ci": _stop_ci(x)})  # fmt: skip
    out[0]["start_p50"] = {label: [_cell_p50s(r) for r in runs[label]] for label in LABELS}
    return out


def _config_cell(ratio: Estimate | None, effect: str | None, t: float) -> dict[str, Any]:
    """The interval about this config (three or more starts) against a truth: ``config``
    with its coverage, width, effect and bounds; nothing below three starts."""
    if ratio is None:
        return {}
    lo, hi = ratio.lo, ratio.hi
    return {"config": {
        "covered": lo is not None and hi is not None and lo <= t <= hi,
        "width": None if lo is None or hi is None else hi - lo, "effect": effect,
        "ci": [lo, hi],
    }}  # fmt: skip


def _cell_p50s(run: Any) -> list[float | None]:
    """One start's own measured p50 TPOT per cell (kept so that other intervals over
    starts can be scored against the same truth without simulating again)."""
    c = run.cols
    measured = ~c["warmup"] & c["ok"] & ~np.isnan(c["tpot_s"])
    out: list[float | None] = []
    for cell in CELLS:
        at = measured & (np.round(c["target_qps"], 6) == round(cell.target_qps, 6))
        if cell.concurrency:
            at &= c["concurrency"] == cell.concurrency
        out.append(float(np.median(c["tpot_s"][at])) if at.any() else None)
    return out


def _effect(ratio: float) -> str:
    return HELPS if ratio <= 1 - MIN_GAIN else HURTS if ratio >= 1 + MIN_GAIN else SAME


def _stop_ci(x: Any) -> dict[str, Any] | None:
    """The stop compare printed, kept so that it can be scored against another truth."""
    if x is None or x.stop is None:
        return None
    return {"qps": _finite(x.stop.qps), "ci": list(x.stop.ci), "beyond": list(x.stop.ci_beyond)}


def _stop_covered(x: Any, true_stop: float | None) -> bool | None:
    """Whether the crossover's stop CI holds the true stop (a CI bound beyond the tested range
    is open on that side); None when either has no stop."""
    if x is None or x.stop is None or true_stop is None:
        return None
    (lo, hi), (lo_side, hi_side) = x.stop.ci, x.stop.ci_beyond
    lo = -math.inf if lo is None and lo_side == "below" else lo
    hi = math.inf if hi is None and hi_side == "above" else hi
    if lo is None or hi is None:  # beyond on the wrong side: the CI misses a finite stop
        return False
    return bool(lo <= true_stop <= hi)


def one_seed(args: tuple[int, str, dict[str, Any], tuple[str, ...]]) -> dict[str, Any]:
    """Every design (of ``kinds``) of one seed in one world; the designs that pool k starts
    (sessions) take the first k of the same ones."""
    seed, world_name, true, kinds = args[:4]
    only = args[4] if len(args) > 4 else ()  # type: ignore[misc]
    world, all_designs = WORLDS[world_name]
    designs = [(kind, k) for kind, k in all_designs if kind in kinds]
    designs = [(kind, k) for kind, k in designs if not only or f"{kind}-{k}" in only]
    out: dict[str, Any] = {}
    with TemporaryDirectory() as tmp:
        base = Path(tmp)
        made: dict[str, list[dict[str, Path]]] = {"contiguous": [], "interleaved": [], "until": []}
        make = {
            "contiguous": contiguous_start, "interleaved": interleaved_session,
            "until": until_session,
        }  # fmt: skip
        for kind, k in designs:
            while len(made[kind]) < k:
                made[kind].append(make[kind](world, 100 * seed + len(made[kind]) + 1, base))
            # its CI claims these starts' own truth: measure it against that, and the
            # population's (the interval about this config's claim, from three starts)
            ratios = these_starts_truth(
                world, [_start_of(kind, 100 * seed + n) for n in range(1, k + 1)]
            ) if world.starts_differ else list(true["ratios"])  # fmt: skip
            own, pop = evaluate(made[kind][:k], {"ratios": ratios, "stop": _true_stop(ratios)},
                                true)  # fmt: skip
            out[f"{kind}-{k}"] = own | {"population": pop}
            if kind == "until":
                out[f"{kind}-{k}"] |= UNTIL_USE.get(100 * seed + 1, {})
    return out


def _start_of(kind: str, n: int) -> int:
    """The host draw's start seed of start (session) ``n`` of a design: an interleaved
    session's servers both run on start ``1000 + n`` (``interleaved_session``)."""
    return 1000 + n if kind in ("interleaved", "until") else n


def summarise(per_seed: list[dict[str, Any]], true: dict[str, Any]) -> dict[str, Any]:
    """Coverage, median width and wrong answers per design and cell, over the seeds that
    measured the design (runs merged from different kinds of design or code carry different
    designs per seed)."""
    designs: dict[str, Any] = {}
    for name in dict.fromkeys(d for s in per_seed for d in s):
        rows = [s[name] for s in per_seed if name in s]
        cells = []
        for i, cell in enumerate(CELLS):
            got = [r["cells"][i] for r in rows]
            widths = [g["width"] for g in got if g["width"] is not None]
            effects = [g["effect"] for g in got]
            points = [g["ratio"] for g in got if g["ratio"] is not None]
            pop = [r["population"]["cells"][i] for r in rows if "population" in r]
            config = [g["config"] for g in pop if "config" in g]
            cells.append({
                "cell": cell.label, "true_ratio": true["ratios"][i],
                "truth_p10_p90": [float(np.percentile([g.get("truth", true["ratios"][i])
                                                        for g in got], q))
                                  for q in (10, 90)],
                "coverage": float(np.mean([g["covered"] for g in got])),
                "covered": int(sum(g["covered"] for g in got)), "n": len(got),
                "median_width": float(np.median(widths)) if widths else None,
                "wrong_answer": float(np.mean([g["effect"] not in (g["true_effect"], UNDECIDED, "no_change")
                                               for g in got])),  # fmt: skip
                "effects": {e: effects.count(e) for e in sorted(set(effects))},
                "agreement": max(effects.count(e) for e in set(effects)) / len(effects),
                "ratio_p10_p90": [float(np.percentile(points, 10)),
                                  float(np.percentile(points, 90))],
            } | ({"population_coverage": float(np.mean([g["covered"] for g in pop]))}
                 if pop else {}) | _config_summary(config))  # fmt: skip
        stops = [r["stop"] for r in rows if r["stop"] is not None]
        use = [r for r in rows if "server_s" in r]
        designs[name] = {
            **(
                {
                    "server_s": float(np.mean([r["server_s"] for r in use])),
                    "session_s": float(np.mean([r["session_s"] for r in use])),
                    "looks": {str(k): sum(r["looks"] == k for r in use) for k in range(1, 5)},
                }
                if use
                else {}
            ),
            "seeds": len(rows),
            "cells": cells,
            "stop_coverage": float(np.mean(stops)) if stops else None,
            "stop_n": len(stops),
            "stop_covered": int(sum(stops)),
        } | _claim(name, cells)
    return designs


def _config_summary(config: list[dict[str, Any]]) -> dict[str, Any]:
    """A cell's interval about this config over the seeds (three or more starts): coverage
    of the population's truth, median width, effects."""
    if not config:
        return {}
    widths = [g["width"] for g in config if g["width"] is not None]
    effects = [g["effect"] for g in config]
    return {"config": {
        "coverage": float(np.mean([g["covered"] for g in config])),
        "covered": int(sum(g["covered"] for g in config)), "n": len(config),
        "median_width": float(np.median(widths)) if widths else None,
        "effects": {e: effects.count(e) for e in sorted(set(effects))},
    }}  # fmt: skip


def _claim(name: str, cells: list[dict[str, Any]]) -> dict[str, Any]:
    """What a checker reads per design: how many starts (sessions), whether compare prints a
    CI, what the deciding CI claims to cover (``same_start``: one start's own truth;
    ``these_starts``: the mean of the k starts' own truths, both said in its caveat), the
    lowest coverage over the cells where one is printed, and from three starts the claim of
    the interval about this config beside it (``new_start``: the population's truth)."""
    k = int(name.rsplit("-", 1)[1])
    printed = any(c["median_width"] is not None for c in cells)
    config = [c["config"] for c in cells if "config" in c]
    return {
        "starts": k,
        "ci_printed": printed,
        "ci_claim": None if not printed else "these_starts" if k >= 2 else "same_start",
        "min_coverage": min(c["coverage"] for c in cells) if printed else None,
        "config_claim": "new_start" if config else None,
        "config_min_coverage": min(c["coverage"] for c in config) if config else None,
    }


def run(
    seeds: int, workers: int, worlds: Sequence[str], kinds: tuple[str, ...], first_seed: int = 1,
    designs: tuple[str, ...] = (), truths: dict[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """``designs``: only these (``contiguous-3``, ...; default: every one of ``kinds``);
    ``truths``: a world's truth already computed (``--truth-from``: it is deterministic)."""
    result: dict[str, Any] = {"seeds": seeds, "cells": [c.label for c in CELLS], "worlds": {}}
    for name in worlds:
        t = time.time()
        true = (truths or {}).get(name) or truth(WORLDS[name][0], workers)
        print(f"{name}: truth {true} ({time.time() - t:.0f} s)", flush=True)
        jobs = [(s, name, true, kinds, designs) for s in range(first_seed, first_seed + seeds)]
        with ProcessPoolExecutor(workers) as pool:
            per_seed = list(pool.map(one_seed, jobs))
        result["worlds"][name] = {
            "seeds": seeds,
            "truth": true,
            "designs": summarise(per_seed, true),
            "per_seed": per_seed,
        }
        print(f"  {seeds} seeds in {time.time() - t:.0f} s", flush=True)
    return result


def merge(results: list[dict[str, Any]]) -> dict[str, Any]:
    """One result from several runs (worlds, kinds of design or seed ranges run apart on a
    machine whose time is short). A world's truth is deterministic, so runs of one world
    share it; where they carry per-seed answers these are pooled and summarised again, else
    each design keeps the seed count it was measured with."""
    out: dict[str, Any] = {"seeds": max(r["seeds"] for r in results), "cells": results[0]["cells"],
                           "worlds": {}}  # fmt: skip
    if any(r.get("title") for r in results):
        out["title"] = next(r["title"] for r in results if r.get("title"))
    for r in results:
        for name, w in r["worlds"].items():
            seeds = w.get("seeds", r["seeds"])
            have = out["worlds"].setdefault(
                name, {"truth": w["truth"], "designs": {}, "per_seed": []}
            )
            assert have["truth"] == w["truth"], f"{name}: runs with different truths"
            if w.get("note"):
                have["note"] = w["note"]
            if w.get("per_seed"):
                have["per_seed"] += w["per_seed"]
            else:
                have["designs"] |= {d: {"seeds": seeds} | v for d, v in w["designs"].items()}
    for w in out["worlds"].values():
        if w["per_seed"]:
            n = len(w["per_seed"])
            w["designs"] |= {
                d: {"seeds": n} | v for d, v in summarise(w["per_seed"], w["truth"]).items()
            }
        else:
            del w["per_seed"]
    return out


def markdown(result: dict[str, Any]) -> str:
    title = result.get("title") or "Coverage of compare's 95 % intervals on the simulator"
    lines = [
        f"# {title} (benchmarks/coverage.py)",
        "",
        "Seeds per design: under each world's heading; p50 TPOT ratio spec / baseline per step; equal "
        "server time per step and condition (72 s). `coverage`: share of seeds whose CI holds "
        "the true ratio; `width`: median CI width (ratio units); `wrong`: share of seeds whose "
        "decided answer by the rule (helps, hurts, the same) is not the truth's. Crossover: share of seeds whose stop CI holds the true stop. "
        "The deciding interval (`steps._latency`): over the units of every start "
        "(session) pooled, its blocks when interleaved, its time slices when contiguous "
        "(`steps._time_slices`), whose caveat says it is about these starts only, so it is "
        "measured against their own truth (each start's steady state: "
        f"{OWN_S:g} s per cell and condition on its own host draw; over k starts the mean of "
        "their log ratios; where starts do not differ, the population's truth itself, which "
        "is every start's steady state there); after the cell, `new start`: how often it held the population's "
        "truth, which it does not claim. `config`: from three starts, the interval about this "
        "config beside it (`stats.effect_over_starts`, the starts paired by replicate), "
        "against the population's truth, its coverage (width; decided share).",
    ]
    for world, w in result["worlds"].items():
        truth_txt = ", ".join(
            f"{c} {r:.3f}" for c, r in zip(result["cells"], w["truth"]["ratios"], strict=True)
        )
        counts = {d.get("seeds") for d in w["designs"].values()}
        n = w.get("seeds") or (counts.pop() if len(counts) == 1 else None)
        lines += ["", f"## {world.replace('_', ' ')}", "",
                  (f"{n} seeds. " if n else "Seeds per design as listed. ")
                  + f"Truth ({w['truth'].get('starts', 8)} "
                  f"starts x {w['truth'].get('s', 150.0):g} s): {truth_txt}; stop "
                  f"{w['truth']['stop']}", ""]  # fmt: skip
        if w.get("note"):
            lines += [w["note"], ""]
        head = "| design | " + " | ".join(result["cells"]) + " | crossover |"
        lines += [head, "|" + "---|" * (len(result["cells"]) + 2)]
        for name, d in w["designs"].items():
            if not d["ci_printed"]:
                lines.append(f"| {name} | " + " | ".join(["no CI"] * len(d["cells"])) + " | — |")
                continue
            cells = " | ".join(_cell_text(c) for c in d["cells"])
            stop = (
                "—" if d["stop_coverage"] is None else f"{d['stop_coverage']:.2f} ({d['stop_n']})"
            )
            seeds = f" ({d['seeds']} seeds)" if d.get("seeds", n) != n else ""
            lines.append(f"| {name}{seeds} | {cells} | {stop} |")
        lines += [
            "",
            "Cells: coverage (width; wrong). `no CI`: compare prints none "
            f"(none is now: the pooled units decide from one start; `config` from "
            f"{MIN_STARTS_FOR_CONFIG} starts).",
            "",
            "Lowest coverage per design, seeds covered of seeds (95 % Wilson interval): "
            + "; ".join(_lowest(name, d) for name, d in w["designs"].items() if d["ci_printed"])
            + ".",
            "",
            _stops_line(w["designs"]),
            "",
            _decided_line(w["designs"]),
            *_until_lines(w["designs"]),
            *_claims_table(w["designs"]),
        ]
    return "\n".join(lines) + "\n"


def _share(k: int, n: int) -> str:
    """k/n as a share with its 95 % Wilson interval: "12/80 0.15 (0.09–0.25)"."""
    lo, hi = wilson(k, n)
    return f"{k}/{n} {k / n:.2f} ({lo:.2f}–{hi:.2f})" if n else "—"


def _claims_table(designs: dict[str, Any]) -> list[str]:
    """Per design, over its seed-steps: the share decided (helps, hurts or the same) by the
    deciding interval, its coverage of these starts' own truth and of the population's, and
    from three starts the interval about this config's coverage of the population's truth and
    its decided share; Wilson intervals, seeds being few."""
    out = ["", "| design | seeds | decided (these starts) | covers these starts' truth | "
           "covers the population's | config covers the population's | config decided |",
           "|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, d in designs.items():
        cells = d["cells"]
        n = sum(c["n"] for c in cells)
        decided = sum(
            k for c in cells for e, k in c["effects"].items() if e in (HELPS, HURTS, SAME)
        )
        covered = sum(c["covered"] for c in cells)
        pop = [c["population_coverage"] * c["n"] for c in cells if "population_coverage" in c]
        cfg = [c["config"] for c in cells if "config" in c]
        cfg_n = sum(c["n"] for c in cfg)
        cfg_cov = sum(c["covered"] for c in cfg)
        cfg_dec = sum(k for c in cfg for e, k in c["effects"].items() if e in (HELPS, HURTS, SAME))
        out.append(
            f"| {name} | {d['seeds']} | {_share(decided, n)} | {_share(covered, n)} | "
            + (_share(round(sum(pop)), n) if pop else "—") + " | "
            + (f"{_share(cfg_cov, cfg_n)} | {_share(cfg_dec, cfg_n)} |" if cfg else "— | — |")
        )  # fmt: skip
    return out


def _until_lines(designs: dict[str, Any]) -> list[str]:
    """``--until-decided``: the server time it used against the session's alone, and how
    many looks it took (its intervals are widened for ``UNTIL_LOOKS`` looks)."""
    out = []
    for name, d in designs.items():
        if "server_s" not in d:
            continue
        looks = ", ".join(f"{k}: {n}" for k, n in d["looks"].items())
        out += [
            "",
            f"{name}: server time {d['server_s']:.0f} s per seed on average, the session "
            f"alone {d['session_s']:.0f} s (budget {UNTIL_BUDGET_FACTOR:g}x); seeds by looks "
            f"taken: {looks}; every interval widened for {UNTIL_LOOKS} looks.",
        ]
    return out


def _decided_line(designs: dict[str, Any]) -> str:
    """How often each design decides a step (helps, hurts or the same: ``analysis.statistics.effect``),
    over its seed-steps: the share the four answers leave undecided is the rest."""
    parts = []
    for name, d in designs.items():
        effects: dict[str, int] = {}
        for c in d["cells"]:
            for e, k in (c.get("effects") or {}).items():
                effects[e] = effects.get(e, 0) + k
        total = sum(effects.values())
        decided = sum(k for e, k in effects.items() if e in (HELPS, HURTS, SAME))
        if total:
            parts.append(f"{name} {decided}/{total} ({decided / total:.2f})")
    return "Steps decided (helps, hurts or the same), seed-steps: " + "; ".join(parts) + "."


def _stops_line(designs: dict[str, Any]) -> str:
    """The crossover's coverage over every design of a world: few seeds per design find a
    stop, so the designs' counts are joined (each stop CI is ``crossover.bracket``)."""
    n = sum(d.get("stop_n", 0) for d in designs.values() if d["ci_printed"])
    k = sum(d.get("stop_covered", round((d["stop_coverage"] or 0) * d.get("stop_n", 0)))
            for d in designs.values() if d["ci_printed"])  # fmt: skip
    if not n:
        return "Stop CIs: no seed found a stop with a CI."
    lo, hi = wilson(k, n)
    return f"Stop CIs over every design: {k}/{n} held the true stop ({lo:.2f}–{hi:.2f})."


def _lowest(name: str, d: dict[str, Any]) -> str:
    """The design's lowest cell as k/n with its Wilson interval: with 20-30 seeds a cell's
    coverage is itself uncertain by about +-0.1."""
    c = min(d["cells"], key=lambda c: c["coverage"])
    n = c.get("n") or d.get("seeds") or 0
    k = c.get("covered", round(c["coverage"] * n))
    lo, hi = wilson(k, n)
    return f"{name} {k}/{n} at {c['cell']} ({lo:.2f}–{hi:.2f})"


def _cell_text(c: dict[str, Any]) -> str:
    """coverage (width; wrong), and for a one-start design its new-start coverage."""
    if c["median_width"] is None:
        return f"{c['coverage']:.2f}"
    text = f"{c['coverage']:.2f} ({c['median_width']:.2f}; {c['wrong_answer']:.2f})"
    pop = c.get("population_coverage")
    return text if pop is None else f"{text} · new start {pop:.2f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--first-seed", type=int, default=1,
                   help="seeds FIRST.. (a later run adds seeds: --merge joins them)")  # fmt: skip
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--world", action="append", choices=sorted(WORLDS), default=[])
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--stem", default="coverage", help="result file names (STEM.md, STEM.json)")
    p.add_argument("--kind", action="append", choices=KINDS, default=[],
                   help="only these designs (default: both kinds)")  # fmt: skip
    p.add_argument("--design", action="append", default=[],
                   help="only this design (contiguous-3, interleaved-1, ...; repeatable)")  # fmt: skip
    p.add_argument("--truth-from", type=Path,
                   help="the worlds' truths from this result file (deterministic: saves the "
                   "40 truth starts)")  # fmt: skip
    p.add_argument("--merge", type=Path, nargs="+", default=[],
                   help="write STEM from these result files' worlds (runs nothing)")  # fmt: skip
    a = p.parse_args(argv)
    if a.merge:
        result = merge([json.loads(f.read_text()) for f in a.merge])
    else:
        worlds, kinds = a.world or sorted(WORLDS), tuple(a.kind or KINDS)
        truths = None
        if a.truth_from:
            saved = json.loads(a.truth_from.read_text())["worlds"]
            truths = {w: saved[w]["truth"] for w in worlds if w in saved}
        result = run(a.seeds, a.workers, worlds, kinds, a.first_seed, tuple(a.design), truths)
    write(a.out, a.stem, result, markdown(result))
    return 0


def write(out: Path, stem: str, result: dict[str, Any] | None, text: str) -> None:
    """STEM.json (unless ``result`` is None: a result only rendered again) and STEM.md in
    ``out``, and the Markdown on the terminal."""
    out.mkdir(parents=True, exist_ok=True)
    if result is not None:
        (out / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / f"{stem}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())

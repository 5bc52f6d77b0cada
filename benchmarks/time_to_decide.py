"""How much server time until every step is decided, and does a true 0 % end ``same``?

The issue's targets for ``sweep --interleave --until-decided``: deciding a true 10 % effect
at every step in at most a third of the server time today's fixed design needs, at the same
coverage; and a true 0 % effect ending ``same`` at every step within that budget. Measured on
the simulator, in worlds whose truth is set:

- **the worlds**: the regime world of ``coverage.py`` (the calibrated ``h200-llama8b``
  profile, speculation's step flipping between fast and slow windows as on the H200, one host
  draw for every start), with the baseline's time per output token stretched at each step by
  the regime world's true ratio over the target (``World.baseline_factor``): the true p50
  TPOT ratio is then the target at every step (``effect-10``: 0.90, ``effect-0``: 1.00), to
  within the regime truth's own estimate (40 starts x 150 s, ``coverage.json``). Speculation
  keeps its calibrated noise; the baseline keeps its own.
- **fixed** (today's design, sized in advance): the session's 6 blocks per step and
  condition, then the same again, ``k`` times, on the same servers (one run dir per condition,
  as ``--until-decided``'s rounds continue it), read by compare at its plain 95 % interval at
  every ``k`` up to ``FIXED_MAX``. Its time to decide is the server time of the smallest
  ``k`` at which every step is decided.
- **until** (``--until-decided``): the session, then looks and rounds as the product plans
  them (``protocol.until_decided.plan_round``, every interval widened for its 4 looks), with a
  budget that does not bind (``FIXED_MAX`` sessions' server time), so that the time at the
  look where every step was decided is the design's own; a budget of B then decides every
  step in the seeds whose time is at most B.

Per design: the share of seeds with every step decided, the server time it took (median over
those seeds), how often a decided answer was wrong (not the truth's by the one rule), and the
coverage of the interval the design stopped on. Results:
``benchmarks/results/time_to_decide.{md,json}``.

Usage: python benchmarks/time_to_decide.py [--seeds N] [--workers N] [--first-seed S]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent))  # shares.py, siblings.py

from shares import wilson
from siblings import sibling

from specload.analysis.statistics.effect import SAME, UNDECIDED
from specload.protocol.interleave import Cell, cells_of, next_round, plan_blocks
from specload.protocol.until_decided import LOOKS, Look

cv: Any = sibling("coverage.py")
OUT = cv.OUT
TARGETS = {"effect-10": 0.90, "effect-0": 1.00}
#: fixed design: up to this many sessions' blocks per step on one start, scored at these k
FIXED_MAX = 16
FIXED_KS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 14, 16)


def world(name: str, regime_truth: list[float]) -> cv.World:
    """The regime world with the baseline stretched so that the true ratio is the target."""
    target = TARGETS[name]
    return cv.World(name, True, False, tuple(r / target for r in regime_truth))


def _score(dirs: dict[str, Path], target: float) -> dict[str, Any]:
    """compare's answer per step against the set truth."""
    cells = cv.evaluate([dirs], {"ratios": [target] * len(cv.CELLS), "stop": None})[0]["cells"]
    return {
        "effects": [c["effect"] for c in cells],
        "covered": [c["covered"] for c in cells],
        "wrong": [c["effect"] not in (c["true_effect"], UNDECIDED) for c in cells],
        "width": [c["width"] for c in cells],
        "to_decide_s": [c["to_decide_s"] for c in cells],
        "ratio": [c["ratio"] for c in cells],
        "ci": [c["ci"] for c in cells],
    }


def fixed(w: cv.World, session: int, target: float, out: Path) -> list[dict[str, Any]]:
    """Today's design at k = 1..FIXED_MAX sessions' blocks, each k scored."""
    sc = cv._session_scenario(session)
    cells = cells_of(sc)
    recs: dict[str, list[dict[str, Any]]] = {label: [] for label in cv.LABELS}
    plan: list[dict[str, Any]] = []
    blocks, t, got = plan_blocks(sc, list(cv.LABELS)), 0.0, []
    for k in range(1, FIXED_MAX + 1):
        t = cv._run_blocks(w, session, blocks, cells, t, recs)
        plan += [asdict(b) for b in blocks]
        design = {"plan": plan, "rounds": k}
        if k in FIXED_KS:
            dirs = {
                lb: cv._write_run(out / f"f-{lb}", lb, recs[lb], session, design)
                for lb in cv.LABELS
            }
            got.append({"k": k, "server_s": t} | _score(dirs, target))
        more = {c: cv.BLOCKS for c in range(len(cells))}
        blocks = plan_blocks(sc, list(cv.LABELS), later=next_round(design, more, k))
    return got


def until(
    w: cv.World, session: int, target: float, budget_s: float, out: Path
) -> list[dict[str, Any]]:
    """``--until-decided`` as ``coverage.until_session`` runs it, every look scored."""
    got: list[dict[str, Any]] = []

    def read(dirs: dict[str, Path], cells: list[Cell], index: int, server_s: float) -> Look:
        score = _score(dirs, target)
        got.append({"look": index, "server_s": server_s} | score)
        look = Look(index)
        for cell, effect, more in zip(cells, score["effects"], score["to_decide_s"], strict=True):
            look.effects[cell] = effect
            if effect == UNDECIDED:
                look.to_decide_s[cell] = more
        return look

    cv.until_session(w, session, out, budget_s, read)
    return got


def one_seed(args: tuple[int, str, list[float], list[dict[str, Any]] | None]) -> dict[str, Any]:
    """Both designs of one seed; ``fixed`` given (``--fixed-from``: it is deterministic, and
    no change to ``--until-decided`` moves it): only the until-decided run."""
    seed, name, regime_truth, f = args
    w, target = world(name, regime_truth), TARGETS[name]
    with TemporaryDirectory() as tmp:
        f = f or fixed(w, 100 * seed + 1, target, Path(tmp))
        u = until(w, 100 * seed + 1, target, f[-1]["server_s"], Path(tmp))
    return {"seed": seed, "fixed": f, "until": u}


def _decided(row: dict[str, Any]) -> bool:
    return UNDECIDED not in row["effects"]


def summarise(per_seed: list[dict[str, Any]]) -> dict[str, Any]:
    """Per design: seeds with every step decided, the time it took, wrong answers and the
    coverage of the interval it stopped on (the first k or look with every step decided,
    else the last)."""
    out: dict[str, Any] = {}
    for design in ("fixed", "until"):
        stops = [next((r for r in s[design] if _decided(r)), s[design][-1]) for s in per_seed]
        done = [r for r in stops if _decided(r)]
        cells = list(zip(*[r["covered"] for r in stops], strict=True))
        out[design] = {
            "seeds": len(stops),
            "all_decided": len(done),
            "all_decided_ci": list(wilson(len(done), len(stops))),
            "server_s_p50": float(np.median([r["server_s"] for r in done])) if done else None,
            "server_s_p80": float(np.percentile([r["server_s"] for r in done], 80))
            if done
            else None,
            "all_same": sum(all(e == SAME for e in r["effects"]) for r in stops),
            "wrong": sum(sum(r["wrong"]) for r in stops),
            "coverage": [float(np.mean(c)) for c in cells],
            "covered_min": min(int(sum(c)) for c in cells),
            "effects": [
                {
                    e: sum(r["effects"][i] == e for r in stops)
                    for e in sorted({r["effects"][i] for r in stops})
                }
                for i in range(len(cv.CELLS))
            ],
        }
    out["fixed"]["decided_by_k"] = {
        str(r["k"]): sum(_decided(s["fixed"][i]) for s in per_seed)
        for i, r in enumerate(per_seed[0]["fixed"])
    }
    out["fixed"]["session_s"] = float(np.mean([s["fixed"][0]["server_s"] for s in per_seed]))
    return out


def run(
    seeds: int, workers: int, first_seed: int, worlds: list[str], fixed_from: Path | None = None
) -> dict[str, Any]:
    regime = json.loads((OUT / "coverage.json").read_text())["worlds"]["regime"]["truth"]
    result: dict[str, Any] = {"seeds": seeds, "first_seed": first_seed, "cells": [c.label for c in cv.CELLS],
                              "regime_truth": regime["ratios"], "fixed_max": FIXED_MAX, "looks": LOOKS,
                              "worlds": {}}  # fmt: skip
    for name in worlds:
        t = time.time()
        done = _fixed_rows(fixed_from, name) if fixed_from else {}
        jobs = [
            (s, name, regime["ratios"], done.get(s)) for s in range(first_seed, first_seed + seeds)
        ]
        with ProcessPoolExecutor(workers) as pool:
            per_seed = list(pool.map(one_seed, jobs))
        result["worlds"][name] = {"target": TARGETS[name], "designs": summarise(per_seed),
                                  "per_seed": per_seed, "wall_s": time.time() - t}  # fmt: skip
        print(f"{name}: {seeds} seeds in {time.time() - t:.0f} s", flush=True)
    return result


def _fixed_rows(path: Path, name: str) -> dict[int, list[dict[str, Any]]]:
    """The fixed design's rows per seed of world ``name`` in an earlier result."""
    w = json.loads(path.read_text())["worlds"].get(name) or {}
    return {s["seed"]: s["fixed"] for s in w.get("per_seed", [])}


def _fixed_time(d: dict[str, Any], share: float) -> float | None:
    """The fixed design's server time at the smallest k where at least ``share`` of the seeds
    had every step decided (a design sized in advance must be that long); None: no k did."""
    for k, n in d["decided_by_k"].items():
        if n >= share * d["seeds"]:
            return int(k) * d["session_s"]
    return None


def _until_time(per_seed: list[dict[str, Any]], share: float) -> float | None:
    """The server time by which ``share`` of the seeds' until-decided runs had every step
    decided (their look's time; a run that never did counts as never)."""
    times = sorted(
        next((r["server_s"] for r in s["until"] if _decided(r)), float("inf")) for s in per_seed
    )
    t = times[max(0, int(np.ceil(share * len(times))) - 1)]
    return None if t == float("inf") else t


def _mins(s: float | None) -> str:
    return "not within the runs" if s is None else f"{s / 60:.0f} min"


def markdown(result: dict[str, Any]) -> str:
    cells = result["cells"]
    lines = [
        "# Server time until every step is decided (benchmarks/time_to_decide.py)",
        "",
        f"Seeds {result['first_seed']}..{result['first_seed'] + result['seeds'] - 1} per world; the "
        "regime world of `coverage.py` with the baseline's TPOT stretched per step so that the "
        "true p50 TPOT ratio spec / baseline is the target at every step (regime truth: "
        + ", ".join(f"{c} {r:.3f}" for c, r in zip(cells, result["regime_truth"], strict=True))
        + "). `fixed`: the session's 6 blocks of 10 s per step and condition, repeated k times "
        f"on the same servers (k up to {result['fixed_max']}), compare's plain 95 % interval; "
        f"`until`: `--until-decided` as the product plans it, {result['looks']} looks, every "
        "interval widened for them, a budget that did not bind. Server time: the session "
        "clock, both servers' blocks, warm-ups and gaps.",
    ]
    for name, w in result["worlds"].items():
        d, per_seed = w["designs"], w["per_seed"]
        f, u = d["fixed"], d["until"]
        lines += ["", f"## {name}: true ratio {w['target']:.2f} at every step", ""]
        lines += ["| design | every step decided | all `same` | wrong answers | coverage per step (" + ", ".join(cells) + ") | lowest |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for design in ("fixed", "until"):
            x = d[design]
            lo, hi = x["all_decided_ci"]
            lines.append(
                f"| {design} | {x['all_decided']}/{x['seeds']} ({lo:.2f}–{hi:.2f}) | "
                f"{x['all_same']}/{x['seeds']} | {x['wrong']} | "
                + ", ".join(f"{c:.2f}" for c in x["coverage"])
                + f" | {x['covered_min']}/{x['seeds']} |"
            )
        curve = ", ".join(f"k={k}: {n}" for k, n in f["decided_by_k"].items())
        lines += [
            "",
            "Interval: the first k (fixed) or look (until) with every step decided, else the "
            "last. For fixed that is a peek at every k with plain 95 % intervals, which the "
            "fixed design does not do (sized in advance, it reads one k: the curve below); "
            "its row shows what peeking would read. Answers per step where it stopped: fixed "
            + "; ".join(f"{c} {_counts(e)}" for c, e in zip(cells, f["effects"], strict=True))
            + "; until "
            + "; ".join(f"{c} {_counts(e)}" for c, e in zip(cells, u["effects"], strict=True))
            + ".",
            "",
            f"Fixed: seeds with every step decided at k sessions' blocks ({f['session_s']:.0f} s "
            f"of server time each): {curve}.",
            "",
            "| share of seeds with every step decided | fixed needs | until took | until / fixed |",
            "|---|---|---|---|",
        ]
        for share in (0.5, 0.8):
            ft, ut = _fixed_time(f, share), _until_time(per_seed, share)
            ratio = f"{ut / ft:.2f}" if ft and ut else "—"
            lines.append(f"| {share:.0%} | {_mins(ft)} | {_mins(ut)} | {ratio} |")
    return "\n".join(lines) + "\n"


def _counts(e: dict[str, int]) -> str:
    return " ".join(f"{k} {v}" for k, v in e.items())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=24)
    p.add_argument("--first-seed", type=int, default=1)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--world", action="append", choices=sorted(TARGETS), default=[])
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--stem", default="time_to_decide")
    p.add_argument("--fixed-from", type=Path,
                   help="the fixed design's rows from this result (runs only until-decided)")  # fmt: skip
    p.add_argument("--render", type=Path, help="rewrite STEM.md from this result (runs nothing)")
    a = p.parse_args(argv)
    if a.render:
        result = json.loads(a.render.read_text())
    else:
        worlds = a.world or sorted(TARGETS, reverse=True)
        result = run(a.seeds, a.workers, a.first_seed, worlds, a.fixed_from)
    cv.write(a.out, a.stem, None if a.render else result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

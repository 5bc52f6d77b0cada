"""Does "about N more minutes would likely decide it" come true?

``to_decide_s`` promises that, were the estimate the truth and the spread as measured, that
much more measured time decides an undecided step with probability about 0.8. Measured on
the simulator, where more time can simply be run: the fixed design of
``time_to_decide.py`` (the regime world calibrated to the H200, the true p50 TPOT ratio set to
0.90 or 1.00 at every step; the session's blocks repeated k times on the same servers, read at
compare's plain 95 % interval at each k), and for every step undecided at some k, whether it
is decided at the k that the forecast reaches. The k's are a grid (1-6, then every 2 up to
16), so each forecast is read at two k's: the last one short of it and the first one at or
past it (read on the steps whose forecast reaches no further than k = 16).

Two rules are scored: the product's ``analysis.statistics.effect.to_decide_s`` (``z_0.975 +
z_0.8`` standard errors from the nearer line it must clear) and a candidate that differs
only where the estimate is inside the margin: "the same" needs the CI within both margins at
once, so it asks for the standard error at which that happens four times in five
(``two_sided``; at no change, ``z_0.975 + z_0.9`` from each margin). Results:
``benchmarks/results/forecast.{md,json}``; ``--render`` re-reads a result's stored rows.

Usage: python benchmarks/forecast.py [--seeds N] [--workers N] [--render RESULT]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from statistics import NormalDist
from tempfile import TemporaryDirectory
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent))  # shares.py, siblings.py

from shares import wilson
from siblings import sibling

from specload.analysis.statistics.effect import MIN_MORE, UNDECIDED, to_decide_s
from specload.analysis.statistics.stats import Z975, Estimate

MIN_GAIN = 0.05
#: the two rules scored
RULES = {"today": "today's `to_decide_s`", "two_sided": "candidate: both margins at once"}


def _ttd() -> Any:
    return sibling("time_to_decide.py")


def _inside(ratio: float, min_gain: float) -> bool:
    """Whether a ratio lies strictly inside the margin, where "the same" is the line to clear."""
    return 1.0 - min_gain < ratio < 1.0 + min_gain


def two_sided(est: Estimate, min_gain: float) -> float | None:
    """The candidate's extra time per measured second: the product's rule outside the
    margin; inside it, the standard error at which an estimate drawn around this one shows
    "the same" (its CI, ``z`` standard errors either side, inside both margins) with
    probability 0.8, found by bisection (the probability falls as the error grows)."""
    assert est.value is not None and est.lo is not None and est.hi is not None
    if not _inside(est.value, min_gain):
        return to_decide_s(est, min_gain, 1.0)
    d, se = math.log(est.value), math.log(est.hi / est.lo) / (2 * Z975)
    down, up = math.log(1.0 - min_gain), math.log1p(min_gain)
    phi = NormalDist().cdf
    low, high = 0.0, (up - down) / (2 * Z975)
    for _ in range(60):
        s = (low + high) / 2
        inside = phi((up - Z975 * s - d) / s) - phi((down + Z975 * s - d) / s)
        low, high = (s, high) if inside >= 0.8 else (low, s)
    return max((se / low) ** 2 - 1.0, MIN_MORE)


def one_seed(args: tuple[int, str, list[float]]) -> dict[str, Any]:
    seed, name, regime_truth = args
    ttd = _ttd()
    with TemporaryDirectory() as tmp:
        rows = ttd.fixed(
            ttd.world(name, regime_truth), 100 * seed + 1, ttd.TARGETS[name], Path(tmp)
        )
    for row in rows:  # the forecasts are computed anew from the estimates (``cases``)
        row.pop("to_decide_s")
    return {"seed": seed, "world": name, "fixed": rows}


def cases(per_seed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every (seed, k, step) left undecided, with both forecasts (as extra sessions' worth of
    that step's measured time) and the answers at the k's around each."""
    out = []
    for s in per_seed:
        rows = {r["k"]: r for r in s["fixed"]}
        ks = sorted(rows)
        for k in ks:
            r = rows[k]
            for j, effect in enumerate(r["effects"]):
                if effect != UNDECIDED or r["ci"][j][0] is None:
                    continue
                est = Estimate(r["ratio"][j], *r["ci"][j])
                factors = {
                    "today": to_decide_s(est, MIN_GAIN, 1.0),
                    "two_sided": two_sided(est, MIN_GAIN),
                }
                if None in factors.values():
                    continue
                case = {
                    "seed": s["seed"],
                    "k": k,
                    "step": j,
                    "inside": _inside(est.value, MIN_GAIN),
                }
                for rule, factor in factors.items():
                    # the step's measured time grows with k: k (1 + factor) sessions reach it
                    reach = k * (1.0 + factor)
                    past = [x for x in ks if x >= reach]
                    short = max(x for x in ks if k <= x <= reach)  # k itself: undecided
                    case[rule] = {
                        "sessions": reach - k,
                        "short": None if not past else rows[short]["effects"][j] != UNDECIDED,
                        "past": None if not past else rows[past[0]]["effects"][j] != UNDECIDED,
                    }
                out.append(case)
    return out


def summarise(all_cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Per side of the margin and rule, the share decided at each reading, on the steps both
    rules can score (both forecasts reach no further than the last k), and how many steps
    each rule's forecast sends past it."""
    out: dict[str, Any] = {}
    for where in ("outside", "inside"):
        sel = [c for c in all_cases if c["inside"] == (where == "inside")]
        both = [c for c in sel if all(c[rule]["past"] is not None for rule in RULES)]
        out[where] = {"steps": len(sel), "scored": len(both)}
        for rule in RULES:
            row: dict[str, Any] = {"past_the_grid": sum(c[rule]["past"] is None for c in sel)}
            for side in ("short", "past"):
                got = [bool(c[rule][side]) for c in both]
                row[side] = {"decided": sum(got), "ci": list(wilson(sum(got), len(got)))}
            out[where][rule] = row
    return out


def result_of(per_seed: list[dict[str, Any]], worlds: list[str]) -> dict[str, Any]:
    """The summary per world from the fixed design's rows (the cases are derived from them
    again by ``--render``, so they are not stored)."""
    out: dict[str, Any] = {}
    for name in worlds:
        mine = [s for s in per_seed if s["world"] == name]
        out[name] = {"summary": summarise(cases(mine)), "per_seed": mine}
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# Does the time to decide come true? (benchmarks/forecast.py)",
        "",
        f"Seeds {result['first_seed']}..{result['first_seed'] + result['seeds'] - 1} per world; the fixed "
        "design of `time_to_decide.py` (regime world calibrated to the H200, true p50 TPOT ratio "
        "set at every step; the session's blocks repeated k times, compare's plain 95 % "
        "interval at each k = 1-6, 8, ..., 16). For each step undecided at some k: is it decided "
        "at the k its forecast reaches? The grid brackets it: **short**, the last k before the "
        "forecast (k itself where none lies between); **past**, the first k at or after it. "
        "Scored: the steps where both rules' forecasts reach no further than k = 16, so that "
        "every reading exists. The promise is about 0.8.",
        "",
        "| world | estimate | forecast | undecided steps / scored / forecast past k = 16 | "
        "decided, short | decided, past |",
        "|---|---|---|---|---|---|",
    ]
    wheres = {"outside": "outside ±5 % (helps or hurts)", "inside": "inside ±5 % (the same)"}
    for wname, w in result["worlds"].items():
        for where in ("outside", "inside"):
            sm = w["summary"][where]
            n = sm["scored"]
            for rule, label in RULES.items():
                r = sm[rule]
                cells = [
                    f"{r[s]['decided']}/{n} = {r[s]['decided'] / n:.2f} "
                    f"({r[s]['ci'][0]:.2f}–{r[s]['ci'][1]:.2f})"
                    if n
                    else "—"
                    for s in ("short", "past")
                ]
                lines.append(
                    f"| {wname} | {wheres[where]} | {label} | {sm['steps']} / {n} / "
                    f"{r['past_the_grid']} | {cells[0]} | {cells[1]} |"
                )
    lines += [
        "",
        "Outside the margin the two rules are one and the same. A step decided at one k may be "
        "undecided at a later one (its CI moved), so 'past' can read below 'short'. "
        f"Wall time: {result['wall_s']:.0f} s.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--first-seed", type=int, default=1)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--worlds", nargs="+", default=["effect-10", "effect-0"])
    p.add_argument("--render", type=Path, default=None, metavar="RESULT",
                   help="re-read a result's stored rows (no simulation): the forecasts anew")  # fmt: skip
    args = p.parse_args(argv)
    ttd = _ttd()
    if args.render:
        result = json.loads(args.render.read_text())
        per_seed = [s for w in result["worlds"].values() for s in w["per_seed"]]
        result["worlds"] = result_of(per_seed, list(result["worlds"]))
    else:
        result = simulate(args, ttd)
    (ttd.OUT / "forecast.json").write_text(json.dumps(result, indent=1) + "\n")
    (ttd.OUT / "forecast.md").write_text(markdown(result))
    print(markdown(result))
    return 0


def simulate(args: argparse.Namespace, ttd: Any) -> dict[str, Any]:
    regime = json.loads((ttd.OUT / "coverage.json").read_text())["worlds"]["regime"]["truth"]
    t = time.time()
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    jobs = [(s, n, regime["ratios"]) for n in args.worlds for s in seeds]
    with ProcessPoolExecutor(args.workers) as pool:
        per_seed = list(pool.map(one_seed, jobs))
    return {"seeds": args.seeds, "first_seed": args.first_seed, "min_gain": MIN_GAIN,
            "worlds": result_of(per_seed, args.worlds), "wall_s": time.time() - t}  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())

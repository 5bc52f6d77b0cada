"""Can an interval about *this config* (over server starts) decide as often as one start's?

Issue "Decide, or say how long", item 4, asks that the share of decided steps not fall as
starts go 1 -> 3 -> 5 at equal time per start. This reads the committed
``results/coverage_paired.json`` (no simulation): each seed's per-start p50 TPOT of the
multi-start designs (``start_p50``) and the same seed's one-start CI, and scores one more
interval over starts against the population's truth, by the one rule (``effect.classify``):

- the mean of the starts' log ratios (spec / baseline, paired by start) with a t interval on
  k - 1 degrees of freedom, its variance floored at the within-start variance (Knapp-Hartung
  as modified by Roever et al. 2015: starts cannot agree more closely than each is measured).
  The within-start variance is approximated from the same seed's one-start design: its CI's
  half-width on a log scale over 2.5 (its t quantile for six units is 2.57).

Beside it: the shares the committed designs decided (compare's own intervals) and the
one-start designs' decided share, which the target compares against.

Usage: python benchmarks/config_interval.py
Results: ``benchmarks/results/config_interval.{md,json}``.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from specload.analysis.statistics.effect import UNDECIDED, classify
from specload.analysis.statistics.stats import Estimate, t975

RESULTS = Path(__file__).resolve().parent / "results"
SOURCE = RESULTS / "coverage_paired.json"
MIN_GAIN = 0.05
#: the one-start CI's half-width on a log scale over this is its standard error (t, 5 df)
ONE_START_T = 2.5


def _interval(ys: list[float], within_var: float) -> tuple[float, float, float]:
    """The ratio and its 95 % interval over k starts' log ratios (module doc)."""
    k = len(ys)
    mean = statistics.fmean(ys)
    var = max(statistics.variance(ys), within_var)
    half = t975(k - 1) * math.sqrt(var / k)
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def _design(world: dict[str, Any], kind: str, k: int) -> dict[str, Any] | None:
    name, one = f"{kind}-{k}", f"{kind}-1"
    seeds = [s for s in world["per_seed"] if name in s and one in s]
    if not seeds:
        return None
    truth = world["truth"]["ratios"]
    covered = decided = decided_now = n = 0
    widths: list[float] = []
    for seed in seeds:
        starts = seed[name]["start_p50"]
        for c, t in enumerate(truth):
            ys = [
                math.log(s[c] / b[c])
                for s, b in zip(starts["spec"], starts["baseline"], strict=True)
                if s[c] and b[c]
            ]
            lo1, hi1 = seed[one]["cells"][c]["ci"]
            if len(ys) < k or not lo1:
                continue
            within = ((math.log(hi1) - math.log(lo1)) / (2 * ONE_START_T)) ** 2
            v, lo, hi = _interval(ys, within)
            n += 1
            covered += lo <= t <= hi
            widths.append(hi - lo)
            decided += classify(Estimate(v, lo, hi), MIN_GAIN) != UNDECIDED
            decided_now += seed[name]["cells"][c]["effect"] != UNDECIDED
    one_decided = [
        seed[one]["cells"][c]["effect"] != UNDECIDED for seed in seeds for c in range(len(truth))
    ]
    return {
        "design": name,
        "seed_steps": n,
        "coverage": covered / n,
        "decided": decided / n,
        "median_width": statistics.median(widths),
        "decided_by_compare": decided_now / n,
        "one_start_decided": sum(one_decided) / len(one_decided),
    }


def main() -> None:
    data = json.loads(SOURCE.read_text())
    rows = []
    for world_name, world in data["worlds"].items():
        for kind in ("contiguous", "interleaved"):
            for k in (3, 5):
                row = _design(world, kind, k)
                if row is not None:
                    rows.append({"world": world_name, **row})
    (RESULTS / "config_interval.json").write_text(json.dumps(rows, indent=2) + "\n")
    lines = [
        "# An interval about this config over starts, scored offline (`benchmarks/config_interval.py`)",
        "",
        (__doc__ or "").split("\n\n", 1)[1].split("Usage:")[0].strip(),
        "",
        "| world | design | seed-steps | coverage | decided | median width | decided by compare "
        "today | one start decided (its own claim) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {r['world']} | {r['design']} | {r['seed_steps']} | {r['coverage']:.2f} | "
        f"{r['decided']:.2f} | {r['median_width']:.3f} | {r['decided_by_compare']:.2f} | "
        f"{r['one_start_decided']:.2f} |"
        for r in rows
    ]
    text = "\n".join(lines) + "\n"
    (RESULTS / "config_interval.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()

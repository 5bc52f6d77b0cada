"""Same windows, same answer? The contiguous ladder against interleaved blocks, on the simulator.

The issue this answers: on an H200 the draft-model speculative step flips between a fast and a
slow regime in windows of seconds, so a ladder that measures each (condition, step) once, in
one contiguous window, mixes that drift into the load effect. Here, on the simulator with the
calibrated time regime (``--spec-regime calibrated``; no per-start host jitter, so the truth
is one host's long-run ratio), ``benchmarks/coverage.py``'s machinery runs >= 20 seeds of
each design at equal server time (72 s per step and condition):

- ``contiguous-1``: one window per (condition, step), 12 s warm-up + 60 s, as today's ladder;
- ``interleaved-1``: one ``sweep --interleave`` session, 6 blocks of 10 s after 2 s warm-up.

Reported per step: how the seeds' answers by the one rule split (helps / no change / hurts),
the spread of the point ratio over seeds (10th-90th percentile), the CI's coverage of the true
ratio and its median width. Results: ``benchmarks/results/interleave.md`` and ``.json``.

Usage: python benchmarks/interleave.py [--seeds N] [--workers N]
       python benchmarks/interleave.py --from-json benchmarks/results/interleave.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent))  # siblings.py

from siblings import sibling

WORLD = "regime"


def markdown(result: dict[str, Any]) -> str:
    w = result["worlds"][WORLD]
    lines = [
        "# Contiguous windows against interleaved blocks (benchmarks/interleave.py)",
        "",
        f"Simulator `h200-llama8b` with the calibrated time regime, {result['seeds']} seeds per "
        "design, p50 TPOT ratio spec / baseline, equal server time (72 s per step and "
        "condition). Answers by the rule (5 % and a CI that excludes no change): helps / no "
        "change / hurts, counted over seeds. Spread: 10th-90th percentile of the seeds' point "
        "ratios. Coverage: share of seeds whose 95 % CI holds the true ratio (the pooled p50s "
        f"of {w['truth'].get('starts', 8)} long runs, {w['truth'].get('s', 150.0):g} s each "
        "per step). Every window runs on a fresh engine whose own draws (accepted drafts) are "
        "seeded by that window.",
        "",
        "| step | truth | design | answers (helps/neither/hurts) | spread | coverage | CI width |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, cell in enumerate(result["cells"]):
        for name, d in w["designs"].items():
            c = d["cells"][i]
            e = c["effects"]
            neither = sum(e.values()) - e.get("helps", 0) - e.get("hurts", 0)
            answers = f"{e.get('helps', 0)} / {neither} / {e.get('hurts', 0)}"
            lo, hi = c["ratio_p10_p90"]
            lines.append(
                f"| {cell} | {c['true_ratio']:.3f} | {name} | {answers} | {lo:.3f}–{hi:.3f} | "
                f"{c['coverage']:.2f} | {c['median_width']:.3f} |"
            )
    stops = {name: d["stop_coverage"] for name, d in w["designs"].items()}
    lines += [
        "",
        f"True crossover (stop helping, p50 TPOT, 5 %): {w['truth']['stop']:.2f} req/s. Its CI "
        "held it in: "
        + ", ".join(
            f"{n} {v:.2f} of {w['designs'][n]['stop_n']} seeds with a stop"
            for n, v in stops.items()
            if v is not None
        )
        + ".",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--from-json", type=Path, help="render an earlier result instead of running")
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    if a.from_json:
        result = json.loads(a.from_json.read_text())
    else:
        cov: Any = sibling("coverage.py")
        result = cov.run(a.seeds, a.workers, [WORLD], cov.KINDS)
        (a.out / "interleave.json").write_text(json.dumps(result, indent=2) + "\n")
    text = markdown(result)
    (a.out / "interleave.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

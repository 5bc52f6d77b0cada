"""Several server starts of one config: do they agree, and how wide is the CI once all are
in it?

Reads the run dirs of a replicate sweep (``benchmarks/gpu/run.sh``'s ``OUT/sweep``, or any
folder holding ``baseline spec baseline-r2 spec-r2 ...`` / ``...-r1``, or their ``.tar.gz``) and writes, with specload's
own analysis (the same code ``specload compare`` runs):

1. p50 TPOT per start and rate, with its within-start 95 % CI, baseline and spec side by side
   (per start);
2. spec / baseline per rate: each start against its interleaved partner baseline start (the
   answer one start would have given) and both pooled (hierarchical bootstrap), with the
   CI widths;
3. the pattern (status) each start shows alone and pooled;
4. the decode step time per start (median chunk gap) with tokens per chunk.

    python benchmarks/gpu/replicates_table.py benchmarks/results/gpu-h200-replicates \\
        --out benchmarks/results/gpu-h200-replicates/table.md
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from specload.analysis.compare import compare_runs
from specload.analysis.decisions.replicates import (
    order_starts,
    per_start_comparisons,
    per_start_steps,
)
from specload.analysis.diagnostics.decode_step import decode_steps
from specload.analysis.inputs.run_columns import load_runs
from specload.analysis.statistics.steps import StepStats, condition_steps
from specload.report.verdict_words import verdicts

METRIC = "tpot_p50"
MIN_GAIN = 0.05


def run_dirs(src: Path, scratch: Path) -> list[Path]:
    """Run dirs under ``src``: folders with run.json, else ``*.tar.gz`` unpacked into scratch."""
    found = sorted(p.parent for p in src.glob("*/run.json") if p.parent.name != "report")
    if found:
        return found
    for tgz in sorted(src.glob("*-r*.tar.gz")):
        with tarfile.open(tgz) as tar:
            tar.extractall(scratch, filter="data")
    return sorted(p.parent for p in scratch.glob("*/run.json"))


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v * 1000:.2f}"


def _by_q(steps: list[StepStats]) -> dict[float, StepStats]:
    return {s.target_qps: s for s in steps}


def _step_gap(run: Any) -> dict[float, tuple[float | None, float | None]]:
    """Median decode step (chunk gap) and tokens per chunk per rate of one start."""
    return {d.target_qps: (d.chunk_gap_s, d.tokens_per_chunk) for d in decode_steps([run], {})}


def analyse(dirs: list[Path], bootstrap: int) -> dict[str, Any]:
    runs = load_runs(dirs)
    by_label: dict[str, list[Any]] = {}
    for r in runs:
        by_label.setdefault(r.label, []).append(r)
    base = per_start_steps("baseline", by_label["baseline"], bootstrap, 0)
    spec = per_start_steps("spec", by_label["spec"], bootstrap, 0)
    pooled_base = condition_steps("baseline", by_label["baseline"], b=bootstrap)
    starts = order_starts(by_label["baseline"]), order_starts(by_label["spec"])
    per_start = []
    comparisons = per_start_comparisons(spec, base, pooled_base, METRIC, MIN_GAIN)
    for i, (cmp, b) in enumerate(zip(comparisons, base, strict=True), 1):
        gaps_b, gaps_s = _step_gap(starts[0][i - 1]), _step_gap(starts[1][i - 1])
        per_start.append(
            {
                "start": i,
                "runs": [b.run, cmp.start.run],
                "status": cmp.crossover.status if cmp.crossover else None,
                "rates": [
                    {
                        "qps": w.target_qps,
                        "baseline": _by_q(b.steps)[w.target_qps].latency[METRIC].to_dict(),
                        "spec": _by_q(cmp.start.steps)[w.target_qps].latency[METRIC].to_dict(),
                        "ratio": w.ratio.to_dict(),
                        "effect": w.effect,
                        "step_gap_s": {
                            "baseline": gaps_b.get(w.target_qps),
                            "spec": gaps_s.get(w.target_qps),
                        },
                    }
                    for w in cmp.rows
                ],
            }
        )
    pooled = compare_runs(dirs, baseline="baseline", bootstrap=bootstrap)
    x = pooled.crossover("spec", METRIC)
    return {
        "metric": METRIC,
        "min_gain": MIN_GAIN,
        "per_start": per_start,
        "pooled": {
            "status": x.status if x else None,
            "replicate_statuses": x.replicate_statuses if x else [],
            "verdict": verdicts(pooled).get("spec"),
            "rates": [
                {"qps": w.target_qps, "ratio": w.ratio.to_dict(), "effect": w.effect}
                for w in pooled.ratios["spec"][METRIC]
            ],
        },
        "hosts": sorted({json.dumps((r.meta.host or {}).get("gpu"), sort_keys=True) for r in runs}),
    }


def _pct(e: dict[str, Any]) -> str:
    v, lo, hi = e["value"], e["lo"], e["hi"]
    if v is None:
        return "—"
    ci = f" ({(lo - 1) * 100:+.1f}…{(hi - 1) * 100:+.1f})" if lo is not None else ""
    return f"{(v - 1) * 100:+.1f} %{ci}"


def _width(e: dict[str, Any]) -> float | None:
    return None if e["lo"] is None else (e["hi"] - e["lo"]) * 100


def render(a: dict[str, Any]) -> str:
    starts = a["per_start"]
    qps = [r["qps"] for r in starts[0]["rates"]]
    out = ["# Server starts of one config: each start alone and pooled", ""]
    out += ["## p50 TPOT per start (ms, within-start 95 % CI)", ""]
    head = (
        "| rate (req/s) | "
        + " | ".join(f"start {s['start']} baseline | start {s['start']} spec" for s in starts)
        + " |"
    )
    out += [head, "|---:|" + "---:|" * (2 * len(starts))]
    for i, q in enumerate(qps):
        cells = []
        for s in starts:
            r = s["rates"][i]
            for side in ("baseline", "spec"):
                e = r[side]
                cells.append(f"{_ms(e['value'])} ({_ms(e['lo'])}–{_ms(e['hi'])})")
        out.append(f"| {q:g} | " + " | ".join(cells) + " |")
    out += ["", "## spec / baseline p50 TPOT: each start alone vs both pooled", ""]
    out += [
        "| rate (req/s) | "
        + " | ".join(f"start {s['start']} alone" for s in starts)
        + " | pooled (hierarchical) | CI width: starts alone / pooled (pp) |",
        "|---:|" + "---:|" * (len(starts) + 2),
    ]
    for i, q in enumerate(qps):
        alone = [s["rates"][i] for s in starts]
        pooled = a["pooled"]["rates"][i]
        widths = " / ".join(
            f"{w:.1f}" if (w := _width(r["ratio"])) is not None else "—" for r in alone
        )
        pw = _width(pooled["ratio"])
        cells = [f"{_pct(r['ratio'])} {r['effect']}" for r in alone]
        out.append(
            f"| {q:g} | "
            + " | ".join(cells)
            + f" | {_pct(pooled['ratio'])} {pooled['effect']} | {widths} / "
            + (f"{pw:.1f}" if pw is not None else "—")
            + " |"
        )
    out += ["", "Effects by specload's one rule (at least 5 % and the 95 % CI clear of 0).", ""]
    out += ["## The pattern each start shows", ""]
    for s in starts:
        out.append(f"- start {s['start']} ({', '.join(s['runs'])}): `{s['status']}`")
    out.append(
        f"- pooled: `{a['pooled']['status']}`; per-start statuses "
        f"{a['pooled']['replicate_statuses']}"
    )
    out += ["", f"Verdict (`specload compare`): {a['pooled']['verdict']}", ""]
    out += ["## Decode step time per start (median chunk gap, ms; tokens per chunk)", ""]
    out += [
        "| rate (req/s) | "
        + " | ".join(f"start {s['start']} baseline | start {s['start']} spec" for s in starts)
        + " |",
        "|---:|" + "---:|" * (2 * len(starts)),
    ]
    for i, q in enumerate(qps):
        cells = []
        for s in starts:
            g = s["rates"][i]["step_gap_s"]
            for side in ("baseline", "spec"):
                v = g[side]
                cells.append("—" if v is None else f"{v[0] * 1000:.2f} ({v[1]:.2f})")
        out.append(f"| {q:g} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("src", type=Path, help="folder of run dirs or of their .tar.gz")
    p.add_argument("--out", type=Path, required=True, help="table.md (table.json beside it)")
    p.add_argument("--bootstrap", type=int, default=1000)
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        dirs = run_dirs(a.src, Path(scratch))
        if not dirs:
            sys.exit(f"{a.src}: no run dirs")
        result = analyse(dirs, a.bootstrap)
    text = render(result)
    a.out.write_text(text)
    a.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

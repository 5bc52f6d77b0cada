"""How fast is ``specload compare`` on a million records? (Goal: <= 10 s on a 2-core machine.)

Synthesises run directories in the documented format (tests/analysis/synth_rundir.py): two
conditions (baseline, spec) x 5 steps x N records per step, 1,000,000 records in all by
default, with metrics.jsonl. Then times, in this process and separately:
  load      reading requests.jsonl (orjson, chunked) into numpy columns
  analysis  the rest of compare_runs (per-step stats, 1000 bootstrap replicates, crossover, ...)
  reports   report.md + report.json + report.html (9 SVG plots)
Records carry ``itl_s: null`` (a scenario with ``record_itl: false``) unless ``--itl K`` adds a
K-element chunk-gap list to each, which makes the files and the parse proportionally larger.

    .venv/bin/python benchmarks/compare_speed.py [--records 1000000] [--itl 0] [--keep DIR]

Prints the figures and writes benchmarks/results/compare_speed.json (or compare_speed_itlK.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from analysis.synth_rundir import SPEC, Cond, linear_gain, write_run

from specload.analysis import compare as compare_mod
from specload.analysis.load import load_run
from specload.report import write_reports

QPS = (2.0, 4.0, 8.0, 16.0, 32.0)


def _cpu_s() -> float:
    """CPU seconds of this process and its (finished) children: the machine is shared."""
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _generate(root: Path, records: int, itl: int) -> list[Path]:
    per_step = records // (2 * len(QPS))
    conds = [
        Cond("baseline"),
        Cond("spec", speculative=SPEC, tpot=linear_gain(0.25, 2, 0.1), acceptance_rate=0.6),
    ]
    paths = []
    for c in conds:
        path = root / c.label
        if not (path / "run.json").exists():
            write_run(
                path,
                c,
                qps=QPS,
                n=per_step,
                warm=0,
                itl=itl > 0,
                out_tokens=max(2, itl * 2 + 1) if itl else 64,
            )
        paths.append(path)
    return paths


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--itl", type=int, default=0, help="chunk gaps per record (0: itl_s null)")
    ap.add_argument(
        "--keep", type=Path, help="generate into / reuse this folder instead of a temp dir"
    )
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="specload-compare-bench-"))
    t = time.perf_counter()
    runs = _generate(root, args.records, args.itl)
    gen_s = time.perf_counter() - t
    size = sum((p / "requests.jsonl").stat().st_size for p in runs)

    t0 = time.perf_counter()
    loaded = [load_run(p) for p in runs]
    load_s = time.perf_counter() - t0
    n = sum(r.n for r in loaded)
    del loaded
    cpu0 = _cpu_s()
    t1 = time.perf_counter()
    comparison = compare_mod.compare_runs(runs)  # loads again: compare time includes its own load
    compare_s = time.perf_counter() - t1
    compare_cpu_s = _cpu_s() - cpu0
    t2 = time.perf_counter()
    write_reports(comparison, root / "report")
    reports_s = time.perf_counter() - t2
    total = compare_s + reports_s
    result = {
        "records": n,
        "requests_jsonl_mb": round(size / 1e6, 1),
        "itl_per_record": args.itl,
        "load_s": round(load_s, 2),
        "compare_s": round(compare_s, 2),
        "compare_cpu_s": round(compare_cpu_s, 2),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "reports_s": round(reports_s, 2),
        "compare_plus_reports_s": round(total, 2),
        "goal_s": 10.0,
        "meets_goal": compare_s <= 10.0,
        "bootstrap_replicates": comparison.bootstrap,
        "generate_s": round(gen_s, 1),
        "verdict": comparison.verdict,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    print(
        f"compare on {n:,} records ({result['requests_jsonl_mb']} MB of requests.jsonl): "
        f"{compare_s:.2f} s wall, {compare_cpu_s:.2f} s CPU (a separate load alone: {load_s:.2f} s); "
        f"reports {reports_s:.2f} s; total {total:.2f} s (goal <= 10 s for compare)"
    )
    print(f"verdict: {comparison.verdict}")
    name = "compare_speed.json" if args.itl == 0 else f"compare_speed_itl{args.itl}.json"
    out = REPO / "benchmarks" / "results" / name
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

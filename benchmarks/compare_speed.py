"""How fast is ``specload compare`` on a million records? (Goal: <= 10 s on a 2-core machine.)

Synthesises run directories in the documented format (tests/analysis/synth_rundir.py): two
conditions (baseline, spec) x 5 steps x N records per step, 1,000,000 records in all by
default, with metrics.jsonl. Then times compare_runs (reading requests.jsonl into numpy columns
in worker processes, per-step stats with 1000 bootstrap replicates, crossovers, contract, ...)
and, separately, writing report.md + report.json + report.html (9 SVG plots). The machine is
shared, so the CPU seconds (here and in the workers) are written next to the wall time, with
an estimate of the wall time on an idle machine (workers' CPU / workers + this process's CPU).
Records carry ``itl_s: null`` (a scenario with ``record_itl: false``) unless ``--itl K`` adds a
K-element chunk-gap list to each, which makes the files and the parse proportionally larger.
``--replicates R`` writes each condition as R run directories (R server starts, the same
records in all), so every step's percentiles take the two-level bootstrap (run directories, then
requests within each; ``specload/analysis/statistics/stats.py``). Either way the result also times one
percentile's 1000 bootstrap replicates on a step-sized sample, single-level and two-level.

    .venv/bin/python benchmarks/compare_speed.py [--records 1000000] [--itl 0] [--replicates 1]
        [--keep DIR]

Prints the figures and writes benchmarks/results/compare_speed.json (or
compare_speed[_N][_itlK][_replicatesR].json).
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

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from analysis.synth_rundir import SPEC, Cond, linear_gain, write_run

from specload.analysis import compare as compare_mod
from specload.analysis.statistics.stats import bootstrap_quantile, hierarchical_bootstrap_quantile
from specload.report import write_reports
from specload.report.verdict_words import verdict_text

QPS = (2.0, 4.0, 8.0, 16.0, 32.0)


def _cpu_s() -> tuple[float, float]:
    """CPU seconds of this process and of its (finished) children: the machine is shared."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def _generate(root: Path, records: int, itl: int, replicates: int) -> list[str | Path]:
    per_step = records // (2 * len(QPS) * replicates)
    conds = [
        Cond("baseline"),
        Cond("spec", speculative=SPEC, tpot=linear_gain(0.25, 2, 0.1), acceptance_rate=0.6),
    ]
    paths: list[str | Path] = []
    for c in conds:
        for r in range(replicates):
            path = root / (c.label if replicates == 1 else f"{c.label}-r{r + 1}")
            if not (path / "run.json").exists():
                write_run(
                    path,
                    c,
                    qps=QPS,
                    n=per_step,
                    warm=0,
                    seed=r,
                    itl=itl > 0,
                    out_tokens=max(2, itl * 2 + 1) if itl else 64,
                )
            paths.append(path)
    return paths


def _percentile_ms(n: int, replicates: int, b: int = 1000) -> dict[str, float]:
    """Milliseconds for ``b`` bootstrap replicates of one percentile (p50, p99) of n values."""
    rng = np.random.default_rng(0)
    xs = np.sort(rng.lognormal(-4.5, 0.3, n))
    groups = rng.integers(0, max(replicates, 2), n)
    out = {}
    for name, fn in (
        ("single_level", lambda q: bootstrap_quantile(xs, q, b, rng)),
        ("two_level", lambda q: hierarchical_bootstrap_quantile(xs, groups, q, b, rng)),
    ):
        t = time.perf_counter()
        for _ in range(5):
            fn(0.5)
            fn(0.99)
        out[name] = round((time.perf_counter() - t) / 10 * 1000, 2)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--itl", type=int, default=0, help="chunk gaps per record (0: itl_s null)")
    ap.add_argument(
        "--replicates", type=int, default=1, help="run directories (server starts) per condition"
    )
    ap.add_argument(
        "--keep", type=Path, help="generate into / reuse this folder instead of a temp dir"
    )
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="specload-compare-bench-"))
    t = time.perf_counter()
    runs = _generate(root, args.records, args.itl, args.replicates)
    gen_s = time.perf_counter() - t
    size = sum((Path(p) / "requests.jsonl").stat().st_size for p in runs)

    cpu0 = _cpu_s()
    t1 = time.perf_counter()
    comparison = compare_mod.compare_runs(runs)
    compare_s = time.perf_counter() - t1
    cpu1 = _cpu_s()
    main_cpu, workers_cpu = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
    procs = 1 if workers_cpu == 0 else min(os.cpu_count() or 1, 8)
    # The wall time with the machine to ourselves: the workers' share runs in parallel, the
    # rest (spawning, merging, analysis) in this process. An estimate, and labelled so.
    idle_estimate_s = main_cpu + workers_cpu / procs
    n = sum(s.n for steps in comparison.steps.values() for s in steps)
    t2 = time.perf_counter()
    write_reports(comparison, root / "report")
    reports_s = time.perf_counter() - t2
    load_avg = os.getloadavg()[0]
    per_step = args.records // (2 * len(QPS))
    percentile_ms = _percentile_ms(per_step, args.replicates)
    result = {
        "records": n,
        "replicates_per_condition": args.replicates,
        "records_per_step": per_step,
        "requests_jsonl_mb": round(size / 1e6, 1),
        "itl_per_record": args.itl,
        "compare_s": round(compare_s, 2),
        "compare_cpu_s": round(main_cpu + workers_cpu, 2),
        "compare_cpu_main_s": round(main_cpu, 2),
        "compare_cpu_workers_s": round(workers_cpu, 2),
        "worker_processes": procs,
        "idle_machine_estimate_s": round(idle_estimate_s, 2),
        "load_average_1m": round(load_avg, 2),
        "reports_s": round(reports_s, 2),
        "goal_s": 10.0,
        "meets_goal": compare_s <= 10.0,
        "bootstrap_replicates": comparison.bootstrap,
        # One percentile's 1000 replicates on records_per_step values; two_level: two units,
        # Units.of (preparing them, once per metric in compare) included.
        "percentile_bootstrap_ms": percentile_ms,
        "generate_s": round(gen_s, 1),
        "verdict": verdict_text(comparison),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    print(
        f"compare on {n:,} records ({result['requests_jsonl_mb']} MB of requests.jsonl): "
        f"{compare_s:.2f} s wall (goal <= 10 s), {main_cpu + workers_cpu:.2f} s CPU "
        f"({main_cpu:.2f} s here + {workers_cpu:.2f} s in {procs} worker processes); "
        f"load average {load_avg:.1f} on {os.cpu_count()} CPUs; "
        f"with the machine to itself ≈ {idle_estimate_s:.1f} s (estimate); "
        f"reports (md, json, html with 9 plots) {reports_s:.2f} s"
    )
    print(
        f"one percentile, 1000 replicates, {per_step:,} values: single-level "
        f"{percentile_ms['single_level']} ms, two-level {percentile_ms['two_level']} ms"
    )
    print(f"verdict: {verdict_text(comparison)}")
    name = "compare_speed"
    name += "" if args.records == 1_000_000 else f"_{args.records}"
    name += "" if args.itl == 0 else f"_itl{args.itl}"
    name += "" if args.replicates == 1 else f"_replicates{args.replicates}"
    name += ".json"
    out = REPO / "benchmarks" / "results" / name
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

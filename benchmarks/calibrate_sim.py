"""Calibrate the simulator's H200 profile against measured vLLM 0.26 figures, in virtual time.

Runs the simulator's engine model (no sockets: ``specload.sim.virtual``) with the setup
measured in ``benchmarks/data/h200-vllm0.26-llama8b-draft1b.json`` - 512 input / 256
output tokens, ignore_eos, Poisson arrivals, vLLM bench's
``num_prompts = min(max(32, 20 * rate), 800)`` - for baseline, static draft-model speculation
(k=4, acceptance [0.8, 0.55, 0.3, 0.15]) and the dynamic schedule [[1,48,4],[49,1024,0]], and
writes the simulated figures beside the measured ones:

    benchmarks/results/calibration_h200.md   table + checks
    benchmarks/results/calibration_h200.json rows (measured and simulated)

Checks (the profile's acceptance criteria): baseline p50 TPOT within 15 % of measured at 1-28
req/s; the p50 TPOT crossover (spec stops helping) between 16 and 24 req/s. Exit status 1 if a
check fails. ``--fit`` searches profile parameters (Nelder-Mead in log space) and prints them
as YAML for ``specload/sim/profiles/h200-llama8b.yaml``.

Usage: python benchmarks/calibrate_sim.py [--profile h200-llama8b] [--fit base|spec|dynamic] [--check]

``--check`` writes nothing and exits 1 unless the run reproduces the committed results exactly
(virtual time and seeded arrivals make it deterministic).
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

from specload.sim.engine import EngineConfig
from specload.sim.profiles import Profile, load_profile
from specload.sim.spec import parse_spec_config
from specload.sim.virtual import run_poisson

ROOT = Path(__file__).resolve().parent.parent
#: vLLM 0.26.0 ``bench serve`` on one H200 (see benchmarks/data/README.md)
MEASURED = ROOT / "benchmarks" / "data" / "h200-vllm0.26-llama8b-draft1b.json"
OUT = ROOT / "benchmarks" / "results"
SPEC = {
    "method": "draft_model",
    "model": "draft-1b",
    "num_speculative_tokens": 4,
    "rejection_sample_method": "synthetic",
    "synthetic_acceptance_rates": [0.8, 0.55, 0.3, 0.15],
}
CONDITIONS = {
    "baseline": None,
    "spec": SPEC,
    "spec-dynamic": {**SPEC, "num_speculative_tokens_per_batch_size": [[1, 48, 4], [49, 1024, 0]]},
}
FIT_PARAMS = {
    "base": [
        "step_overhead_s",
        "mem_bw_Bps",
        "per_seq_overhead_s",
        "peak_flops",
        "frontend_delay_s",
        "roofline_p",
    ],
    "spec": [
        "draft_step_overhead_s",
        "spec_step_overhead_s",
        "spec_per_seq_overhead_s",
        "verify_flops_scale",
    ],
    "dynamic": ["dynamic_step_overhead_s", "dynamic_per_seq_overhead_s"],
}
FIT_CONDITION = {"base": "baseline", "spec": "spec", "dynamic": "spec-dynamic"}


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def simulate(prof: Profile, condition: str, rate: float, seeds: tuple[int, ...] = (0,)) -> dict:
    """One simulated row in the measured table's units (ms, tokens/s)."""
    spec = parse_spec_config(CONDITIONS[condition]) if CONDITIONS[condition] else None
    n = min(max(32, int(20 * rate)), 800)
    tpot, ttft, itl, e2e, toks, dur, maxc = [], [], [], [], 0, 0.0, 0
    drafts = accepted = 0
    for seed in seeds:
        run = run_poisson(EngineConfig(prof, spec), rate, n, seed=seed)
        for r in run.results:
            ttft.append(r.ttft_s * 1e3)
            e2e.append(r.e2e_s * 1e3)
            if r.tpot_s is not None:
                tpot.append(r.tpot_s * 1e3)
            itl.extend(
                (b - a) * 1e3 for a, b in zip(r.chunk_times, r.chunk_times[1:], strict=False)
            )
            toks += r.output_tokens
        dur += run.duration_s
        maxc = max(maxc, run.max_running)
        drafts += run.metrics.num_drafts
        accepted += run.metrics.num_accepted
    row = {
        "condition": condition,
        "rate_rps": rate,
        "completed": n,
        "output_tok_s": round(toks / dur, 1),
        "ttft_p50_ms": pct(ttft, 0.5),
        "ttft_p95_ms": pct(ttft, 0.95),
        "tpot_p50_ms": pct(tpot, 0.5),
        "tpot_p95_ms": pct(tpot, 0.95),
        "itl_p50_ms": pct(itl, 0.5),
        "itl_p95_ms": pct(itl, 0.95),
        "e2e_p50_ms": pct(e2e, 0.5),
        "max_concurrent": maxc,
    }
    if spec is not None:
        row["num_drafts"] = drafts // len(seeds)
        row["acceptance_length"] = round(1 + accepted / drafts, 3) if drafts else None
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}


def measured_rows() -> list[dict]:
    return json.loads(MEASURED.read_text())["rows"]


def crossover(rows: list[dict], metric: str = "tpot_p50_ms") -> float | None:
    """Lowest load where spec stops helping, interpolated in log-rate (None: never)."""
    base = {r["rate_rps"]: r[metric] for r in rows if r["condition"] == "baseline"}
    spec = {r["rate_rps"]: r[metric] for r in rows if r["condition"] == "spec"}
    rates = sorted(set(base) & set(spec))
    prev = None
    for rate in rates:
        d = spec[rate] / base[rate] - 1
        if d >= 0:
            if prev is None:
                return rate
            r0, d0 = prev
            f = -d0 / (d - d0)
            return math.exp(math.log(r0) + f * (math.log(rate) - math.log(r0)))
        prev = (rate, d)
    return None


def simulate_all(jobs: list[tuple[Profile, str, float]], seeds: tuple[int, ...]) -> list[dict]:
    """``simulate`` for each (profile, condition, rate), on every core: each row is
    independent and seeded, so the rows (and their order) are those of a serial run."""
    if len(jobs) < 2 or (os.cpu_count() or 1) < 2:
        return [simulate(p, c, r, seeds) for p, c, r in jobs]
    with ProcessPoolExecutor() as pool:
        futures = [pool.submit(simulate, p, c, r, seeds) for p, c, r in jobs]
        return [f.result() for f in futures]


def evaluate_jobs(prof: Profile, conditions: tuple[str, ...]) -> list[tuple[Profile, str, float]]:
    return [
        (prof, m["condition"], m["rate_rps"])
        for m in measured_rows()
        if m["condition"] in conditions
    ]


def evaluate(prof: Profile, conditions: tuple[str, ...], seeds: tuple[int, ...]) -> list[dict]:
    return simulate_all(evaluate_jobs(prof, conditions), seeds)


def loss(prof: Profile, condition: str, seeds: tuple[int, ...]) -> float:
    """Squared log error of p50 TPOT (and, lighter, p50 ITL and TTFT) at 1..32 req/s, with a
    hinge penalty beyond 12 % at 1..28 req/s (the acceptance band is 15 %)."""
    total = 0.0
    for m in measured_rows():
        if m["condition"] != condition or m["rate_rps"] > 32:
            continue
        s = simulate(prof, condition, m["rate_rps"], seeds)
        err = math.log(s["tpot_p50_ms"] / m["tpot_p50_ms"])
        weight = 1.0 if m["rate_rps"] <= 28 else 0.3
        total += weight * err**2
        if m["rate_rps"] <= 28:
            total += 10 * max(0.0, abs(err) - 0.12) ** 2
        total += 0.3 * math.log(s["itl_p50_ms"] / m["itl_p50_ms"]) ** 2
        total += 0.2 * math.log(s["ttft_p50_ms"] / m["ttft_p50_ms"]) ** 2
    return total


def nelder_mead(f, x0: list[float], step: float = 0.3, iters: int = 80) -> list[float]:
    """Minimal Nelder-Mead (enough for a handful of log-parameters)."""
    n = len(x0)
    simplex = [list(x0)] + [
        [x + (step if i == j else 0) for j, x in enumerate(x0)] for i in range(n)
    ]
    vals = [f(x) for x in simplex]
    for it in range(iters):
        order = sorted(range(n + 1), key=vals.__getitem__)
        simplex, vals = [simplex[i] for i in order], [vals[i] for i in order]
        print(f"  iter {it}: loss {vals[0]:.4f}", file=sys.stderr, flush=True)
        cen = [sum(p[j] for p in simplex[:-1]) / n for j in range(n)]
        refl = [c + (c - w) for c, w in zip(cen, simplex[-1], strict=False)]
        fr = f(refl)
        if fr < vals[0]:
            exp = [c + 2 * (c - w) for c, w in zip(cen, simplex[-1], strict=False)]
            fe = f(exp)
            simplex[-1], vals[-1] = (exp, fe) if fe < fr else (refl, fr)
        elif fr < vals[-2]:
            simplex[-1], vals[-1] = refl, fr
        else:
            con = [c + 0.5 * (w - c) for c, w in zip(cen, simplex[-1], strict=False)]
            fc = f(con)
            if fc < vals[-1]:
                simplex[-1], vals[-1] = con, fc
            else:
                best = simplex[0]
                simplex = [best] + [
                    [b + 0.5 * (x - b) for b, x in zip(best, p, strict=False)] for p in simplex[1:]
                ]
                vals = [vals[0]] + [f(p) for p in simplex[1:]]
    return simplex[min(range(n + 1), key=vals.__getitem__)]


def fit(prof: Profile, which: str, seeds: tuple[int, ...], iters: int = 40) -> Profile:
    names = FIT_PARAMS[which]
    x0 = [math.log(max(getattr(prof, k), 1e-7)) for k in names]

    def f(x: list[float]) -> float:
        p = prof.with_overrides(**{k: math.exp(v) for k, v in zip(names, x, strict=False)})
        return loss(p, FIT_CONDITION[which], seeds)

    best = nelder_mead(f, x0, step=0.2, iters=iters)
    out = prof.with_overrides(**{k: math.exp(v) for k, v in zip(names, best, strict=False)})
    for k in names:
        print(f"{k}: {getattr(out, k):.4g}")
    return out


def report(sim_rows: list[dict]) -> tuple[str, dict, bool]:
    meas = {(r["condition"], r["rate_rps"]): r for r in measured_rows()}
    checks = []
    worst = 0.0
    for s in sim_rows:
        if (s["condition"], s["rate_rps"]) not in meas:
            continue
        m = meas[(s["condition"], s["rate_rps"])]
        s["tpot_p50_err"] = round(s["tpot_p50_ms"] / m["tpot_p50_ms"] - 1, 4)
        if s["condition"] == "baseline" and 1 <= s["rate_rps"] <= 28:
            worst = max(worst, abs(s["tpot_p50_err"]))
    x_meas, x_sim = crossover(measured_rows()), crossover(sim_rows)
    checks.append(
        ("baseline p50 TPOT within 15 % at 1-28 req/s", worst <= 0.15, f"worst error {worst:.1%}")
    )
    checks.append(
        (
            "p50 TPOT crossover between 16 and 24 req/s",
            x_sim is not None and 16 <= x_sim <= 24,
            (
                f"simulated {x_sim and round(x_sim, 1)} req/s, measured "
                f"{x_meas and round(x_meas, 1)} req/s"
            ),
        )
    )
    lines = [
        "# Simulator calibration: H200, vLLM 0.26, Llama-8B (+1B draft)",
        "",
        (
            f"Measured: `{MEASURED.relative_to(ROOT)}`. Simulated: `benchmarks/calibrate_sim.py` in virtual "
            "time (same lengths, rates, request counts; Poisson arrivals)."
        ),
        "",
        "## Checks",
        "",
    ]
    lines += [f"- {'PASS' if ok else 'FAIL'}: {name} ({detail})" for name, ok, detail in checks]
    lines += [
        "",
        "## p50 / p95 TPOT, p50 TTFT and ITL (ms): measured vs simulated",
        "",
        (
            "| condition | rate | TPOT p50 meas | TPOT p50 sim | err | TPOT p95 meas | "
            "TPOT p95 sim | TTFT p50 meas | TTFT p50 sim | ITL p50 meas | ITL p50 sim | "
            "max conc. meas | sim |"
        ),
        "|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for s in sim_rows:
        if (s["condition"], s["rate_rps"]) not in meas:
            continue
        m = meas[(s["condition"], s["rate_rps"])]
        lines.append(
            f"| {s['condition']} | {s['rate_rps']:g} | {m['tpot_p50_ms']:.2f} | "
            f"{s['tpot_p50_ms']:.2f} | {s['tpot_p50_err']:+.1%} | {m['tpot_p95_ms']:.2f} | "
            f"{s['tpot_p95_ms']:.2f} | {m['ttft_p50_ms']:.1f} | {s['ttft_p50_ms']:.1f} | "
            f"{m['itl_p50_ms']:.2f} | {s['itl_p50_ms']:.2f} | {m['max_concurrent']} | "
            f"{s['max_concurrent']} |"
        )
    ok = all(c[1] for c in checks)
    lines += _dynamic_section(sim_rows)
    data = {
        "measured_source": str(MEASURED.relative_to(ROOT)),
        "checks": [{"name": n, "pass": p, "detail": d} for n, p, d in checks],
        "crossover_rps": {"measured": x_meas, "simulated": x_sim},
        "measured": measured_rows(),
        "simulated": sim_rows,
    }
    return "\n".join(lines) + "\n", data, ok


def ideal_dynamic_jobs(prof: Profile) -> list[tuple[Profile, str, float]]:
    """The dynamic schedule with its per-step overhead set to 0 (the ideal dynamic schedule)."""
    ideal = prof.with_overrides(dynamic_step_overhead_s=0.0, dynamic_per_seq_overhead_s=0.0)
    return [
        (ideal, "spec-dynamic", m["rate_rps"])
        for m in measured_rows()
        if m["condition"] == "spec-dynamic"
    ]


def _dynamic_section(rows: list[dict]) -> list[str]:
    by = {(r["condition"], r["rate_rps"]): r for r in rows}
    meas = {(r["condition"], r["rate_rps"]): r for r in measured_rows()}
    out = [
        "",
        "## Dynamic schedule [[1,48,4],[49,1024,0]]: p50 TPOT (ms)",
        "",
        (
            "Ideal = the simulator with `dynamic_step_overhead_s` = "
            "`dynamic_per_seq_overhead_s` = 0; calibrated = the profile's values, fitted to the "
            "measured rows."
        ),
        "",
        (
            "| rate | base sim | spec sim | dynamic ideal sim | dynamic calibrated sim | "
            "dynamic measured |"
        ),
        "|--:|--:|--:|--:|--:|--:|",
    ]
    for (cond, rate), r in sorted(by.items(), key=lambda kv: kv[0][1]):
        if cond != "spec-dynamic-ideal":
            continue
        out.append(
            f"| {rate:g} | {by[('baseline', rate)]['tpot_p50_ms']:.2f} | "
            f"{by[('spec', rate)]['tpot_p50_ms']:.2f} | {r['tpot_p50_ms']:.2f} | "
            f"{by[('spec-dynamic', rate)]['tpot_p50_ms']:.2f} | "
            f"{meas[('spec-dynamic', rate)]['tpot_p50_ms']:.2f} |"
        )
    return out


def check_committed(data: dict) -> bool:
    """Does this run reproduce the committed results (same profile, same simulated rows)?

    The engine runs in virtual time with seeded arrivals, so a clone reproduces the committed
    figures exactly; a difference means the profile or the simulator changed without the
    results being rewritten."""
    committed = json.loads((OUT / "calibration_h200.json").read_text())
    now = json.loads(json.dumps({k: data[k] for k in ("profile", "simulated")}))
    same = True
    for key in ("profile", "simulated"):
        if committed.get(key) != now[key]:
            same = False
            print(f"DIFFERS from the committed calibration_h200.json: {key!r}", file=sys.stderr)
    if same:
        print("reproduces the committed calibration_h200.json (profile and simulated rows)")
    return same


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="h200-llama8b")
    ap.add_argument("--fit", choices=sorted(FIT_PARAMS), action="append", default=[])
    ap.add_argument("--seeds", type=int, default=2, help="Poisson seeds averaged per row")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 unless the simulated rows and the profile equal "
        "the committed benchmarks/results/calibration_h200.json",
    )
    ap.add_argument("--iters", type=int, default=40, help="Nelder-Mead iterations per --fit")
    a = ap.parse_args()
    prof = load_profile(a.profile)
    seeds = tuple(range(a.seeds))
    for which in a.fit:
        prof = fit(prof, which, seeds, a.iters)
    t0 = time.perf_counter()
    # one pool for every row, the ideal schedule's too
    jobs = evaluate_jobs(prof, tuple(CONDITIONS))
    ideal = ideal_dynamic_jobs(prof)
    rows = simulate_all(jobs + ideal, seeds)
    for row in rows[len(jobs) :]:
        row["condition"] = "spec-dynamic-ideal"
    md, data, ok = report(rows)
    data["profile"] = prof.__dict__
    data["wall_s"] = round(time.perf_counter() - t0, 2)
    print(md)
    print(f"(simulated {len(rows)} rows in {data['wall_s']} s)")
    if a.check:
        return 0 if ok and check_committed(data) else 1
    if not a.no_write:
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "calibration_h200.md").write_text(md)
        (OUT / "calibration_h200.json").write_text(json.dumps(data, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

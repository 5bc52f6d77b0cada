"""Calibrate the simulator's H200 profile against measured vLLM 0.26 figures, in virtual time.

Runs the simulator's engine model (no sockets: ``benchmarks/virtual.py``) with the setup
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

Time regime (``--spec-regime``, section ``regime``): on the same kind of H200 the spec step
flips between ~13.5 and ~20 ms in windows of seconds (``benchmarks/data/h200-regime.json``,
written from the GPU kit's raw records by ``--extract-regime DIR``). A closed loop of one user
on the calibrated sim, 24 starts x 5 x 60 s in virtual time, is read per second exactly like
the measurement and checked against its concurrency-1 figures (176 s over two starts):

    benchmarks/results/calibration_regime.md   table + checks
    benchmarks/results/calibration_regime.json parameters, measured and simulated figures

Checks: fast and slow step within 8 %, slow share (read per second) within 0.05, mean fast and
slow runs within 30 %, and a baseline timeline identical with and without the regime.
``--fit regime`` fits the profile's three fields (a fixed-point iteration on that replay) and
why each has its value:

- ``spec_regime_factor`` 2.31: the factor on the launch-bound speculation time (4.8 ms of the
  13.5-ms one-request step) that makes the slow step the measured 19.8 ms: 1 + (19.77 -
  13.58) / 4.78 = 2.29 read off the step, 2.31 after the replay (its fast step is 13.53 ms);
- ``spec_regime_mean_fast_s`` 4.7 and ``spec_regime_mean_slow_s`` 3.2: the exponential means
  whose replay, read per second, shows the measured slow share (0.364) and mean fast + slow
  run (7.0 + 3.8 s). They are shorter than the read runs, and the model's share (0.405)
  higher than the read one, because reading per second merges and misses windows shorter
  than about a second, on the hardware as in the replay. The fast step is the profile's own
  (13.5 ms at one request), fitted to the p50 TPOT rows above: no parameter of its own.

Usage: python benchmarks/calibrate_sim.py [--profile h200-llama8b] [--fit base|spec|dynamic|regime]
[--section all|tpot|regime] [--check] [--extract-regime DIR]

``--check`` writes nothing and exits 1 unless the run reproduces the committed results exactly
(virtual time and seeded arrivals make it deterministic).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import re
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent))  # virtual.py, beside this file

from virtual import VirtualRun, run_closed, run_poisson

from specload.sim.costmodel import BatchShape, spec_launch_time
from specload.sim.engine import EngineConfig
from specload.sim.host import draw_host
from specload.sim.profiles import Profile, load_profile
from specload.sim.regime import RegimeParams
from specload.sim.spec import parse_spec_config

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


# -- time regime (--spec-regime): benchmarks/data/h200-regime.json ---------------------------
#
# The measurement: on the H200 of the calibration, the spec step flipped between ~13 and ~20 ms
# in windows of seconds, at any load; the baseline's did not. How it is read (the same code
# reads the measured records and the simulated ones): per request, chunk arrival times are
# first_token_at plus the running sum of itl_s (zeros are tokens of the same chunk), and each
# non-zero gap is one engine step; per load step, the median gap of each second (binned by
# arrival, from the step's first non-warm-up send) is "slow" when above SLOW_RATIO x the step's
# 20th percentile of per-second medians. Fast and slow step = median gap over the fast and the
# slow seconds; runs = maximal stretches of seconds of one kind (a run cut by the step's end
# is censored), mean run = seconds of that kind / completed runs of it (the exponential's
# maximum-likelihood mean under censoring).

REGIME_DATA = ROOT / "benchmarks" / "data" / "h200-regime.json"
#: The finding's rule for a slow second (above 1.35 x the step's 20th percentile).
SLOW_RATIO = 1.35
#: The virtual replay: one start per seed (its regime seed), a closed loop of one user from
#: t = 0 (512 in / 256 out, as measured), cut like the measurement into REGIME_STEPS steps of
#: REGIME_STEP_S seconds after a REGIME_WARMUP_S warm-up; 24 x 5 x 60 s = 2 h of load, so
#: the simulated share sits within about +-0.01 of its long-run value.
REGIME_SEEDS = tuple(range(1, 25))
REGIME_WARMUP_S = 5.0
REGIME_STEP_S = 60.0
REGIME_STEPS = 5
#: The check: simulated vs measured at concurrency 1 (relative for steps and runs, absolute
#: for the share). Steps within 8 %: 1.1-1.6 ms, a quarter of the 6.2-ms gap between the
#: regimes, so a wrong factor fails. Share within 0.05: the two measured c=1 starts read 0.41
#: and 0.34 around their pooled 0.36. Runs within 30 %: about one standard error of a mean over
#: the ~16 completed runs of each kind measured.
REGIME_TOL = {"fast_step_ms": 0.08, "slow_step_ms": 0.08, "slow_share": 0.05, "mean_run_s": 0.30}
REGIME_FIT_ITERS = 6


@dataclass
class StepClass:
    """One load step read per second: its fast/slow seconds and the gaps in each."""

    label: str
    load: str
    p20_ms: float
    states: str  # one character a second: "S" slow, "." fast, "?" no chunk
    second_median_ms: list[float | None]
    fast_gaps: list[float] = field(default_factory=list, repr=False)
    slow_gaps: list[float] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict:
        known = [c for c in self.states if c != "?"]
        return {
            "start": self.label,
            "load": self.load,
            "seconds": len(known),
            "slow_share": round(known.count("S") / len(known), 4),
            "p20_ms": round(self.p20_ms, 2),
            "fast_step_ms": _ms(self.fast_gaps),
            "slow_step_ms": _ms(self.slow_gaps),
            "states": self.states,
            "second_median_ms": [None if m is None else round(m, 2) for m in self.second_median_ms],
        }


def _ms(gaps: list[float]) -> float | None:
    return round(1e3 * statistics.median(gaps), 2) if gaps else None


def classify_step(
    label: str, load: str, gaps: list[tuple[float, float]], t0: float, t1: float
) -> StepClass:
    """Bin (arrival, gap) pairs in [t0, t1) per second and mark each second fast or slow."""
    bins: list[list[float]] = [[] for _ in range(int(t1 - t0))]
    for t, g in gaps:
        k = math.floor(t - t0)
        if 0 <= k < len(bins):
            bins[k].append(g)
    med = [1e3 * statistics.median(b) if b else None for b in bins]
    p20 = pct([m for m in med if m is not None], 0.2)
    states = "".join("?" if m is None else "S" if m > SLOW_RATIO * p20 else "." for m in med)
    out = StepClass(label, load, p20, states, med)
    for b, s in zip(bins, states, strict=True):
        (out.slow_gaps if s == "S" else out.fast_gaps if s == "." else []).extend(b)
    return out


def state_runs(states: str) -> list[tuple[str, int, bool]]:
    """(kind, seconds, completed) of each run; completed = ended by a switch to the other kind."""
    runs: list[tuple[str, int, bool]] = []
    for m in re.finditer(r"S+|\.+", states):
        after = states[m.end() : m.end() + 1]
        runs.append((m.group()[0], len(m.group()), after in ("S", ".")))
    return runs


def pool_steps(steps: list[StepClass]) -> dict:
    """Pooled figures over steps: step times over all their gaps, shares over all seconds."""
    runs = [r for s in steps for r in state_runs(s.states)]
    out: dict = {"steps": len(steps)}
    secs = {k: sum(n for kind, n, _ in runs if kind == k) for k in "S."}
    out["seconds"] = secs["S"] + secs["."]
    out["slow_share"] = round(secs["S"] / out["seconds"], 4)
    out["fast_step_ms"] = _ms([g for s in steps for g in s.fast_gaps])
    out["slow_step_ms"] = _ms([g for s in steps for g in s.slow_gaps])
    for k, name in (("S", "slow"), (".", "fast")):
        done = [n for kind, n, ok in runs if kind == k and ok]
        out[f"mean_{name}_run_s"] = round(secs[k] / len(done), 3) if done else None
        out[f"{name}_runs_s"] = done
        out[f"{name}_runs_censored_s"] = [n for kind, n, ok in runs if kind == k and not ok]
    return out


def _chunk_gaps(rec: dict) -> list[tuple[float, float]]:
    t, out = rec["first_token_at"], []
    for g in rec["itl_s"]:
        t += g
        if g > 0:
            out.append((t, g))
    return out


def _record_steps(path: Path) -> list[tuple[str, float, float, list[tuple[float, float]]]]:
    """(load, t0, t1, gaps) per load step of one start's specload records: from the step's
    first non-warm-up send to the next step's first schedule (the last: its last send)."""
    with gzip.open(path, "rt") as f:
        recs = [json.loads(line) for line in f if line.strip()]
    by_step: dict[int, list[dict]] = {}
    for r in recs:
        by_step.setdefault(r["step"], []).append(r)
    out = []
    order = sorted(by_step)
    for i, s in enumerate(order):
        live = [r for r in by_step[s] if r.get("ok") and not r.get("warmup")]
        t0 = min(r["sent_at"] for r in live)
        if i + 1 < len(order):
            t1 = min(r["scheduled_at"] for r in by_step[order[i + 1]])
        else:
            t1 = max(r["sent_at"] for r in live)
        c = live[0].get("concurrency")
        load = f"concurrency {c}" if c else f"{live[0]['target_qps']:g} req/s"
        out.append((load, t0, t1, [g for r in live for g in _chunk_gaps(r)]))
    return out


def extract_regime(src: Path) -> dict:
    """The compact summary of the raw H200 regime data in ``src`` (benchmarks/data/README.md)."""
    spec: list[StepClass] = []
    base: list[StepClass] = []
    for name, into in (
        ("kit-spec", spec),
        ("probe2-spec", spec),
        ("kit-baseline", base),
    ):
        for load, t0, t1, gaps in _record_steps(src / f"{name}-requests.jsonl.gz"):
            into.append(classify_step(name.split("-")[0], load, gaps, t0, t1))
    c1 = [s for s in spec if s.load == "concurrency 1"]
    return {
        "what": (
            "Speculative decoding's engine step flips in time between a fast and a slow "
            "regime on one H200 (vLLM 0.26.0, draft_model k=4); the baseline step does not."
        ),
        "setup": (
            "Measured with specload's GPU kit: vLLM 0.26.0 on one NVIDIA H200, dummy "
            "Llama-3.1-8B-shaped target, dummy 1B draft, draft_model k=4, synthetic acceptance "
            "[0.8, 0.55, 0.3, 0.15], prefix caching and async scheduling off, V1 runner; "
            "512-token prompts, 256 output tokens, ignore_eos, temperature 0. Start 'kit': "
            "baseline then spec, steps concurrency 1, concurrency 8, 4, 8, 16 req/s, 5 s "
            "warm-up + 60 s each. Start 'probe2' (same host, spec): concurrency 1, "
            "concurrency 4, 4 req/s, 10 s warm-up + 120 s each."
        ),
        "method": (
            "Per request, chunk arrival = first_token_at + running sum of itl_s; each non-zero "
            "gap is one engine step. Per load step, seconds from the first non-warm-up send; "
            f"a second is slow when its median gap > {SLOW_RATIO} x the step's 20th percentile "
            "of per-second medians (linear interpolation). Step ms = median gap over the "
            "seconds of a kind; runs = stretches of seconds of one kind, censored when the "
            "step ends them; mean run = seconds of a kind / completed runs of it."
        ),
        "slow_ratio": SLOW_RATIO,
        "concurrency_1": pool_steps(c1),
        "all_loads": pool_steps(spec),
        "spec_steps": [s.to_dict() for s in spec],
        "baseline_steps": [s.to_dict() for s in base],
    }


def simulate_regime(
    prof: Profile, params: RegimeParams, seeds: tuple[int, ...] = REGIME_SEEDS
) -> dict:
    """The calibrated sim at concurrency 1, read like the measurement (see REGIME_SEEDS)."""
    spec = parse_spec_config(SPEC)
    steps, truth, secs = [], 0.0, 0.0
    end = REGIME_WARMUP_S + REGIME_STEPS * REGIME_STEP_S
    for seed in seeds:
        host = draw_host(1.0, None, seed, params)
        run = run_closed(EngineConfig(prof, spec), 1, duration_s=end, seed=seed, host=host)
        gaps = _run_gaps(run)
        for i in range(REGIME_STEPS):
            t0 = REGIME_WARMUP_S + i * REGIME_STEP_S
            steps.append(
                classify_step(f"seed {seed}", "concurrency 1", gaps, t0, t0 + REGIME_STEP_S)
            )
            assert host.regime is not None
            truth += sum(b - a for a, b in host.regime.slow_intervals(t0, t0 + REGIME_STEP_S))
            secs += REGIME_STEP_S
    out = pool_steps(steps)
    out["true_slow_share"] = round(truth / secs, 4)
    return out


def _run_gaps(run: VirtualRun) -> list[tuple[float, float]]:
    """(end, length) of every step each request saw after its first token."""
    return [
        (b, b - a)
        for r in run.results
        for a, b in zip(r.chunk_times, r.chunk_times[1:], strict=False)
    ]


def fit_regime(prof: Profile, target: dict) -> RegimeParams:
    """Means and factor whose simulated c=1 figures, read like the measurement, match
    ``target``'s slow share, mean fast+slow run (a cycle) and slow step: a fixed-point
    iteration from the read values. Reading per second merges and misses windows shorter
    than a second or so, so the model's own share and means come out apart from the read
    ones; the fit holds the read share (the figure the finding states) and the read cycle."""
    one = BatchShape(n_seqs=1, draft_k=4, draft_seqs=1, spec_seqs=1, spec="model")
    launch_ms = 1e3 * spec_launch_time(prof, one)
    cycle = target["mean_fast_run_s"] + target["mean_slow_run_s"]
    share = target["slow_share"]
    factor = 1 + (target["slow_step_ms"] - target["fast_step_ms"]) / launch_ms
    for it in range(REGIME_FIT_ITERS):
        params = RegimeParams(cycle * (1 - share), cycle * share, factor)
        sim = simulate_regime(prof, params)
        print(f"  regime iter {it}: {params} -> {_regime_brief(sim)}", file=sys.stderr, flush=True)
        cycle *= (target["mean_fast_run_s"] + target["mean_slow_run_s"]) / (
            sim["mean_fast_run_s"] + sim["mean_slow_run_s"]
        )
        odds = share / (1 - share) * _odds(target["slow_share"]) / _odds(sim["slow_share"])
        share = odds / (1 + odds)
        factor = 1 + (factor - 1) * (target["slow_step_ms"] - sim["fast_step_ms"]) / (
            sim["slow_step_ms"] - sim["fast_step_ms"]
        )
    return RegimeParams(round(cycle * (1 - share), 1), round(cycle * share, 1), round(factor, 2))


def _odds(p: float) -> float:
    return p / (1 - p)


def _regime_brief(d: dict) -> str:
    return (
        f"fast {d['fast_step_ms']} ms, slow {d['slow_step_ms']} ms, share {d['slow_share']}, "
        f"runs {d['mean_fast_run_s']} / {d['mean_slow_run_s']} s"
    )


def regime_report(prof: Profile) -> tuple[str, dict, bool]:
    """The profile's calibrated regime replayed at concurrency 1 against the measurement."""
    measured = json.loads(REGIME_DATA.read_text())
    meas, every = measured["concurrency_1"], measured["all_loads"]
    params = RegimeParams.from_profile(prof)
    sim = simulate_regime(prof, params)
    checks = _regime_checks(meas, sim) + [_baseline_check(prof, params)]
    data = {
        "measured_source": str(REGIME_DATA.relative_to(ROOT)),
        "profile_name": prof.name,
        "params": {k: round(v, 4) for k, v in params.to_dict().items()},
        "replay": {
            "seeds": list(REGIME_SEEDS),
            "warmup_s": REGIME_WARMUP_S,
            "step_s": REGIME_STEP_S,
            "steps_per_seed": REGIME_STEPS,
        },
        "tolerances": REGIME_TOL,
        "checks": [{"name": n, "pass": p, "detail": d} for n, p, d in checks],
        "measured": {"concurrency_1": _brief(meas), "all_loads": _brief(every)},
        "simulated": _brief(sim) | {"true_slow_share": sim["true_slow_share"]},
    }
    return _regime_md(data, measured), data, all(c[1] for c in checks)


def _brief(d: dict) -> dict:
    keys = ("seconds", "slow_share", "fast_step_ms", "slow_step_ms")
    return {k: d[k] for k in (*keys, "mean_fast_run_s", "mean_slow_run_s")}


def _regime_checks(meas: dict, sim: dict) -> list[tuple[str, bool, str]]:
    out = []
    for key, label in (("fast_step_ms", "fast step"), ("slow_step_ms", "slow step")):
        err = sim[key] / meas[key] - 1
        tol = REGIME_TOL[key]
        detail = f"simulated {sim[key]} ms, measured {meas[key]} ms ({err:+.1%})"
        out.append((f"{label} within {tol:.0%}", abs(err) <= tol, detail))
    d = sim["slow_share"] - meas["slow_share"]
    tol = REGIME_TOL["slow_share"]
    out.append(
        (
            f"slow share within {tol:g}",
            abs(d) <= tol,
            f"simulated {sim['slow_share']}, measured {meas['slow_share']} ({d:+.3f})",
        )
    )
    for kind in ("fast", "slow"):
        key = f"mean_{kind}_run_s"
        err = sim[key] / meas[key] - 1
        tol = REGIME_TOL["mean_run_s"]
        detail = f"simulated {sim[key]} s, measured {meas[key]} s ({err:+.1%})"
        out.append((f"mean {kind} run within {tol:.0%}", abs(err) <= tol, detail))
    return out


def _baseline_check(prof: Profile, params: RegimeParams) -> tuple[str, bool, str]:
    """The regime leaves a baseline server's timeline alone (no launch-bound spec time)."""
    cfg = EngineConfig(prof, None)
    end = REGIME_WARMUP_S + REGIME_STEP_S
    plain = run_closed(cfg, 1, duration_s=end, seed=1)
    timed = run_closed(cfg, 1, duration_s=end, seed=1, host=draw_host(1.0, None, 1, params))
    same = [r.chunk_times for r in plain.results] == [r.chunk_times for r in timed.results]
    gaps = [g for _, g in _run_gaps(plain)]
    detail = f"{len(gaps)} steps, median {_ms(gaps)} ms, identical: {same}"
    return ("baseline timeline unchanged by the regime", same, detail)


def _regime_md(data: dict, measured: dict) -> str:
    p = data["params"]
    lines = [
        "# Simulator calibration: the speculative step's time regime (H200, vLLM 0.26)",
        "",
        (
            f"Measured: `{data['measured_source']}` (specload's GPU kit, concurrency 1: "
            f"{data['measured']['concurrency_1']['seconds']} s over two starts). Simulated: "
            f"`benchmarks/calibrate_sim.py`, profile `{data['profile_name']}` with "
            "`--spec-regime calibrated`, a closed loop of one user (512 in / 256 out) in "
            f"virtual time, {len(data['replay']['seeds'])} starts x "
            f"{data['replay']['steps_per_seed']} steps x {data['replay']['step_s']:g} s, read "
            "per second exactly like the measurement."
        ),
        "",
        (
            f"Calibrated: `spec_regime_mean_fast_s` {p['mean_fast_s']:g}, "
            f"`spec_regime_mean_slow_s` {p['mean_slow_s']:g}, `spec_regime_factor` "
            f"{p['factor']:g} (slow share of time {p['slow_share']:.3f}, mean window "
            f"{p['mean_window_s']:.2f} s)."
        ),
        "",
        "## Checks",
        "",
    ]
    lines += [
        f"- {'PASS' if c['pass'] else 'FAIL'}: {c['name']} ({c['detail']})" for c in data["checks"]
    ]
    lines += [
        "",
        "## Measured vs simulated, read per second",
        "",
        "| | seconds | slow share | fast step ms | slow step ms | mean fast run s | "
        "mean slow run s |",
        "|:--|--:|--:|--:|--:|--:|--:|",
    ]
    rows = (
        ("measured, concurrency 1", data["measured"]["concurrency_1"]),
        ("measured, all loads", data["measured"]["all_loads"]),
        ("simulated, concurrency 1", data["simulated"]),
    )
    for name, d in rows:
        lines.append(
            f"| {name} | {d['seconds']} | {d['slow_share']:.3f} | {d['fast_step_ms']} | "
            f"{d['slow_step_ms']} | {d['mean_fast_run_s']} | {d['mean_slow_run_s']} |"
        )
    lines += [
        "",
        (
            f"The model's slow share is {p['slow_share']:.3f}; the simulated starts spent "
            f"{data['simulated']['true_slow_share']:.3f} of their time in slow windows (one "
            "realisation of two hours); read per second (a second is slow when most of its "
            f"steps are) they show {data['simulated']['slow_share']:.3f}, as the hardware's "
            "reading would show less than it spent: windows shorter than about a second "
            "vanish or merge."
        ),
        "",
        "## Measured steps (per second: S slow, . fast)",
        "",
        "| start | load | s | slow share | fast ms | slow ms | seconds |",
        "|:--|:--|--:|--:|--:|--:|:--|",
    ]
    for s in measured["spec_steps"]:
        lines.append(
            f"| {s['start']} | {s['load']} | {s['seconds']} | {s['slow_share']:.2f} | "
            f"{s['fast_step_ms']} | {s['slow_step_ms']} | `{s['states']}` |"
        )
    return "\n".join(lines) + "\n"


def check_regime_committed(data: dict) -> bool:
    """Does this run reproduce the committed calibration_regime.json (params, simulated)?"""
    committed = json.loads((OUT / "calibration_regime.json").read_text())
    now = json.loads(json.dumps(data))
    bad = [k for k in ("params", "simulated") if committed.get(k) != now[k]]
    for key in bad:
        print(f"DIFFERS from the committed calibration_regime.json: {key!r}", file=sys.stderr)
    if not bad:
        print("reproduces the committed calibration_regime.json (parameters and simulated figures)")
    return not bad


def fit_regime_profile(prof: Profile) -> Profile:
    """``--fit regime``: the profile with fitted regime fields, printed as YAML."""
    measured = json.loads(REGIME_DATA.read_text())
    p = fit_regime(prof, measured["concurrency_1"])
    out = prof.with_overrides(
        spec_regime_mean_fast_s=p.mean_fast_s,
        spec_regime_mean_slow_s=p.mean_slow_s,
        spec_regime_factor=p.factor,
    )
    for k in ("spec_regime_mean_fast_s", "spec_regime_mean_slow_s", "spec_regime_factor"):
        print(f"{k}: {getattr(out, k):g}")
    return out


def tpot_section(prof: Profile, seeds: tuple[int, ...], check: bool, write: bool) -> bool:
    """The p50 TPOT calibration (calibration_h200.*); the regime is off in these runs."""
    t0 = time.perf_counter()
    # one pool for every row, the ideal schedule's too
    jobs = evaluate_jobs(prof, tuple(CONDITIONS))
    ideal = ideal_dynamic_jobs(prof)
    rows = simulate_all(jobs + ideal, seeds)
    for row in rows[len(jobs) :]:
        row["condition"] = "spec-dynamic-ideal"
    md, data, ok = report(rows)
    # The regime's fields do not enter these rows (it is off): calibration_regime.json has them.
    data["profile"] = {k: v for k, v in prof.__dict__.items() if not k.startswith("spec_regime_")}
    data["wall_s"] = round(time.perf_counter() - t0, 2)
    print(md)
    print(f"(simulated {len(rows)} rows in {data['wall_s']} s)")
    if check:
        return ok and check_committed(data)
    if write:
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "calibration_h200.md").write_text(md)
        (OUT / "calibration_h200.json").write_text(json.dumps(data, indent=1) + "\n")
    return ok


def regime_section(prof: Profile, check: bool, write: bool) -> bool:
    """The time regime's check (calibration_regime.*)."""
    md, data, ok = regime_report(prof)
    print(md)
    if check:
        return ok and check_regime_committed(data)
    if write:
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "calibration_regime.md").write_text(md)
        (OUT / "calibration_regime.json").write_text(json.dumps(data, indent=1) + "\n")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="h200-llama8b")
    ap.add_argument("--fit", choices=[*sorted(FIT_PARAMS), "regime"], action="append", default=[])
    ap.add_argument("--seeds", type=int, default=2, help="Poisson seeds averaged per row")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 unless the simulated rows and the profile equal "
        "the committed benchmarks/results/calibration_h200.json (and calibration_regime.json)",
    )
    ap.add_argument("--iters", type=int, default=40, help="Nelder-Mead iterations per --fit")
    ap.add_argument(
        "--section",
        choices=("all", "tpot", "regime"),
        default="all",
        help="p50 TPOT rows (calibration_h200.*), the time regime (calibration_regime.*) or both",
    )
    ap.add_argument(
        "--extract-regime",
        type=Path,
        metavar="DIR",
        help="write benchmarks/data/h200-regime.json from the GPU kit's raw records in DIR "
        "(kit-spec, probe2-spec and kit-baseline -requests.jsonl.gz) and stop",
    )
    a = ap.parse_args()
    if a.extract_regime is not None:
        REGIME_DATA.write_text(json.dumps(extract_regime(a.extract_regime), indent=1) + "\n")
        print(f"wrote {REGIME_DATA.relative_to(ROOT)}")
        return 0
    prof = load_profile(a.profile)
    seeds = tuple(range(a.seeds))
    for which in a.fit:
        prof = fit_regime_profile(prof) if which == "regime" else fit(prof, which, seeds, a.iters)
    write = not a.no_write
    ok = True
    if a.section in ("all", "tpot"):
        ok = tpot_section(prof, seeds, a.check, write) and ok
    if a.section in ("all", "regime"):
        ok = regime_section(prof, a.check, write) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

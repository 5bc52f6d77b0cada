"""Adaptive search (``sweep --refine crossover``) against the fixed ladder, compared fairly.

On the calibrated simulator profile (``h200-llama8b``: vLLM 0.26 on one H200, Llama-8B with a
1B draft, ``draft_model`` k = 4, 512 tokens in / 256 out), in virtual time
(``benchmarks/virtual.py``: the engine model the simulator serves, no sockets), each server
start becomes a real run directory; the p50 TPOT crossover (where speculation stops helping)
and its 95 % CI come from ``specload compare``'s own analysis (``compare_runs``,
``refine.current_bounds``: the two-level bootstrap over run dirs of ``analysis/statistics/steps.py`` and
``stats.py``), the search's passes from ``specload/protocol/refine.py`` itself (``run_refinement``
with a virtual ``run_pass``).

The two strategies, on the same terms:

- **Fixed**: ``scenarios/low-to-medium.yaml`` as shipped (8 steps 1-32 req/s, 10 s warm-up +
  60 s, 2 repeats per start), 3 server starts per condition (the fewest with an interval
  about the config over starts, ``stats.MIN_STARTS_FOR_CONFIG``), then 3 more per condition at a time (the only
  way a fixed ladder narrows its CI). Its boundary CI is two of its steps
  (``crossover.bracket``), so never narrower than its spacing there.
- **Refine**: a coarse ladder (4, 16, 32 req/s, 10 s + 60 s, one repeat, 3 starts per
  condition), then ``--refine crossover`` passes (3 starts per condition each, as
  ``--replicates 3`` runs them).
- **Same target and stopping rule**: both stop at the first check where the product's own
  rule (``refine.converged``: the stop boundary's 95 % CI at most ``PRECISION`` req/s wide,
  between tested loads at most 25 % apart) holds, checking after each 3 added starts
  per condition (fixed) or pass (refine, which adds 3 starts per condition too); or when the
  next check would overrun the same server-time budget (``--budget-s``, default 7080
  server-s: what the shipped ladder spends with its 3 starts per condition). Which of the two
  happened is reported per seed; a seed that stopped on the budget has no time to target.
  The fixed ladder's share that met the width alone (spacing ignored) is reported too.
- **Same hosts**: server start k of condition c in seed s runs on the host drawn with start
  seed ``1000 s + k`` (``draw_host``, the calibrated per-start jitter: a lognormal factor with
  sigma 0.3 on speculation's launch-bound time) in both strategies; a step both strategies
  run on the same start (same rate, same repeat) also gets the same Poisson arrivals (common
  random numbers), so refine's coarse ladder is the fixed ladder's first walk at 4, 16 and
  32 req/s. The time regime (``--spec-regime``) is off, and, as before, so is the jitter's
  15-s slow window: each step runs alone on an idle engine from session second 0, where a
  window would land on the wrong step.
- **Truth**: the simulator's own, from long runs over the population of starts: at a rate,
  the pooled p50 TPOT of spec runs on 16 hosts whose factors are the strata quantiles of the
  jitter's lognormal (``exp(0.3 z_i)``, ``z_i`` the normal quantile of ``(i + 0.5) / 16``: the
  population, not a draw of it) over the pooled p50 TPOT of 16 baseline runs (its speed
  does not depend on the host), each 10 s warm-up + 120 s measured, with arrivals given
  their count (``q * seconds`` uniform times: a Poisson process without a finite run's
  noise in the realised rate, which moves a run's p50 TPOT by ~1 %; the same steady
  state), the same arrival seeds at every rate. Ladder steps far from the threshold take a
  rough value (4 hosts, 4 baseline runs, 60 s), enough for their side of it. **Ladder
  truth**: the crossover ``analysis/decisions/crossover.py``'s ``find_crossover`` puts on the true
  ratios at the ladder's steps (what the fixed ladder's CI estimates). **Continuous
  truth**: the load where the true gain crosses ``min_gain`` (5 %), by bisection on true
  ratios at arbitrary rates between the two ladder steps around it (what refine's CI, whose
  steps close in on the boundary, estimates; and what anyone wants to know). Both are the
  mean of two independent sets of arrival seeds (at the two ladder steps around the
  crossing, and at the bisection's crossing); half their difference is the truth's standard
  error, and coverage is also given for a truth anywhere within ±2 of them.

Reported per strategy over the seeds: the share that reached the target, the server time to
it (median and IQR; ">budget" where a quantile falls on seeds that did not reach it), the CI
width at the stop, and coverage (share of seeds whose CI at the stop holds the truth; a bound
the bootstrap left open is open on that side; no boundary at all is a miss), each against
the truth it is stated against. Server time counts each server start as ``START_S`` (a vLLM
8B + draft start on an H200 is about a minute) plus its steps.

Speed (the machine is shared): one process; the engine's output *text* is replaced by a
constant token for the run (``_timing_only_text``: timing does not depend on it with
synthetic acceptance and no stop strings; checked at startup on one step, timelines
identical) and every request shares one random 512-token prompt (prefix caching off), which
together make a virtual step about twice as fast. The seeds run in ``--workers`` processes
while the main one computes the truth (9-14 min beside them); seeds start at
``--first-seed`` (default 26: fresh after the 25 of the run before the interval over
starts). 20 seeds took 54 CPU-min. Results: ``benchmarks/results/adaptive.md`` and
``adaptive.json``.

Usage: python benchmarks/adaptive.py [--seeds N] [--first-seed K] [--workers N] [--budget-s S]
       [--out DIR] [--quick] [--reuse OLD.json]  (the seeds of an earlier run; the truth and scores again)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import statistics
import sys
import time
import zlib
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import numpy as np
import yaml

sys.path.append(str(Path(__file__).resolve().parent))  # virtual.py, beside this file

import virtual
from shares import wilson

from specload.analysis.compare import compare_runs
from specload.analysis.decisions.crossover import find_crossover
from specload.analysis.statistics.effect import classify
from specload.analysis.statistics.stats import MIN_STARTS_FOR_CONFIG, Estimate
from specload.cli.demo import SPEC_CONFIGS
from specload.core.condition import parse_condition
from specload.core.records import RequestRecord
from specload.protocol.refine import Bound, converged, current_bounds, run_refinement
from specload.protocol.sweep_plan import SweepPlan
from specload.sim.engine import EngineConfig
from specload.sim.host import HostDraw, JitterParams, draw_host
from specload.sim.profiles import load_profile
from specload.sim.spec import parse_spec_config

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results"
PROFILE = "h200-llama8b"
SPEC = SPEC_CONFIGS[PROFILE]  # the profile's calibration config, defined once
LABELS = ("baseline", "spec")
INPUT_TOKENS, OUTPUT_TOKENS = 512, 256
START_S = 60.0
COARSE = [4.0, 16.0, 32.0]
WARMUP_S, STEP_S = 10.0, 60.0  # refine's passes; the fixed ladder's come from its scenario
#: Server starts per condition added before each check, both strategies: the fewest with an
#: interval over starts (two have none), as refine's passes run them (``--replicates 3``).
STARTS_PER_CHECK = MIN_STARTS_FOR_CONFIG
PRECISION = 2.0  # ±1 req/s
METRIC, MIN_GAIN, BOOTSTRAP = "tpot_p50", 0.05, 500
DEFAULT_SEEDS = 20  # the floor for a fair comparison
#: Seeds 1-25 were the run before the interval over starts; these are fresh.
FIRST_SEED = 26
#: A ladder step whose rough true gain lies this close to min_gain gets the full effort.
ROUGH_MARGIN = 0.03
T0 = 1_790_000_000.0


@dataclass(frozen=True)
class Effort:
    """How hard one true ratio is computed: spec host strata, baseline runs, seconds each."""

    strata: int
    base_runs: int
    seconds: float


@dataclass(frozen=True)
class Settings:
    seeds: int = DEFAULT_SEEDS
    first_seed: int = FIRST_SEED
    #: what the shipped ladder spends with 3 starts per condition (2 x 3 x (60 + 16 x 70))
    budget_s: float = 7080.0
    full: Effort = Effort(16, 16, 120.0)
    rough: Effort = Effort(4, 4, 60.0)
    bisect_steps: int = 6


# -- the virtual server ---------------------------------------------------------------------


class _TimingOnlyText:
    """Stands in for the engine's output text (``textgen.OutputText``): one constant token.
    With synthetic acceptance (no drafts compared as text), no stop strings and no n-gram
    index, nothing the engine times depends on the text; ``_check_timing_only_text`` checks
    it."""

    __slots__ = ()

    def __init__(self, prompt: list[str], seed: int, rep: float | None = None) -> None:
        pass

    def token(self, i: int) -> str:
        return " x"


@contextlib.contextmanager
def _timing_only_text() -> Iterator[None]:
    names = vars(virtual)  # the name ``virtual._request`` builds each request's text with
    saved = names["OutputText"]
    names["OutputText"] = _TimingOnlyText
    try:
        yield
    finally:
        names["OutputText"] = saved


_PROMPT = virtual.random_prompt(random.Random(0), INPUT_TOKENS)


def _config(label: str) -> EngineConfig:
    cfg = EngineConfig(load_profile(PROFILE), parse_spec_config(SPEC) if label == "spec" else None)
    assert not cfg.prefix_caching  # one shared prompt must not hit a prefix cache
    return cfg


@dataclass(frozen=True)
class Req:
    """One request's timeline, seconds after its step's start."""

    arrival: float
    ttft_s: float
    tpot_s: float | None
    e2e_s: float
    chunks: int
    output_tokens: int


def simulate(label: str, host: HostDraw, q: float, seconds: float, seed: int, *,
             conditioned: bool = False) -> list[Req]:  # fmt: skip
    """Poisson arrivals at ``q`` req/s for ``seconds`` on a fresh idle engine of ``host``
    (the arrivals are ``run_poisson``'s: the same seed, the same times). ``conditioned``: a
    Poisson process given its count, ``q * seconds`` uniform times (the truth's runs: no
    finite-run noise in the realised rate, the same steady state)."""
    rng = random.Random(seed)
    n = max(8, round(q * seconds))
    if conditioned:
        arrivals = sorted(rng.uniform(0.0, seconds) for _ in range(n))
    else:
        t, arrivals = 0.0, []
        for _ in range(n):
            t += rng.expovariate(q)
            arrivals.append(t)
    run = virtual.run_requests(
        _config(label), [_PROMPT] * len(arrivals), arrivals, OUTPUT_TOKENS, seed=seed,
        repetition=0.0, host=host,
    )  # fmt: skip
    return [
        Req(r.arrival, r.ttft_s, r.tpot_s, r.e2e_s, len(r.chunk_times), r.output_tokens)
        for r in run.results
        if r.arrival < seconds
    ]


def _check_timing_only_text() -> None:
    """The stand-in text leaves every timeline as the engine's own text does."""
    host = HostDraw(factor=1.3)
    plain = simulate("spec", host, 16.0, 15.0, 7)
    with _timing_only_text():
        fast = simulate("spec", host, 16.0, 15.0, 7)
    if plain != fast:
        raise SystemExit("timing-only text changed the engine's timelines: cannot use it")


def start_host(seed: int, k: int) -> HostDraw:
    """Server start ``k`` of seed ``seed``: the calibrated per-start factor, no slow window
    (see the module docstring), no time regime. The same in both strategies."""
    drawn = draw_host(1.0, JitterParams.from_profile(load_profile(PROFILE)), seed=1000 * seed + k)
    return HostDraw(scale=1.0, factor=drawn.factor, seed=drawn.seed)


@dataclass
class VirtualResult:
    """What ``run_refinement`` reads of a pass's run: its dir and its server time."""

    run_dir: Path
    server_s: float


@dataclass
class Starts:
    """The server starts of one seed: steps cached by (label, start, rate, repeat), so a step
    both strategies run on the same start is simulated once (same host, same arrivals)."""

    seed: int
    cache: dict[tuple[str, int, float, int], list[Req]] = field(default_factory=dict)
    simulated_s: float = 0.0

    def step(self, label: str, k: int, q: float, repeat: int, warmup_s: float,
             step_s: float) -> list[Req]:  # fmt: skip
        key = (label, k, q, repeat)
        if key not in self.cache:
            seed = zlib.crc32(
                f"{self.seed}:{label}:{k}:{q:g}:{repeat}:{warmup_s + step_s:g}".encode()
            )
            self.cache[key] = simulate(label, start_host(self.seed, k), q, warmup_s + step_s, seed)
            self.simulated_s += warmup_s + step_s
        return self.cache[key]

    def run_dir(self, path: Path, label: str, k: int, rates: Sequence[float], repeats: int,
                warmup_s: float, step_s: float) -> VirtualResult:  # fmt: skip
        """Server start ``k`` of ``label`` walking ``rates`` ``repeats`` times, as a run dir."""
        path.mkdir(parents=True, exist_ok=True)
        steps, records, index = [], [], 0
        t = T0 + k * 100_000
        for rep in range(repeats):
            for q in rates:
                for i, r in enumerate(self.step(label, k, q, rep, warmup_s, step_s)):
                    records.append(_record(r, f"{label}-s{k}-{index}-{i}", index, rep, q, t,
                                           warmup_s))  # fmt: skip
                steps.append({"index": index, "repeat": rep, "target_qps": q, "start": t,
                              "warmup_end": t + warmup_s, "end": t + warmup_s + step_s})  # fmt: skip
                t += warmup_s + step_s
                index += 1
        with (path / "requests.jsonl").open("w") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in records)
        (path / "steps.json").write_text(json.dumps(steps))
        meta = {
            "schema_version": 1, "run_id": path.name, "label": label,
            "condition": parse_condition(f"{label}=").as_json()
            | {"speculative": SPEC if label == "spec" else None},
            "target": {"url": "virtual", "model": "llama-8b", "server_version": "0.26.0", "models": None},
            "scenario": {"name": "adaptive", "max_tokens": OUTPUT_TOKENS,
                         "prompts": {"synthetic": {"input_tokens": INPUT_TOKENS}}},
            "status": "completed", "started_at": T0, "ended_at": t, "replicate": k,
            "counts": {"sent": len(records), "recorded": len(records), "by_worker": {}},
        }  # fmt: skip
        (path / "run.json").write_text(json.dumps(meta))
        return VirtualResult(path, START_S + repeats * len(rates) * (warmup_s + step_s))


def _record(r: Req, rid: str, index: int, rep: int, q: float, t: float,
            warmup_s: float) -> dict[str, Any]:  # fmt: skip
    sent = t + r.arrival
    return RequestRecord(
        request_id=rid, worker="local", step=index, target_qps=q, warmup=r.arrival < warmup_s,
        scheduled_at=sent, sent_at=sent, first_token_at=sent + r.ttft_s, done_at=sent + r.e2e_s,
        ttft_s=r.ttft_s, tpot_s=r.tpot_s, e2e_s=r.e2e_s, content_chunks=r.chunks,
        prompt_tokens=INPUT_TOKENS, output_tokens=r.output_tokens, tokens_source="usage",
        finish_reason="length", status=200, ok=True, repeat=rep,
    ).to_dict()  # fmt: skip


# -- the two strategies ---------------------------------------------------------------------


def _bound_dict(b: Bound | None) -> dict[str, Any]:
    if b is None:
        return {"qps": None, "lo": None, "hi": None, "width": None, "bracket": None}
    return {"qps": b.qps, "lo": b.lo, "hi": b.hi, "width": b.width,
            "bracket": list(b.bracket) if b.bracket else None,
            "unsettled": list(b.unsettled)}  # fmt: skip


def _crossover_bound(dirs: Sequence[Path]) -> tuple[Bound | None, dict[float, int]]:
    """compare's stop boundary over ``dirs`` (as refine reads it), and the server starts
    behind each spec step."""
    c = compare_runs(list(dirs), baseline="baseline", bootstrap=BOOTSTRAP)
    bounds = current_bounds(c, "crossover")
    runs = {s.target_qps: s.runs for s in c.steps["spec"]}
    return (bounds[0] if bounds else None), runs


def fixed_ladder(starts: Starts, out: Path, budget_s: float) -> dict[str, Any]:
    """The shipped ladder, 3 starts per condition, then 3 more per condition per check."""
    sc = yaml.safe_load((ROOT / "scenarios" / "low-to-medium.yaml").read_text())
    rates, repeats = [float(q) for q in sc["steps"]], int(sc["repeats"])
    warmup_s, step_s = float(sc["warmup_s"]), float(sc["step_duration_s"])
    per_start = START_S + repeats * len(rates) * (warmup_s + step_s)
    per_check = STARTS_PER_CHECK * len(LABELS) * per_start
    server_s, k, checks, stopped = 0.0, 0, [], "budget"
    while server_s + per_check <= budget_s + 1e-9:
        for _ in range(STARTS_PER_CHECK):
            k += 1
            for label in LABELS:
                starts.run_dir(out / f"{label}-r{k}", label, k, rates, repeats, warmup_s, step_s)
        server_s += per_check
        bound, runs = _crossover_bound(sorted(p for p in out.iterdir() if p.is_dir()))
        ok = bound is not None and converged([bound], PRECISION)
        checks.append({"starts": k, "server_s": server_s, **_bound_dict(bound),
                       "converged": ok, "width_ok": _width_ok(bound)})  # fmt: skip
        if ok:
            stopped = "target"
            break
    return {"rates": rates, "checks": checks, "stopped": stopped, "server_s": server_s,
            "bound": checks[-1], "runs_per_step": runs}  # fmt: skip


def _width_ok(b: Bound | None) -> bool:
    return b is not None and b.width is not None and b.width <= PRECISION + 1e-9


def refined(starts: Starts, out: Path, budget_s: float) -> dict[str, Any]:
    """Coarse ladder, then ``run_refinement``'s passes, each on 3 fresh starts per condition
    (pass p's starts are numbered on from the coarse ladder's, so start k is the fixed
    ladder's start k)."""
    first = [
        starts.run_dir(out / f"{label}-r{k}", label, k, COARSE, 1, WARMUP_S, STEP_S)
        for k in range(1, STARTS_PER_CHECK + 1)
        for label in LABELS
    ]
    scenario = out.parent / f"{out.name}.yaml"
    scenario.write_text(yaml.safe_dump({"steps": COARSE, "warmup_s": WARMUP_S,
                                        "step_duration_s": STEP_S, "repeats": 1}))  # fmt: skip
    plan = SweepPlan(
        scenario=scenario, out=out, replicates=STARTS_PER_CHECK, server_cmd="virtual",
        conditions=[parse_condition(f"{label}=") for label in LABELS],
    )  # fmt: skip

    def run_pass(rates: list[float], index: int) -> list[VirtualResult]:
        ks = range(STARTS_PER_CHECK * (index - 1) + 1, STARTS_PER_CHECK * index + 1)
        return [
            starts.run_dir(out / f"{label}-p{index}-r{k}", label, k, rates, 1, WARMUP_S, STEP_S)
            for k in ks
            for label in LABELS
        ]

    lines: list[str] = []
    ref = run_refinement(plan, first, "crossover", PRECISION, budget_s, None, lines.append,
                         run_pass=run_pass)  # fmt: skip
    last = ref.passes[-1].bounds
    bound = last[0] if last else None
    ok = bound is not None and converged([bound], PRECISION)
    _, runs = _crossover_bound(sorted(p for p in out.iterdir() if p.is_dir()))
    return {
        "passes": [
            {"pass": p.index, "rates": p.rates, "server_s": p.server_s,
             **_bound_dict(p.bounds[0] if p.bounds else None)}
            for p in ref.passes
        ],
        "stopped": _refine_stop(ok, ref.stopped),
        "stopped_text": ref.stopped,
        "server_s": sum(p.server_s for p in ref.passes),
        "bound": _bound_dict(bound), "runs_per_step": runs, "log": lines,
    }  # fmt: skip


def _refine_stop(reached: bool, text: str) -> str:
    """refine's reason to stop, in a word (``stopped_text`` keeps its own sentence)."""
    if reached:
        return "target"
    for key in ("budget", "beyond", "pass limit"):
        if key in text:
            return key
    return text


# -- the truth --------------------------------------------------------------------------------


def true_ratio(q: float, effort: Effort, seed_set: int = 0) -> dict[str, float]:
    """The population's p50 TPOT ratio spec / baseline at ``q`` (see the module docstring):
    spec runs on the host strata, baseline runs on the plain host, each ``effort.seconds``
    measured after the warm-up, arrivals given their count (``simulate``)."""
    sigma = JitterParams.from_profile(load_profile(PROFILE)).sigma
    nd = statistics.NormalDist()
    spec: list[float] = []
    base: list[float] = []
    seconds = WARMUP_S + effort.seconds
    for i in range(effort.strata):
        factor = math.exp(sigma * nd.inv_cdf((i + 0.5) / effort.strata))
        reqs = simulate("spec", HostDraw(factor=factor), q, seconds, 90_000 + 1000 * seed_set + i,
                        conditioned=True)  # fmt: skip
        spec += [r.tpot_s for r in reqs if r.arrival >= WARMUP_S and r.tpot_s is not None]
    for i in range(effort.base_runs):
        reqs = simulate("baseline", HostDraw(), q, seconds, 95_000 + 1000 * seed_set + i,
                        conditioned=True)  # fmt: skip
        base += [r.tpot_s for r in reqs if r.arrival >= WARMUP_S and r.tpot_s is not None]
    sp, b = float(np.median(spec)), float(np.median(base))
    return {"qps": q, "ratio": sp / b, "spec_tpot_p50_s": sp, "baseline_tpot_p50_s": b}


def ladder_stop(qps: Sequence[float], ratios: Sequence[float]) -> float | None:
    """The stop boundary the product's interpolation puts on exact ratios at ``qps``."""
    ests = [Estimate(v, v, v) for v in ratios]
    effects = [classify(e, MIN_GAIN) for e in ests]
    x = find_crossover(METRIC, "spec", "baseline", list(qps), ests, effects,
                       np.asarray([list(ratios)]), MIN_GAIN)  # fmt: skip
    if x is None or x.stop is None or not x.stop.inside:
        return None
    return float(x.stop.qps)


def _around(rates: Sequence[float], gain: dict[float, float]) -> tuple[float, float]:
    """The last ladder step that helps (gain >= min_gain) and the next one."""
    lo = max(q for q in rates if gain[q] >= MIN_GAIN)
    return lo, min(q for q in rates if q > lo)


def truth(rates: Sequence[float], st: Settings, say: Any = print) -> dict[str, Any]:
    """Ladder truth and continuous truth (bisection), each the mean of two independent sets
    of arrival seeds, with the half-difference as its standard error.

    Every ladder step first gets a rough value (``st.rough``: its side of the threshold is
    all the ladder truth needs from most steps); the two steps around the crossing, and any
    step the rough value leaves within ``ROUGH_MARGIN`` of the threshold, get the full
    effort (``st.full``) with both seed sets, and the bisection runs on seed set 0 (the same
    arrival seeds at every rate: the curve is smooth in q), then seed set 1 at its crossing.
    """
    t = time.time()
    at: dict[float, dict[str, Any]] = {
        q: {**true_ratio(q, st.rough, seed_set=2), "effort": "rough"} for q in rates
    }
    gain: dict[float, float] = {q: 1 - at[q]["ratio"] for q in rates}
    while True:
        lo, hi = _around(rates, gain)
        doubt = {q for q in rates if abs(gain[q] - MIN_GAIN) < ROUGH_MARGIN}
        todo = [q for q in sorted({lo, hi} | doubt) if at[q]["effort"] != "full"]
        if not todo:
            break
        for q in todo:
            sets = [true_ratio(q, st.full, seed_set=k) for k in (0, 1)]
            at[q] = {**sets[0], "ratio": (sets[0]["ratio"] + sets[1]["ratio"]) / 2,
                     "by_seed_set": [x["ratio"] for x in sets], "effort": "full"}  # fmt: skip
            gain[q] = 1 - at[q]["ratio"]
    for q in rates:
        say(f"truth at {q:g} req/s: ratio {at[q]['ratio']:.4f} ({at[q]['effort']})")
    ladder = _truth_band(
        [ladder_stop(rates, [at[q].get("by_seed_set", [at[q]["ratio"]] * 2)[k] for q in rates])
         for k in (0, 1)],
        ladder_stop(rates, [at[q]["ratio"] for q in rates]),
    )  # fmt: skip
    trail = []
    for _ in range(st.bisect_steps):
        mid = round((lo + hi) / 2, 6)
        r = true_ratio(mid, st.full)
        trail.append(r)
        say(f"truth bisection at {mid:g} req/s: ratio {r['ratio']:.4f}")
        gain[mid] = 1 - r["ratio"]
        lo, hi = (mid, hi) if gain[mid] >= MIN_GAIN else (lo, mid)
    # seed set 0's crossing inside the last bracket, linear in q; seed set 1's from its gain
    # there and the local slope of the gain (a line through the bisection's points)
    cont0 = lo + (gain[lo] - MIN_GAIN) / (gain[lo] - gain[hi]) * (hi - lo)
    again = true_ratio(round(cont0, 3), st.full, seed_set=1)
    pts = [(p["qps"], 1 - p["ratio"]) for p in trail]
    slope = -float(np.polyfit([x for x, _ in pts], [y for _, y in pts], 1)[0])
    cont1 = cont0 + ((1 - again["ratio"]) - MIN_GAIN) / slope
    cont = _truth_band([cont0, cont1], (cont0 + cont1) / 2)
    return {
        "ladder": {"rates": list(rates), "points": [at[q] for q in rates], **ladder},
        "continuous": {**cont, "bracket": [lo, hi], "bisection": trail,
                       "seed_set_1": again, "slope_per_qps": slope},
        "effort": {"full": asdict(st.full), "rough": asdict(st.rough),
                   "rough_margin": ROUGH_MARGIN, "warmup_s": WARMUP_S},
        "took_s": time.time() - t,
    }  # fmt: skip


def _truth_band(by_set: list[float | None], stop: float | None) -> dict[str, Any]:
    """A truth, its value per seed set, its standard error (half their difference) and the
    band ±2 standard errors around it, over which coverage is reported too."""
    if stop is None or any(v is None for v in by_set):
        return {"stop": stop, "by_seed_set": by_set, "se": None, "band": None}
    se = abs(by_set[0] - by_set[1]) / 2  # type: ignore[operator]
    return {"stop": stop, "by_seed_set": by_set, "se": se, "band": [stop - 2 * se, stop + 2 * se]}


# -- coverage and summaries -----------------------------------------------------------------


def covers(b: dict[str, Any], true_q: float | None) -> bool | None:
    """Whether the stop CI holds ``true_q`` (an open bound is open on its side); None for a
    seed with no boundary (no step decided, or no single one): it prints no CI to hold, and
    is counted apart (``found``)."""
    if true_q is None or b["qps"] is None:
        return None
    lo = -math.inf if b["lo"] is None else b["lo"]
    hi = math.inf if b["hi"] is None else b["hi"]
    return bool(lo <= true_q <= hi)


def one_seed(seed: int, st: Settings) -> dict[str, Any]:
    """Both strategies on seed ``seed``'s server starts."""
    t = time.time()
    starts = Starts(seed)
    with TemporaryDirectory() as tmp:
        fixed = fixed_ladder(starts, Path(tmp) / "fixed", st.budget_s)
        ref = refined(starts, Path(tmp) / "refine", st.budget_s)
    for res in (fixed, ref):
        res["time_to_target_s"] = res["server_s"] if res["stopped"] == "target" else None
    return {"seed": seed, "fixed": fixed, "refine": ref, "took_s": time.time() - t,
            "simulated_s": starts.simulated_s}  # fmt: skip


def score(per_seed: list[dict[str, Any]], true: dict[str, Any]) -> None:
    """Each seed's coverage of both truths, in place."""
    cont, lad = true["continuous"]["stop"], true["ladder"]["stop"]
    for r in per_seed:
        for name in ("fixed", "refine"):
            r[name]["covers_continuous"] = covers(r[name]["bound"], cont)
            r[name]["covers_ladder"] = covers(r[name]["bound"], lad)


def _q(xs: Sequence[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs, dtype=float), p, method="inverted_cdf"))


def _share(flags: Sequence[bool | None]) -> dict[str, Any]:
    got = [f for f in flags if f is not None]
    k = sum(bool(f) for f in got)
    return {"k": k, "n": len(got), "share": k / len(got) if got else None,
            "ci95": list(wilson(k, len(got)))}  # fmt: skip


def summarise(name: str, rows: list[dict[str, Any]], true: dict[str, Any]) -> dict[str, Any]:
    n = len(rows)
    to_target = [r["time_to_target_s"] if r["time_to_target_s"] is not None else math.inf
                 for r in rows]  # fmt: skip
    widths = [r["bound"]["width"] if r["bound"]["width"] is not None else math.inf for r in rows]
    points = [r["bound"]["qps"] for r in rows if r["bound"]["qps"] is not None]
    reached = [r for r in rows if r["stopped"] == "target"]
    stops: dict[str, int] = {}
    for r in rows:
        stops[r["stopped"]] = stops.get(r["stopped"], 0) + 1
    out = {
        "strategy": name, "seeds": n,
        "reached": _share([r["stopped"] == "target" for r in rows]),
        "time_to_target_s": {"median": _q(to_target, 50), "iqr": [_q(to_target, 25),
                                                                  _q(to_target, 75)]},
        "server_s_spent": {"median": _q([r["server_s"] for r in rows], 50),
                           "iqr": [_q([r["server_s"] for r in rows], 25),
                                   _q([r["server_s"] for r in rows], 75)]},
        "width_at_stop": {"median": _q(widths, 50), "iqr": [_q(widths, 25), _q(widths, 75)],
                          "open": sum(math.isinf(w) for w in widths)},
        "estimate": {"median": _q(points, 50) if points else None,
                     "iqr": [_q(points, 25), _q(points, 75)] if points else None,
                     "none": n - len(points)},
        "found": _share([r["bound"]["qps"] is not None for r in rows]),
        "coverage_continuous": _share([r["covers_continuous"] for r in rows]),
        "coverage_continuous_reached": _share([r["covers_continuous"] for r in reached]),
        "stopped": stops,
    }  # fmt: skip
    around = [
        min(r["runs_per_step"].get(b[0], 0), r["runs_per_step"].get(b[1], 0))
        for r in rows
        if (b := r["bound"]["bracket"])
    ]
    out["starts_around_stop"] = {
        "median": _q(around, 50) if around else None,
        "range": [min(around), max(around)] if around else None,
    }
    out["coverage_continuous_band"] = _band_counts(rows, true["continuous"]["band"])
    if name == "refine":
        out["pass_outside_previous_ci"] = _share(_moves(rows))
    if name == "fixed":
        out["coverage_ladder"] = _share([r["covers_ladder"] for r in rows])
        out["coverage_ladder_band"] = _band_counts(rows, true["ladder"]["band"])
        out["width_alone"] = _share([r["bound"]["width_ok"] for r in rows])
    return out


def _moves(rows: list[dict[str, Any]]) -> list[bool]:
    """Per pass after a pass with a closed CI: whether its estimate fell outside that CI."""
    out = []
    for r in rows:
        ps = r["passes"]
        for a, b in zip(ps, ps[1:], strict=False):
            if a["lo"] is not None and a["hi"] is not None and b["qps"] is not None:
                out.append(not a["lo"] <= b["qps"] <= a["hi"])
    return out


def _band_counts(rows: list[dict[str, Any]], band: list[float] | None) -> list[int] | None:
    """The fewest and most seeds whose CI holds a truth anywhere in ``band``."""
    if band is None:
        return None
    grid = np.linspace(band[0], band[1], 201)
    counts = [sum(bool(covers(r["bound"], float(t))) for r in rows) for t in grid]
    return [min(counts), max(counts)]


# -- report -----------------------------------------------------------------------------------


def _fmt_s(v: float, budget: float) -> str:
    return f">{budget:.0f}" if math.isinf(v) else f"{v:.0f}"


def _fmt_w(v: float) -> str:
    return "open" if math.isinf(v) else f"{v:.2f}"


def _spacing(true: dict[str, Any]) -> str:
    """Whether the ladder's steps around the true crossover are close enough for the rule."""
    rates = true["ladder"]["rates"]
    lo, hi = _around(rates, {p["qps"]: 1 - p["ratio"] for p in true["ladder"]["points"]})
    if hi <= lo * 1.25:
        return ""
    return (
        f"Its true crossover lies between its {lo:g} and {hi:g} req/s steps, {hi / lo - 1:.0%} "
        "apart: where its estimate does too, the product's rule (loads at most 25 % apart) "
        "cannot hold, whatever the number of starts."
    )


def _fmt_band(b: list[int] | None) -> str:
    return "" if b is None else f" [{b[0]}–{b[1]}]"


def _fmt_sets(t: dict[str, Any]) -> str:
    return ", ".join("—" if v is None else f"{v:.2f}" for v in t["by_seed_set"])


def _fmt_stops(s: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(s["stopped"].items(), key=lambda kv: -kv[1]))


def _fmt_reached_s(per_seed: list[dict[str, Any]]) -> str:
    got = [r["refine"]["time_to_target_s"] for r in per_seed]
    got = [v for v in got if v is not None]
    if not got:
        return "—"
    return f"median {_q(got, 50):.0f} (range {min(got):.0f}–{max(got):.0f})"


def _fmt_around(s: dict[str, Any]) -> str:
    a = s["starts_around_stop"]
    if a["median"] is None:
        return "—"
    return f"median {a['median']:g} (range {a['range'][0]}–{a['range'][1]})"


def _fmt_share(s: dict[str, Any]) -> str:
    if s["share"] is None:
        return "—"
    lo, hi = s["ci95"]
    return f"{s['k']}/{s['n']} ({s['share']:.0%}; {lo:.0%}–{hi:.0%})"


def markdown(result: dict[str, Any]) -> str:
    st, true = result["settings"], result["truth"]
    budget = st["budget_s"]
    fx, rf = result["summary"]["fixed"], result["summary"]["refine"]
    cont, lad = true["continuous"]["stop"], true["ladder"]["stop"]
    rows = []
    for s, name in ((fx, "fixed ladder (low-to-medium.yaml)"), (rf, "refine (4, 16, 32 + passes)")):
        t, w, e = s["time_to_target_s"], s["width_at_stop"], s["estimate"]
        est = (
            "—"
            if e["median"] is None
            else f"{e['median']:.1f} ({e['iqr'][0]:.1f}–{e['iqr'][1]:.1f})"
        )
        rows.append(
            f"| {name} | {_fmt_share(s['reached'])} | {_fmt_s(t['median'], budget)} "
            f"({_fmt_s(t['iqr'][0], budget)}–{_fmt_s(t['iqr'][1], budget)}) | "
            f"{s['server_s_spent']['median']:.0f} | {_fmt_share(s['found'])} | "
            f"{_fmt_w(w['median'])} "
            f"({_fmt_w(w['iqr'][0])}–{_fmt_w(w['iqr'][1])}) | {est} | "
            f"{_fmt_share(s['coverage_continuous'])}{_fmt_band(s['coverage_continuous_band'])} | "
            + (f"{_fmt_share(s['coverage_ladder'])}{_fmt_band(s['coverage_ladder_band'])}"
               if "coverage_ladder" in s else "—")
            + " |"
        )  # fmt: skip
    pts = ", ".join(f"{p['qps']:g}: {p['ratio']:.3f}" for p in true["ladder"]["points"])
    return "\n".join([
        "# Adaptive search vs the fixed ladder, compared fairly (benchmarks/adaptive.py)",
        "",
        f"{st['seeds']} seeds ({st['first_seed']}–{st['first_seed'] + st['seeds'] - 1}); "
        "calibrated H200 profile in virtual time, per-start host jitter "
        "on (the same host for start k of a seed in both strategies), time regime off. Target: "
        f"the p50 TPOT crossover's 95 % CI at most {PRECISION:g} req/s wide (±{PRECISION / 2:g}) "
        "between loads at most 25 % apart (`refine.converged`, for both), checked after each "
        f"{st['starts_per_check']} added starts per condition (the fewest with an interval over "
        f"starts); else stopped at the same budget of {budget:.0f} server-s (what the shipped "
        f"ladder spends with {st['starts_per_check']} starts per condition). A boundary's CI is "
        "the two tested steps whose own CIs decide it (`crossover.bracket`), each step's CI a "
        "97.5 % t interval over its starts (`stats.over_starts`). Server time: 60 s per start "
        "plus its steps.",
        "",
        "| strategy | reached target | server-s to target, median (IQR) | server-s spent, "
        "median | found a stop | CI width at stop, median (IQR) | estimate, median (IQR) | "
        "coverage vs continuous truth | coverage vs ladder truth |",
        "|:--|:--|--:|--:|:--|--:|--:|:--|:--|",
        *rows,
        "",
        f"- **Truth** (long runs over the population of starts; two independent sets of "
        f"arrival seeds): continuous crossover **{cont:.2f} req/s** (seed sets "
        f"{_fmt_sets(true['continuous'])}; bisection of set 0 to "
        f"{true['continuous']['bracket'][0]:g}–{true['continuous']['bracket'][1]:g}); ladder "
        f"truth (the product's interpolation on the true ratios at the ladder's steps) "
        f"**{lad:.2f} req/s** (seed sets {_fmt_sets(true['ladder'])}). True ratios at the "
        f"ladder's steps: {pts}. In brackets after a coverage: the fewest and most seeds "
        "covered for a truth anywhere within ±2 standard errors of it (half the seed sets' "
        "difference).",
        "- How to read it: shares are k/n seeds with a 95 % Wilson interval. \"Server-s to "
        f"target\" counts a seed that stopped on the budget as >{budget:.0f}, so a median "
        f"shown >{budget:.0f} means fewer than half the seeds reached the target. Coverage: "
        "the share of the seeds that found a stop whose CI holds the truth (a nominal 95 % CI "
        "should hold it in ~95 %); a seed with no stop (no step decided, or no single "
        "boundary) prints no CI and is counted under \"found a stop\". A CI of tested steps claims the load where the true gain crosses "
        "the minimum gain lies between them, so both strategies are scored against the "
        "continuous truth; the ladder truth (the product's interpolation on the true ratios "
        "at the ladder's steps) is what the fixed ladder's point estimate aims at.",
        f"- Fixed ladder: the CI width alone (spacing ignored) was within {PRECISION:g} req/s in "
        f"{_fmt_share(fx['width_alone'])} seeds; stops: {_fmt_stops(fx)}. {_spacing(true)}",
        f"- Refine: stops: {_fmt_stops(rf)}; the seeds that reached the target took "
        f"{_fmt_reached_s(result['per_seed'])} server-s, and their CI held the continuous truth "
        f"in {_fmt_share(rf['coverage_continuous_reached'])}.",
        "- Server starts per condition behind the two steps around the estimate at the stop "
        f"(what the interval over starts rests on): fixed {_fmt_around(fx)}, refine {_fmt_around(rf)}.",
        f"- {result['verdict']}",
        "- A pass's estimate fell outside the previous pass's CI in "
        f"{_fmt_share(rf['pass_outside_previous_ci'])} passes (per-seed passes: "
        "`adaptive.json`).",
        f"- Run time: seeds {result['seeds_took_s'] / 60:.0f} CPU-min over "
        f"{result.get('workers', 1)} worker processes"
        + (" (per-seed results reused from an earlier run of the same seeds: `--reuse`)"
           if result.get("seeds_reused") else "")
        + f", truth {true['took_s'] / 60:.0f} min.",
        "",
    ])  # fmt: skip


def verdict(fx: dict[str, Any], rf: dict[str, Any], budget: float) -> str:
    """What the figures support, in a sentence or two."""
    r_med = rf["time_to_target_s"]["median"]
    reach = (
        f"**Reach**: refine reached the target in {_fmt_share(rf['reached'])} seeds within "
        f"{budget:.0f} server-s"
        + ("" if math.isinf(r_med) else f" (median {r_med:.0f} server-s)")
        + f", the fixed ladder in {_fmt_share(fx['reached'])} (median CI width at the budget "
        f"{_fmt_w(fx['width_at_stop']['median'])} req/s)."
    )
    covs = {"refine": rf["coverage_continuous"], "the fixed ladder": fx["coverage_continuous"]}

    low = [n for n, c in covs.items() if c["share"] is not None and c["ci95"][1] < 0.95]
    if not low:
        return reach
    figures = " and ".join(f"{n}'s in {covs[n]['share']:.0%}" for n in low)
    return (
        f"{reach} **Coverage**: the CI at the stop held the truth: {figures} of the seeds "
        "(the upper end of each share's 95 % interval below 95 %): "
        + ("neither 95 % CI is a 95 % interval here" if len(low) == 2 else
           f"{low[0]}'s 95 % CI is not a 95 % interval here")
        + ", so a CI narrower than ±1 req/s is not an accuracy of ±1 req/s."
    )  # fmt: skip


def _seed_job(args: tuple[int, Settings]) -> dict[str, Any]:
    """One seed in a worker process (seeds are independent and deterministic)."""
    seed, st = args
    with _timing_only_text():
        return one_seed(seed, st)


def _say_seed(say: Any, seed: int, r: dict[str, Any]) -> None:
    f, g = r["fixed"], r["refine"]
    say(f"seed {seed}: fixed {f['stopped']} {f['server_s']:.0f} s {_bound_text(f)}; "
        f"refine {g['stopped']} {g['server_s']:.0f} s {_bound_text(g)} "
        f"({r['took_s']:.0f} s)")  # fmt: skip


def run(
    st: Settings, say: Any = print, reuse: dict[str, Any] | None = None, workers: int = 1
) -> dict[str, Any]:
    """The truth, then every seed (or the seeds of an earlier result, ``reuse``) on
    ``workers`` processes, scored."""
    t0 = time.time()
    _check_timing_only_text()
    sc = yaml.safe_load((ROOT / "scenarios" / "low-to-medium.yaml").read_text())
    per_seed = _reused(reuse, st) if reuse is not None else []
    todo = list(range(st.first_seed + len(per_seed), st.first_seed + st.seeds))
    with ProcessPoolExecutor(workers) as pool, _timing_only_text():
        # the seeds run in the workers while this process computes the truth
        results = pool.map(_seed_job, [(seed, st) for seed in todo])
        true = truth([float(q) for q in sc["steps"]], st, say)
        say(f"truth: continuous {true['continuous']['stop']:.2f}, ladder "
            f"{true['ladder']['stop']} req/s ({true['took_s']:.0f} s)")  # fmt: skip
        for seed, r in zip(todo, results, strict=True):
            per_seed.append(r)
            _say_seed(say, seed, r)
    score(per_seed, true)
    summary = {name: summarise(name, [r[name] for r in per_seed], true)
               for name in ("fixed", "refine")}  # fmt: skip
    return {
        "settings": {**asdict(st), "precision_qps": PRECISION, "metric": METRIC,
                     "min_gain": MIN_GAIN, "bootstrap": BOOTSTRAP, "start_s": START_S,
                     "coarse": COARSE, "starts_per_check": STARTS_PER_CHECK},
        "workers": workers,
        "truth": true, "summary": summary,
        "verdict": verdict(summary["fixed"], summary["refine"], st.budget_s),
        "per_seed": per_seed, "seeds_took_s": sum(r["took_s"] for r in per_seed),
        "seeds_reused": reuse is not None, "took_s": time.time() - t0,
    }  # fmt: skip


def _reused(earlier: dict[str, Any], st: Settings) -> list[dict[str, Any]]:
    """The per-seed results of an earlier run with the same budget (the seeds are
    deterministic: rerunning them gives the same), JSON keys back to numbers."""
    ours = {
        "budget_s": st.budget_s,
        "first_seed": st.first_seed,
        "starts_per_check": STARTS_PER_CHECK,
    }
    differ = [k for k, v in ours.items() if earlier["settings"].get(k) != v]
    if differ:
        raise SystemExit(
            f"--reuse: that result differs in {', '.join(differ)}; run the seeds again"
        )
    rows: list[dict[str, Any]] = earlier["per_seed"][: st.seeds]
    for r in rows:
        for name in ("fixed", "refine"):
            r[name]["runs_per_step"] = {float(k): v for k, v in r[name]["runs_per_step"].items()}
    return rows


def _bound_text(res: dict[str, Any]) -> str:
    b = res["bound"]
    if b["qps"] is None:
        return "no boundary"
    lo = "open" if b["lo"] is None else f"{b['lo']:.1f}"
    hi = "open" if b["hi"] is None else f"{b['hi']:.1f}"
    return f"{b['qps']:.1f} ({lo}–{hi})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=DEFAULT_SEEDS)
    p.add_argument("--first-seed", type=int, default=FIRST_SEED,
                   help="seeds FIRST.. (default %(default)s: fresh after the run before "
                   "the interval over starts)")  # fmt: skip
    p.add_argument("--budget-s", type=float, default=Settings.budget_s,
                   help="server-seconds either strategy may spend (default %(default)s)")  # fmt: skip
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--workers", type=int, default=1, help="seeds run in this many processes")
    p.add_argument("--quick", action="store_true",
                   help="2 seeds and a rough truth, to try the script (writes adaptive-quick.*)")  # fmt: skip
    p.add_argument("--reuse", type=Path, metavar="JSON",
                   help="take the per-seed results from this earlier adaptive.json (same budget) "
                   "and compute only the truth and the scores again")  # fmt: skip
    a = p.parse_args(argv)
    st = Settings(seeds=a.seeds, first_seed=a.first_seed, budget_s=a.budget_s)
    stem = "adaptive"
    if a.quick:
        st = Settings(seeds=2, first_seed=a.first_seed, budget_s=a.budget_s, full=Effort(4, 2, 30.0),
                      rough=Effort(2, 1, 20.0), bisect_steps=2)  # fmt: skip
        stem = "adaptive-quick"
    reuse = json.loads(a.reuse.read_text()) if a.reuse else None
    result = run(st, reuse=reuse, workers=a.workers)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / f"{stem}.json").write_text(json.dumps(_finite(result), indent=2, default=_json) + "\n")
    text = markdown(result)
    (a.out / f"{stem}.md").write_text(text)
    print(text)
    return 0


def _finite(v: Any) -> Any:
    """JSON has no infinity: a time to target or width that is not there is null."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_finite(x) for x in v]
    return v


def _json(v: Any) -> Any:
    if isinstance(v, Path):
        return str(v)
    raise TypeError(type(v))


if __name__ == "__main__":
    sys.exit(main())

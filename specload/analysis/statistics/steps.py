"""Per condition and load step: what the client measured, pooled over repeats, warm-up excluded.

A *condition* is every run directory with one ``label``; its records are pooled, and steps
are aligned across conditions by target QPS (not by index, which counts repeats). Latency
percentiles (TTFT, TPOT, E2E) use successful requests only; queue delay uses every request
sent (it is the client's lateness, independent of the server's answer). Achieved QPS counts
what the step scheduled (``records.counts_as_load``: conversation starts, every open-loop
request; the live line counts the same), requests/s every request; both and output tokens/s
divide by the measured window from ``steps.json`` (``end - warmup_end`` per step execution),
or by the span of send times when ``steps.json`` is missing.

Each run directory of a condition is one *replicate* (one server start). Starts add up: a
step's deciding interval is over the units of every start pooled as one sample (interleaved
blocks, time slices of contiguous starts, or the requests where a step is too short to cut),
the construction one start gets, so its claim is about *these* starts. From three starts
on, an interval about *this config* stands beside it (``StepStats.config_latency``: a
two-level bootstrap over the starts, then requests within each, stretched like a t interval
over them, ``stats.over_starts``); it never decides. Each start's own figures, to show
whether they contradict each other, come from ``analysis.decisions.replicates``, which runs
this module on each run directory alone. Repeats inside one run directory (re-walks of the
ladder on one server) are not replicates: they are pooled.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from specload.analysis.inputs.run_columns import RunColumns
from specload.analysis.inputs.server import ServerStep
from specload.analysis.statistics.stats import (
    MIN_STARTS_FOR_CONFIG,
    MIN_TAIL_VALUES,
    Estimate,
    Units,
    estimate,
    few_units_widened,
    for_looks,
    over_starts,
    quantile_sorted,
    rng_for,
    t975,
    t9875,
    unit_percentiles,
)
from specload.core.records import LATE_S, counts_as_load
from specload.recorder.steps_json import measured_window

__all__ = [
    "LATENCY_FIELDS",
    "QUANTILES",
    "StepStats",
    "condition_steps",
    "load_mask",
    "metric_names",
    "pool_runs",
    "start_numbers",
    "start_order_key",
]

#: Metric family → record field (seconds).
LATENCY_FIELDS = {
    "ttft": "ttft_s",
    "tpot": "tpot_s",
    "e2e": "e2e_s",
    "queue_delay": "queue_delay_s",
}
QUANTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99}


def metric_names() -> list[str]:
    """Every latency metric name compare knows, e.g. ``tpot_p50``."""
    return [f"{fam}_{tag}" for fam in LATENCY_FIELDS for tag in QUANTILES]


@dataclass(slots=True)
class StepStats:
    """One condition at one target QPS. Latencies in seconds, rates 0..1."""

    condition: str
    target_qps: float
    n: int
    n_ok: int
    executions: int
    window_s: float
    #: what the step scheduled, per second (``records.counts_as_load``): for multi-turn
    #: scenarios conversation starts, else every request; ``requests_per_s`` counts all
    achieved_qps: float | None
    error_rate: float
    error_kinds: dict[str, int]
    latency: dict[str, Estimate]
    output_tok_s: float | None
    tokens_per_chunk: float | None
    output_tokens_p50: float | None
    #: share of requests sent more than ``LATE_S`` late (``fell_behind`` past 1 in 20)
    late_share: float
    #: p50 (seconds) of ttft/tpot/e2e per step execution (repeat or run dir), when more than one.
    execution_p50: dict[str, list[float]] = field(default_factory=dict)
    server: ServerStep | None = None
    replicates: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    #: Mean prompt-lookup match rate of successful requests (client/lookup.py), and how many
    #: carried one: would n-gram drafting help this traffic?
    lookup_match_rate: float | None = None
    lookup_n: int = 0
    #: How many run directories (replicates, server starts) have records at this step: the
    #: ``latency`` CIs are over all their units pooled (about these starts); from
    #: ``stats.MIN_STARTS_FOR_CONFIG`` on, ``config_latency`` is the interval over them.
    runs: int = 1
    #: each server start's own percentile per latency metric, by replicate number (two or
    #: more starts): what the effect about this config pairs (``stats.effect_over_starts``)
    start_values: dict[str, dict[int, float]] = field(default_factory=dict, repr=False)
    #: the two-level bootstrap replicates over three or more starts before
    #: ``stats.over_starts`` widened them: what the paired effect about this config starts
    #: from (``stats.effect_over_starts``)
    start_replicates: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    #: three or more starts: each latency's interval about this config, over the starts
    #: (``stats.over_starts``), and its replicates; shown beside ``latency``, never deciding
    config_latency: dict[str, Estimate] = field(default_factory=dict)
    config_replicates: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    #: Interleaved blocks (``sweep --interleave``) behind this step, every start's counted,
    #: 0 outside such runs: the CIs are then over blocks (paired with the other conditions'
    #: neighbouring blocks, and widened for few units: ``stats.few_units_widened``).
    blocks: int = 0
    #: Time slices behind this step of its contiguous server starts, every start's counted
    #: (0: none, e.g. a step too short to cut): the CIs are then over them
    #: (``stats.few_units_widened``), so drift within each start is in the interval
    #: (``_time_slices`` says why).
    slices: int = 0
    #: every measured request per second (later conversation turns included): the server's
    #: request rate, which differs from ``achieved_qps`` only in multi-turn scenarios
    requests_per_s: float | None = None


def _windows(run: RunColumns, measured: np.ndarray) -> dict[float, tuple[float, int]]:
    """Measured seconds and number of executions per target QPS of one run."""
    out: dict[float, tuple[float, int]] = {}
    cols = run.cols
    for s in run.steps:
        if s.get("target_qps") is None:
            continue
        q = round(float(s["target_qps"]), 6)
        start, end = measured_window(s)
        if end is None:  # interrupted during this step: up to its last send
            sel = measured & (cols["step"] == s.get("index"))
            end = float(np.nanmax(cols["sent_at"][sel])) if sel.any() else start
        if start is None or end is None:
            continue
        w, k = out.get(q, (0.0, 0))
        out[q] = (w + max(float(end) - float(start), 0.0), k + 1)
    if out:
        return out
    for q in np.unique(np.round(cols["target_qps"][measured], 6)):
        for idx in np.unique(cols["step"][measured & (np.round(cols["target_qps"], 6) == q)]):
            sent = cols["sent_at"][measured & (cols["step"] == idx)]
            span = float(np.nanmax(sent) - np.nanmin(sent)) if sent.size > 1 else 0.0
            w, k = out.get(float(q), (0.0, 0))
            out[float(q)] = (w + span, k + 1)
    return out


#: Fewer successful requests than this in a step: its tail percentiles are called out.
MIN_TAIL_N = 40
#: Fewer successful requests than this on either side at a step: a class of requests is too
#: small to decide there (``class_split``). A p50's 95 % interval over n values runs between
#: about the (n/2 - sqrt(n))-th and (n/2 + sqrt(n))-th of them: at 20 that is the 6th and
#: 15th, at 16 already the 4th and 12th.
MIN_DECIDE_N = 20
#: The stride of the composite ids this module gives each record, one integer so that
#: grouping is one ``np.unique``: its step execution is ``run * ID_STRIDE + step index`` and
#: its bootstrap unit ``replicate * ID_STRIDE + block number`` (interleaved) or
#: ``run * ID_STRIDE + time slice`` (``_units``). Safe because every inner part stays far
#: below it: a run has hundreds of steps at most and a step tens of blocks, and a time
#: slice, ``1 + step * SLICES + slice``, stays below it up to 16,000 steps in one run.
ID_STRIDE = 100_000
#: One contiguous start's step execution is cut into at most ``SLICES`` time slices of at
#: least ``MIN_SLICE_S`` seconds; fewer than ``MIN_SLICES`` and the step is not cut.
SLICES, MIN_SLICE_S, MIN_SLICES = 6, 4.0, 4
#: The t quantile of the interval over contiguous starts' time slices: the 97.5 %
#: interval's, as about the config over starts (``stats.over_starts``). Why: neighbouring
#: slices share regime windows, so six of them vary less than six independent draws
#: would, and with the 95 % one the interval held one start's own long-run ratio in 161 of
#: 180 simulated seed-steps (``docs/report.md``).
SLICE_T = t9875


def start_order_key(run: RunColumns) -> tuple[float, float, str]:
    """Where a run dir (one server start) stands among its condition's: by ``run.json``
    ``replicate``, then start time, then name."""
    rep, started = run.meta.replicate, run.meta.started_at
    return (
        float(rep) if isinstance(rep, (int, float)) else float("inf"),
        float(started) if isinstance(started, (int, float)) else float("inf"),
        run.path.name,
    )


def start_numbers(runs: list[RunColumns]) -> list[int]:
    """Each run dir's server-start number: its ``replicate`` where the runs' numbers are
    distinct, else its place in ``start_order_key`` order. Why: sweeps run apart each stamp
    replicate 1, yet each is a start of its own; its blocks must stay its own units, and it
    pairs with the baseline's start of the same place."""
    reps = [r.meta.replicate for r in runs]
    if all(isinstance(x, int) for x in reps) and len(set(reps)) == len(reps):
        return [int(x) for x in reps if isinstance(x, int)]
    order = sorted(range(len(runs)), key=lambda i: start_order_key(runs[i]))
    numbers = [0] * len(runs)
    for n, i in enumerate(order, 1):
        numbers[i] = n
    return numbers


def _units(run: RunColumns, i: int, rep: int, measured: np.ndarray) -> np.ndarray:
    """The bootstrap unit of each measured record: its run dir, or, in an interleaved run
    (records carry ``block``), its block, numbered (replicate, k) so that block k of every
    condition at a step gets the same id: they ran next to each other (``protocol/interleave``)
    and the paired resampling in ``_latency`` draws them together; else its time slice
    (``_time_slices``), numbered (run, slice) so that every start's are its own units."""
    n = int(measured.sum())
    block = run.cols["block"][measured]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if np.isnan(block).all():
        return i * ID_STRIDE + _time_slices(run, measured)
    return np.asarray(rep * ID_STRIDE + _block_k(run, block, measured), dtype=np.int64)


def _block_k(run: RunColumns, block: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """Each block's number within its cell (``k``), from run.json's plan; run dirs without
    the plan (merged block runs of older versions, synthetic ones) carry it in ``repeat``."""
    plan = (run.meta.interleave or {}).get("plan") or []
    k_of = {int(b["number"]): int(b["k"]) for b in plan if "number" in b and "k" in b}
    if not k_of:
        return np.asarray(np.nan_to_num(run.cols["repeat"][measured], nan=0.0), dtype=np.int64)
    numbers = np.nan_to_num(block, nan=-1.0).astype(np.int64)
    return np.array([k_of.get(int(n), 0) for n in numbers], dtype=np.int64)


def _time_slices(run: RunColumns, measured: np.ndarray) -> np.ndarray:
    """Each record's time slice within its step execution (by send time over the measured
    window), numbered execution * SLICES + slice; 0 for an execution too short to cut.

    Why: on an H200 the speculative step flips between a fast and a slow regime in windows
    of seconds, so the requests of one contiguous window are not independent draws: a
    bootstrap over them takes the window's share of slow seconds as fixed (in
    ``tests/analysis/statistics/test_time_slices.py`` it held the long-run median in 7 of 20 windows,
    the slices' interval in 19). Slices of ten seconds or so hold several of those windows
    each; an interval over them, stretched for few units like blocks (``SLICE_T``), has the
    drift in it: one start's CI held its own long-run ratio in 357 of 360 simulated
    seed-steps over three worlds (``benchmarks/results/coverage.md``)."""
    step = np.nan_to_num(run.cols["step"][measured], nan=-1.0).astype(np.int64)
    sent = run.cols["sent_at"][measured]
    out = np.zeros(step.size, dtype=np.int64)
    spans = {int(s["index"]): measured_window(s) for s in run.steps if s.get("index") is not None}
    for idx in np.unique(step).tolist():
        sel = step == idx
        lo, hi = spans.get(idx, (None, None))
        lo = float(np.nanmin(sent[sel])) if lo is None else float(lo)
        hi = float(np.nanmax(sent[sel])) if hi is None else float(hi)
        k = min(SLICES, int((hi - lo) // MIN_SLICE_S))
        if k < MIN_SLICES or idx < 0:
            continue
        at = np.clip(((sent[sel] - lo) / (hi - lo) * k).astype(np.int64), 0, k - 1)
        out[sel] = 1 + idx * SLICES + at
    return out


def pool_runs(
    runs: list[RunColumns],
) -> tuple[dict[str, np.ndarray], dict[float, tuple[float, int]]]:
    """Concatenated measured (non-warm-up) columns of all runs, and their summed windows."""
    parts: list[dict[str, np.ndarray]] = []
    windows: dict[float, tuple[float, int]] = {}
    numbers = start_numbers(runs)
    for i, run in enumerate(runs):
        measured = ~run.cols["warmup"] & ~np.isnan(run.cols["target_qps"])
        parts.append({k: v[measured] for k, v in run.cols.items()})
        # One step execution = (run dir, step index); step indices count repeats.
        parts[-1]["_exec"] = i * ID_STRIDE + np.nan_to_num(parts[-1]["step"], nan=-1.0)
        # One replicate = one run dir (one server start); its number pairs it with the
        # baseline's start of the same number (``paired.over_starts``)
        parts[-1]["_run"] = np.full(int(measured.sum()), i, dtype=np.int64)
        parts[-1]["_rep"] = np.full(int(measured.sum()), numbers[i], dtype=np.int64)
        parts[-1]["_unit"] = _units(run, i, numbers[i], measured)
        for q, (w, k) in _windows(run, measured).items():
            w0, k0 = windows.get(q, (0.0, 0))
            windows[q] = (w0 + w, k0 + k)
    cols = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    return cols, windows


def _start_values(cols: dict[str, np.ndarray], ok: np.ndarray) -> dict[str, dict[int, float]]:
    """Each server start's own percentile of every latency metric, by its replicate number
    (two or more starts; a start with too few values for a percentile has none:
    ``stats.MIN_TAIL_VALUES``)."""
    out: dict[str, dict[int, float]] = {}
    reps = cols["_rep"]
    if np.unique(cols["_run"]).size < 2:
        return out
    for fam, col in LATENCY_FIELDS.items():
        sel = np.ones(ok.shape, dtype=bool) if fam == "queue_delay" else ok
        x, rep = cols[col][sel], reps[sel]
        finite = ~np.isnan(x)
        x, rep = x[finite], rep[finite]
        for tag, q in QUANTILES.items():
            vals = {}
            for r in np.unique(rep).tolist():
                mine = np.sort(x[rep == r])
                if mine.size * min(q, 1.0 - q) >= MIN_TAIL_VALUES:
                    v = quantile_sorted(mine, q)
                    if v is not None and v > 0:
                        vals[int(r)] = v
            out[f"{fam}_{tag}"] = vals
    return out


def _latency(
    cols: dict[str, np.ndarray], ok: np.ndarray, cond: str, qps: float, b: int, seed: int
) -> tuple[dict[str, Estimate], dict[str, np.ndarray], _Config]:
    """Pooled percentiles and the replicates of the interval that decides: the units of
    every server start at this step pooled as one sample (interleaved blocks; time slices
    of contiguous starts; the requests where a step is too short to cut), widened for few
    units (``stats.few_units_widened``): the claim is about these starts, one or more, as
    one start's always was. From ``MIN_STARTS_FOR_CONFIG`` starts on, the interval about
    this config beside it (``_Config``): over the starts (``stats.over_starts``), never
    deciding."""
    est: dict[str, Estimate] = {}
    reps: dict[str, np.ndarray] = {}
    config = _Config()
    blocks = _is_blocked(cols)
    for fam, col in LATENCY_FIELDS.items():
        sel = np.ones(ok.shape, dtype=bool) if fam == "queue_delay" else ok
        x, run, unit = cols[col][sel], cols["_run"][sel], cols["_unit"][sel]
        finite = ~np.isnan(x)
        x, run, unit = x[finite], run[finite], unit[finite]
        starts = int(np.unique(run).size)
        if not blocks and not _cut(run, unit):
            unit = np.zeros_like(unit)  # steps too short to cut: the requests
        order = np.argsort(x, kind="stable")
        x, unit, run = x[order], unit[order], run[order]
        groups = Units.of(unit) if unit.size and unit.min() != unit.max() else None
        by_start = Units.of(run) if starts >= MIN_STARTS_FOR_CONFIG else None
        for tag, q in QUANTILES.items():
            name = f"{fam}_{tag}"
            # Blocks: the same generator for every condition, so the unit draw (the first
            # draw) picks the same pairs of neighbouring blocks in each.
            key = "blocks" if blocks else cond
            rng = rng_for(key, qps, name, seed=seed)
            est[name], reps[name] = estimate(x, q, b, rng, groups)
            if groups is not None:  # over blocks or time slices, stretched for few of them
                spread = unit_percentiles(x, groups, q)
                est[name], reps[name] = few_units_widened(
                    est[name], reps[name], groups.count, spread, t975 if blocks else SLICE_T
                )
            if by_start is not None:  # this config: over the starts
                raw_est, raw = estimate(x, q, b, rng_for(key, qps, name, "starts", seed=seed),
                                        by_start)  # fmt: skip
                config.raw[name] = raw
                config.latency[name], config.replicates[name] = over_starts(
                    raw_est, raw, starts, unit_percentiles(x, by_start, q)
                )
    return est, reps, config


@dataclass(slots=True)
class _Config:
    """The interval about this config over three or more server starts, per metric: the
    starts' two-level bootstrap replicates (``raw``: what the paired effect starts from,
    ``stats.effect_over_starts``), and each condition's own interval over them."""

    latency: dict[str, Estimate] = field(default_factory=dict)
    replicates: dict[str, np.ndarray] = field(default_factory=dict)
    raw: dict[str, np.ndarray] = field(default_factory=dict)


def _cut(run: np.ndarray, unit: np.ndarray) -> bool:
    """Contiguous starts: every start's step cut into at least ``MIN_SLICES`` time slices
    (``_time_slices``); else the step's interval is over its requests."""
    return bool(run.size) and all(
        np.unique(unit[run == r]).size >= MIN_SLICES for r in np.unique(run).tolist()
    )


def _is_blocked(cols: dict[str, np.ndarray]) -> bool:
    """Records of an interleaved run (``sweep --interleave``): units are blocks."""
    return bool(cols["block"].size) and not bool(np.isnan(cols["block"]).all())


def _one_step(
    cond: str,
    qps: float,
    cols: dict[str, np.ndarray],
    window: tuple[float, int],
    b: int,
    seed: int,
) -> StepStats:
    ok = cols["ok"]
    n, n_ok = int(ok.size), int(ok.sum())
    kinds = Counter(k if k else "unknown" for k in cols["error_kind"][~ok].tolist())
    latency, reps, config = _latency(cols, ok, cond, qps, b, seed)
    out_tok = cols["output_tokens"][ok]
    chunks = cols["content_chunks"][ok]
    with np.errstate(divide="ignore", invalid="ignore"):
        per_chunk = out_tok / chunks
    per_chunk = per_chunk[np.isfinite(per_chunk) & (chunks > 0)]
    win_s, execs = window
    finite_out = out_tok[~np.isnan(out_tok)]
    lookup = cols["lookup_match_rate"][ok]
    lookup = lookup[~np.isnan(lookup)]
    return StepStats(
        condition=cond,
        target_qps=qps,
        n=n,
        n_ok=n_ok,
        executions=execs,
        window_s=win_s,
        achieved_qps=int(load_mask(cols["turn"]).sum()) / win_s if win_s > 0 else None,
        requests_per_s=n / win_s if win_s > 0 else None,
        error_rate=(n - n_ok) / n if n else 0.0,
        error_kinds=dict(sorted(kinds.items())),
        latency=latency,
        output_tok_s=float(finite_out.sum()) / win_s if win_s > 0 else None,
        tokens_per_chunk=float(np.median(per_chunk)) if per_chunk.size else None,
        output_tokens_p50=float(np.median(finite_out)) if finite_out.size else None,
        late_share=float(np.mean(cols["queue_delay_s"] > LATE_S)) if n else 0.0,
        replicates=reps,
        start_values=_start_values(cols, ok),
        start_replicates=config.raw,
        config_latency=config.latency,
        config_replicates=config.replicates,
        execution_p50=_per_execution(cols, ok),
        lookup_match_rate=float(lookup.mean()) if lookup.size else None,
        lookup_n=int(lookup.size),
        runs=int(np.unique(cols["_run"]).size),
        blocks=int(np.unique(cols["_unit"]).size) if _is_blocked(cols) else 0,
        slices=_slices(cols),
    )


def _slices(cols: dict[str, np.ndarray]) -> int:
    """Time slices behind a step of contiguous starts, every start's (``_time_slices``;
    0 where some start's step is too short to cut)."""
    if _is_blocked(cols) or not _cut(cols["_run"], cols["_unit"]):
        return 0
    return int(np.unique(cols["_unit"]).size)


def load_mask(turn: np.ndarray) -> np.ndarray:
    """``records.counts_as_load`` over a ``turn`` column (NaN: no conversation), applied to
    its distinct values only: one definition, at column speed."""
    values, inverse = np.unique(turn, return_inverse=True)
    keep = np.array([counts_as_load(float(v)) for v in values.tolist()], dtype=bool)
    return keep[inverse.reshape(turn.shape)] if values.size else np.zeros(turn.shape, bool)


def _per_execution(cols: dict[str, np.ndarray], ok: np.ndarray) -> dict[str, list[float]]:
    """Median latency of each step execution, to show how far repeats agree."""
    keys = np.unique(cols["_exec"])
    if keys.size < 2:
        return {}
    out: dict[str, list[float]] = {}
    for fam in ("ttft", "tpot", "e2e"):
        x = cols[LATENCY_FIELDS[fam]]
        meds = []
        for k in keys:
            v = x[ok & (cols["_exec"] == k)]
            v = v[~np.isnan(v)]
            if v.size:
                meds.append(float(np.median(v)))
        if len(meds) > 1:
            out[fam] = meds
    return out


def condition_steps(
    cond: str, runs: list[RunColumns], *, b: int = 1000, seed: int = 0
) -> list[StepStats]:
    """Per-step statistics of one condition (its runs pooled), sorted by target QPS.

    Each of ``runs`` is one replicate (server start): their units pool into one sample
    (about these starts); from three on, each step also carries the interval over them
    (about this config).
    """
    cols, windows = pool_runs(runs)
    qps = np.round(cols["target_qps"], 6)
    keys, inverse = np.unique(qps, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(keys.size + 1))
    out = []
    for i, q in enumerate(keys.tolist()):
        idx = order[bounds[i] : bounds[i + 1]]
        sub = {k: v[idx] for k, v in cols.items()}
        window = windows.get(float(q), (0.0, 0))
        out.append(_for_looks(_one_step(cond, float(q), sub, window, b, seed), looks_of(runs)))
    return out


def looks_of(runs: list[RunColumns]) -> int:
    """How many looks at the data the runs' design planned (``sweep --until-decided`` writes
    ``interleave.looks`` into run.json); 1 for every other run."""
    return max([int((r.meta.interleave or {}).get("looks") or 1) for r in runs], default=1)


def _for_looks(step: StepStats, looks: int) -> StepStats:
    """Every interval of the step widened for ``looks`` planned looks (``stats.for_looks``)."""
    if looks <= 1:
        return step
    for name in list(step.latency):
        step.latency[name], step.replicates[name] = for_looks(
            step.latency[name], step.replicates[name], looks
        )
    for name in list(step.config_latency):
        step.config_latency[name], step.config_replicates[name] = for_looks(
            step.config_latency[name], step.config_replicates[name], looks
        )
    return step

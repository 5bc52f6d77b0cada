"""The server's view of each load step, from ``metrics.jsonl`` counter deltas and gauge maxima.

Speculative decoding's effect is explained by numbers only the server knows: how many
drafted tokens were accepted (and at which position), how full the KV cache and the running
batch got, how often the prefix cache hit, and its own latency histograms. Per step we take
each counter's delta between the step's first scrape at or after the warm-up boundary (the
latest scrape not later than ``warmup_end``, else the step's ``start`` scrape) and its
``end`` scrape, and the maximum of each gauge over those scrapes. Step executions with the
same target QPS (repeats, repeated run dirs) are summed before ratios are taken. Real vLLM
labels every sample with ``model_name`` (and ``engine``): we sum over those labels, except
KV-cache usage, the max over engines (``metrics.vllm.kv_usage``, as the live figures).

Latency histograms give two figures per step: percentiles interpolated inside buckets
(``latency_s``, approximate: vLLM's request buckets start at 0.3 s) and the exact mean over
the window from the ``_sum``/``_count`` deltas (``mean_s``, with its observation count in
``mean_n``). The report compares the server's means with the client's means
(``analysis/diagnostics/decode_step.py``), never a bucket estimate with a client percentile.

A server without ``/metrics`` leaves every field None: empty columns, not errors.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from specload.metrics.counters import counter_deltas, is_cumulative, restarted
from specload.metrics.histogram import bucket_deltas, histogram_mean, histogram_quantile
from specload.metrics.scrape import split_key
from specload.metrics.vllm import kv_usage

__all__ = [
    "SERVER_HISTOGRAMS",
    "ServerGap",
    "ServerStep",
    "scrapes_by_step",
    "server_gaps",
    "server_steps",
]

#: Short name → vLLM histogram (seconds). ``tpot`` is vLLM's per-request time per output token.
SERVER_HISTOGRAMS = {
    "ttft": "vllm:time_to_first_token_seconds",
    "queue": "vllm:request_queue_time_seconds",
    "prefill": "vllm:request_prefill_time_seconds",
    "decode": "vllm:request_decode_time_seconds",
    "tpot": "vllm:request_time_per_output_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
    "e2e": "vllm:e2e_request_latency_seconds",
}
#: Older vLLM names, read when the current one is absent.
_OLD_NAMES = {
    "vllm:kv_cache_usage_perc": "vllm:gpu_cache_usage_perc",
    "vllm:prefix_cache_hits_total": "vllm:gpu_prefix_cache_hits_total",
    "vllm:prefix_cache_queries_total": "vllm:gpu_prefix_cache_queries_total",
    "vllm:inter_token_latency_seconds": "vllm:time_per_output_token_seconds",
}
#: GPU memory used (MiB) per GPU, merged into metrics.jsonl by ``metrics/gpu.py``.
GPU_MEMORY_KEY = "specload:gpu_memory_used_mib"
#: Where ``_instance`` keeps a scrape's KV usage (``kv_usage``: either vLLM name, max over engines).
_KV = "vllm:kv_cache_usage_perc"
#: Gauges that add up over engines / GPUs (requests, memory).
_GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting", GPU_MEMORY_KEY)


@dataclass(slots=True)
class ServerStep:
    """Server-side figures for one step (pooled over its executions). Rates are 0..1."""

    scrapes: int = 0
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    acceptance_rate: float | None = None
    acceptance_length: float | None = None
    per_position: list[float] = field(default_factory=list)
    prefix_hit_rate: float | None = None
    kv_usage_max: float | None = None
    running_max: float | None = None
    waiting_max: float | None = None
    gpu_memory_mib_max: float | None = None
    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    #: Bucket-interpolated percentiles per histogram, e.g. ``ttft_p50`` (approximate).
    latency_s: dict[str, float] = field(default_factory=dict)
    #: Exact means over the window (Δ_sum / Δ_count) per histogram short name, e.g. ``itl``.
    mean_s: dict[str, float] = field(default_factory=dict)
    #: Observations behind each mean (Δ_count).
    mean_n: dict[str, float] = field(default_factory=dict)
    #: Step executions left out of the counters because the server restarted during them.
    restarts: int = 0


def _sum_name(values: Mapping[str, float], name: str) -> float | None:
    """Sum over labels of ``name`` (or of its older vLLM name when it is absent)."""
    for candidate in (name, _OLD_NAMES.get(name)):
        if candidate is None:
            continue
        found = [v for k, v in values.items() if k == candidate or k.startswith(candidate + "{")]
        if found:
            return sum(found)
    return None


def _per_position(values: Mapping[str, float]) -> dict[int, float]:
    out: dict[int, float] = defaultdict(float)
    name = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
    for key, value in values.items():
        if key.startswith(name):
            base, labels = split_key(key)
            if base == name and "position" in labels:
                out[int(labels["position"])] += value
    return dict(out)


def _window(scrapes: list[dict[str, Any]], warmup_end: float | None) -> list[dict[str, Any]]:
    """The step's scrapes from the measurement start on (see module docstring)."""
    scrapes = sorted(scrapes, key=lambda s: (s.get("t") or 0.0, s.get("phase") != "start"))
    first = 0
    if warmup_end is not None:
        for i, s in enumerate(scrapes):
            if (s.get("t") or 0.0) <= warmup_end:
                first = i
    return scrapes[first:]


def _instance(scrapes: list[dict[str, Any]]) -> tuple[dict[str, float], dict[str, float]]:
    """Counter deltas and gauge maxima over one step execution's scrapes."""
    start = scrapes[0].get("values") or {}
    end = scrapes[-1].get("values") or {}
    cumulative = [k for k in end if is_cumulative(k)]
    # a series the server reset (restarted) in the window is left out: its delta is unknown
    deltas, _resets = counter_deltas(start, end, cumulative)
    gauges: dict[str, float] = {}
    for s in scrapes:
        now: dict[str, float] = {}
        values = s.get("values") or {}
        for key, value in values.items():
            base = key.split("{", 1)[0]
            if base in _GAUGES:  # requests and memory add up over engines / GPUs
                now[base] = now.get(base, 0.0) + value
        kv = kv_usage(values)  # a usage share does not add up: max over engines
        if kv is not None:
            now[_KV] = kv
        for base, value in now.items():
            gauges[base] = max(gauges.get(base, value), value)
    return deltas, gauges


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def _summarise(deltas: dict[str, float], gauges: dict[str, float], scrapes: int) -> ServerStep:
    drafts = _sum_name(deltas, "vllm:spec_decode_num_drafts_total")
    draft_tokens = _sum_name(deltas, "vllm:spec_decode_num_draft_tokens_total")
    accepted = _sum_name(deltas, "vllm:spec_decode_num_accepted_tokens_total")
    pos = _per_position(deltas)
    latency: dict[str, float] = {}
    means: dict[str, float] = {}
    mean_n: dict[str, float] = {}
    for short, hist in SERVER_HISTOGRAMS.items():
        buckets = bucket_deltas({}, deltas, hist) or bucket_deltas(
            {}, deltas, _OLD_NAMES.get(hist, hist)
        )
        for tag, q in (("p50", 0.5), ("p95", 0.95)):
            v = histogram_quantile(q, buckets)
            if v is not None:
                latency[f"{short}_{tag}"] = v
        mean = histogram_mean(deltas, hist) or histogram_mean(deltas, _OLD_NAMES.get(hist, hist))
        if mean is not None:
            means[short], mean_n[short] = mean
    accept_len = _ratio(accepted, drafts)
    return ServerStep(
        scrapes=scrapes,
        drafts=drafts,
        draft_tokens=draft_tokens,
        accepted_tokens=accepted,
        acceptance_rate=_ratio(accepted, draft_tokens),
        acceptance_length=None if accept_len is None else 1.0 + accept_len,
        per_position=[pos[i] / drafts for i in sorted(pos)] if drafts else [],
        prefix_hit_rate=_ratio(
            _sum_name(deltas, "vllm:prefix_cache_hits_total"),
            _sum_name(deltas, "vllm:prefix_cache_queries_total"),
        ),
        kv_usage_max=gauges.get(_KV),
        running_max=gauges.get("vllm:num_requests_running"),
        waiting_max=gauges.get("vllm:num_requests_waiting"),
        gpu_memory_mib_max=gauges.get(GPU_MEMORY_KEY),
        prompt_tokens=_sum_name(deltas, "vllm:prompt_tokens_total"),
        generation_tokens=_sum_name(deltas, "vllm:generation_tokens_total"),
        latency_s=latency,
        mean_s=means,
        mean_n=mean_n,
    )


def server_steps(
    runs: Iterable[tuple[list[dict[str, Any]], list[dict[str, Any]]]],
) -> dict[float, ServerStep]:
    """Per target QPS, the pooled server figures of ``(metrics, steps)`` pairs of runs.

    Steps with fewer than two scrapes (no delta possible) are skipped; a QPS with no usable
    step is absent from the result. A step execution during which the server restarted
    (``metrics/counters.py: restarted``) adds its gauges but no counters, and is counted in
    ``restarts``.
    """
    deltas: dict[float, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    gauges: dict[float, dict[str, float]] = defaultdict(dict)
    counts: dict[float, int] = defaultdict(int)
    restarts: dict[float, int] = defaultdict(int)
    for metrics, steps in runs:
        by_step = scrapes_by_step(metrics)
        for s in steps:
            scrapes = by_step.get(int(s.get("index", -1)), [])
            window = _window(scrapes, s.get("warmup_end"))
            if len(window) < 2 or s.get("target_qps") is None:
                continue
            qps = round(float(s["target_qps"]), 6)
            d, g = _instance(window)
            step_deltas = deltas[qps]  # created even when the server exposes only gauges
            if restarted([w.get("values") or {} for w in window]):
                restarts[qps] += 1
                d = {}
            for k, v in d.items():
                step_deltas[k] += v
            for k, v in g.items():
                gauges[qps][k] = max(gauges[qps].get(k, v), v)
            counts[qps] += len(window)
    out = {q: _summarise(dict(deltas[q]), gauges[q], counts[q]) for q in deltas}
    for q, n in restarts.items():
        out[q].restarts = n
    return out


def scrapes_by_step(metrics: Iterable[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """``metrics.jsonl`` lines grouped by the step they belong to (lines of no step dropped)."""
    by_step: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for m in metrics:
        if m.get("step") is not None:
            by_step[int(m["step"])].append(m)
    return by_step


@dataclass(frozen=True, slots=True)
class ServerGap:
    """A step of a run whose server figures are missing or incomplete: the server restarted
    during it (its counters went back; that step's counters are left out), or its scrapes
    failed, ``why`` as ``steps.json``'s ``server_notes`` recorded it."""

    target_qps: float
    restarted: bool
    why: str = ""


def server_gaps(metrics: list[dict[str, Any]], steps: list[dict[str, Any]]) -> list[ServerGap]:
    """Each step of a run whose server figures are missing or incomplete (the reasons
    ``steps.json`` keeps; ``report/compare_words.py`` words them). Nothing for a server that
    never answered ``/metrics``: run.json's notes say that once."""
    out: list[ServerGap] = []
    if not metrics:
        return out
    by_step = scrapes_by_step(metrics)
    for s in steps:
        if s.get("target_qps") is None:
            continue
        q = float(s["target_qps"])
        window = _window(by_step.get(int(s.get("index", -1)), []), s.get("warmup_end"))
        if restarted([w.get("values") or {} for w in window]):
            out.append(ServerGap(q, restarted=True))
        out += [ServerGap(q, restarted=False, why=str(why)) for why in s.get("server_notes") or []]
    return out

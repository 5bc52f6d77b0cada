"""vLLM's metric names turned into per-step figures: acceptance, prefix hits, KV, queue.

Counters are cumulative, so a step's figure is the difference between its ``end`` and
``start`` scrapes; gauges are instantaneous, so a step's figure is the max over all of its
scrapes (start, interval, end). Real vLLM labels every sample with ``model_name`` (and
``engine`` with several engines): values are summed over every label except the one that
means something (``position`` for per-position acceptance), with one exception: KV-cache
usage is each engine's share of its own cache, so a scrape's figure is the max over engines
(``kv_usage``, the one definition the report's ``analysis/inputs/server.py`` uses too). Older vLLM names (``gpu_*``) are
read as fallbacks. A server without these metrics gives ``None`` fields, never an error.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from specload.metrics.counters import counter_deltas
from specload.metrics.scrape import split_key

__all__ = [
    "StepServerMetrics",
    "group_by_label",
    "kv_usage",
    "per_step_server_metrics",
    "step_server_metrics",
    "total",
]

ACCEPTED = ("vllm:spec_decode_num_accepted_tokens_total",)
DRAFT_TOKENS = ("vllm:spec_decode_num_draft_tokens_total",)
DRAFTS = ("vllm:spec_decode_num_drafts_total",)
ACCEPTED_PER_POS = ("vllm:spec_decode_num_accepted_tokens_per_pos_total",)
PREFIX_HITS = ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")
PREFIX_QUERIES = ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")
KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
RUNNING = ("vllm:num_requests_running",)
WAITING = ("vllm:num_requests_waiting",)
PROMPT_TOKENS = ("vllm:prompt_tokens_total",)
GENERATION_TOKENS = ("vllm:generation_tokens_total",)


def total(values: dict[str, float], names: Sequence[str]) -> float | None:
    """Sum of every sample whose name is the first of ``names`` present (any labels)."""
    for name in names:
        found = [v for k, v in values.items() if split_key(k)[0] == name]
        if found:
            return float(sum(found))
    return None


def kv_usage(values: Mapping[str, float]) -> float | None:
    """KV-cache usage of one scrape (a fraction, 0..1): the max over its samples (engines,
    models) of the first of ``KV_USAGE`` present. A share of each engine's own cache does not
    add up: summed, two engines at 100 % read 200 %."""
    for name in KV_USAGE:
        found = [v for k, v in values.items() if k == name or k.startswith(name + "{")]
        if found:
            return float(max(found))
    return None


def _kv_max(scrapes: Iterable[Mapping[str, float]]) -> float | None:
    seen = [v for v in map(kv_usage, scrapes) if v is not None]
    return max(seen) if seen else None


def group_by_label(values: dict[str, float], names: Sequence[str], label: str) -> dict[str, float]:
    """``{label value: sum}`` for the first of ``names`` present, summing the other labels."""
    for name in names:
        out: dict[str, float] = defaultdict(float)
        for k, v in values.items():
            n, labels = split_key(k)
            if n == name and label in labels:
                out[labels[label]] += v
        if out:
            return dict(out)
    return {}


def _delta(start: dict[str, float], end: dict[str, float], names: Sequence[str]) -> float | None:
    """Delta over the step of the first of ``names`` the server exports, summed over labels;
    None when it exports none of them or a series was reset (``metrics/counters.py``)."""
    for name in names:
        keys = [k for k in end if split_key(k)[0] == name]
        if keys:
            deltas, resets = counter_deltas(start, end, keys)
            return None if resets else float(sum(deltas.values()))
    return None


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


@dataclass(frozen=True, slots=True)
class StepServerMetrics:
    """The server's view of one step. Counts are deltas over the step; ``None`` = not exposed.

    ``acceptance_rate`` = accepted / drafted tokens; ``acceptance_length`` = 1 + accepted /
    drafts (tokens per verification step, vLLM's definition); ``per_position`` = accepted at
    position i / drafts; ``kv_usage_max`` is a fraction (0..1) as vLLM exports it.
    """

    acceptance_rate: float | None = None
    acceptance_length: float | None = None
    per_position: list[float] | None = None
    prefix_hit_rate: float | None = None
    kv_usage_max: float | None = None
    running_max: float | None = None
    waiting_max: float | None = None
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    prompt_tokens: float | None = None
    generation_tokens: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _per_position(
    start: dict[str, float], end: dict[str, float], drafts: float | None
) -> list[float] | None:
    a = group_by_label(start, ACCEPTED_PER_POS, "position")
    b = group_by_label(end, ACCEPTED_PER_POS, "position")
    if not b or not drafts:
        return None
    positions = sorted(b, key=lambda p: int(p) if p.isdigit() else 1 << 30)
    return [(b[p] - a.get(p, 0.0)) / drafts for p in positions]


def _gauge_max(scrapes: Iterable[dict[str, float]], names: Sequence[str]) -> float | None:
    seen = [v for v in (total(s, names) for s in scrapes) if v is not None]
    return max(seen) if seen else None


def step_server_metrics(scrapes: Sequence[dict[str, float]]) -> StepServerMetrics:
    """Figures for one step from its scrapes' ``values`` in time order (first = start, last = end)."""
    if not scrapes:
        return StepServerMetrics()
    start, end = scrapes[0], scrapes[-1]
    drafts = _delta(start, end, DRAFTS)
    draft_tokens = _delta(start, end, DRAFT_TOKENS)
    accepted = _delta(start, end, ACCEPTED)
    hits, queries = _delta(start, end, PREFIX_HITS), _delta(start, end, PREFIX_QUERIES)
    return StepServerMetrics(
        acceptance_rate=_ratio(accepted, draft_tokens),
        acceptance_length=(1.0 + accepted / drafts) if accepted is not None and drafts else None,
        per_position=_per_position(start, end, drafts),
        prefix_hit_rate=_ratio(hits, queries),
        kv_usage_max=_kv_max(scrapes),
        running_max=_gauge_max(scrapes, RUNNING),
        waiting_max=_gauge_max(scrapes, WAITING),
        drafts=drafts,
        draft_tokens=draft_tokens,
        accepted_tokens=accepted,
        prompt_tokens=_delta(start, end, PROMPT_TOKENS),
        generation_tokens=_delta(start, end, GENERATION_TOKENS),
    )


def per_step_server_metrics(lines: Iterable[dict[str, Any]]) -> dict[int, StepServerMetrics]:
    """``metrics.jsonl`` lines → ``{step index: StepServerMetrics}``.

    A step's scrapes are its ``start`` line, its ``interval`` lines and its ``end`` line,
    ordered by time. A step without both a start and an end scrape gets only gauge maxima.
    """
    by_step: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for line in lines:
        if line.get("step") is not None and isinstance(line.get("values"), dict):
            by_step[int(line["step"])].append(line)
    out: dict[int, StepServerMetrics] = {}
    order = {"start": 0, "interval": 1, "end": 2}
    for step, items in by_step.items():
        items.sort(key=lambda x: (order.get(x.get("phase", "interval"), 1), x.get("t", 0.0)))
        phases = {x.get("phase") for x in items}
        values = [x["values"] for x in items]
        if {"start", "end"} <= phases:
            out[step] = step_server_metrics(values)
        else:
            out[step] = StepServerMetrics(
                kv_usage_max=_kv_max(values),
                running_max=_gauge_max(values, RUNNING),
                waiting_max=_gauge_max(values, WAITING),
            )
    return out

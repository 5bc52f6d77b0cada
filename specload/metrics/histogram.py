"""Percentiles from Prometheus histogram buckets, the way ``histogram_quantile`` estimates them.

The server's own view of latency (vLLM's TTFT, queue, prefill, decode and per-token
histograms) only exists as cumulative bucket counters. Over one load step we take the bucket
deltas (end scrape minus start scrape) and estimate a quantile by linear interpolation
inside the bucket that holds the rank, exactly as Prometheus' ``histogram_quantile`` does:
the first bucket's lower edge is 0 (when its upper edge is positive), and a rank that falls
in the ``+Inf`` bucket returns the highest finite upper edge. Values are in the histogram's
unit (seconds for every vLLM latency histogram).

Bucket interpolation is only as fine as the buckets: vLLM's request histograms start at
0.3 s, so a 150 ms prefill reads as "somewhere in (0, 0.3]". The exact figure a histogram
does keep is its mean over the window, ``Δ_sum / Δ_count`` (``histogram_mean``).

Keys follow ``metrics.jsonl``: ``name_bucket{le="0.01",model_name="m"}``; labels other than
``le`` (``model_name``, ``engine``) are summed over.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from specload.metrics.counters import counter_deltas
from specload.metrics.scrape import split_key

__all__ = [
    "bucket_deltas",
    "histogram_mean",
    "histogram_quantile",
]


def _le(value: str) -> float:
    return math.inf if value in ("+Inf", "Inf", "inf") else float(value)


def bucket_deltas(
    start: Mapping[str, float], end: Mapping[str, float], name: str
) -> list[tuple[float, float]]:
    """Cumulative bucket counts of histogram ``name`` between two scrapes, summed over labels.

    ``name`` is the histogram's base name (``vllm:time_to_first_token_seconds``); the
    result is ``[(le, count), ...]`` sorted by ``le`` and ending with ``+Inf`` when the
    server exposed it. A bucket that went backwards (the server restarted between the
    scrapes) makes the whole histogram unknown for the window: ``[]``.
    """
    bucket_name = f"{name}_bucket"
    keys = [k for k in end if k.startswith(bucket_name) and split_key(k)[0] == bucket_name]
    deltas, resets = counter_deltas(start, end, keys)
    if resets:
        return []
    totals: dict[float, float] = {}
    for key, delta in deltas.items():
        labels = split_key(key)[1]
        if "le" in labels:
            le = _le(labels["le"])
            totals[le] = totals.get(le, 0.0) + delta
    return sorted(totals.items())


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """The ``q`` quantile (0..1) of cumulative ``buckets``; None when they hold no samples.

    Mirrors Prometheus: rank = q * total, find the first bucket whose cumulative count
    reaches the rank, interpolate linearly between its lower and upper edge.
    """
    if not buckets or not 0.0 <= q <= 1.0:
        return None
    les = [le for le, _ in buckets]
    counts = [c for _, c in buckets]
    # Cumulative counts must not decrease; scrapes taken mid-update can break this slightly.
    for i in range(1, len(counts)):
        counts[i] = max(counts[i], counts[i - 1])
    total = counts[-1]
    if total <= 0:
        return None
    rank = q * total
    idx = next(i for i, c in enumerate(counts) if c >= rank)
    if math.isinf(les[idx]):
        finite = [le for le in les if not math.isinf(le)]
        return finite[-1] if finite else None
    upper = les[idx]
    if idx == 0:
        lower, below = (0.0 if upper > 0 else upper), 0.0
    else:
        lower, below = les[idx - 1], counts[idx - 1]
    in_bucket = counts[idx] - below
    if in_bucket <= 0:
        return upper
    return lower + (upper - lower) * (rank - below) / in_bucket


def _labelled_sum(values: Mapping[str, float], name: str) -> float | None:
    """Sum of sample ``name`` over its labels; None when no such sample exists."""
    found = [v for k, v in values.items() if k == name or k.startswith(name + "{")]
    return sum(found) if found else None


def histogram_mean(deltas: Mapping[str, float], name: str) -> tuple[float, float] | None:
    """``(mean, count)`` of histogram ``name`` from its ``_sum``/``_count`` deltas.

    ``deltas`` are already differences between two scrapes (or sums of such differences);
    labels (``model_name``, ``engine``) are summed over. None when the server exposes no
    ``_sum``/``_count`` for ``name`` or no observation fell in the window.
    """
    total = _labelled_sum(deltas, f"{name}_sum")
    count = _labelled_sum(deltas, f"{name}_count")
    if total is None or not count or count <= 0 or total < 0:
        return None
    return total / count, count

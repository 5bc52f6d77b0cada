"""Helpers that read what a run wrote: requests.jsonl records as dicts."""

from __future__ import annotations


def max_in_flight(records: list[dict]) -> int:
    """The most requests in flight at once, from each record's ``sent_at`` and ``done_at``
    (a request that ends as another is sent counts as ended first)."""
    edges = sorted([(r["sent_at"], 1) for r in records] + [(r["done_at"], -1) for r in records])
    now = peak = 0
    for _, d in edges:
        now += d
        peak = max(peak, now)
    return peak

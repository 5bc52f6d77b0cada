"""Counter deltas between two ``/metrics`` scrapes: one rule for every reader.

A Prometheus counter only grows, so over a step its delta is end minus start. A series that
is absent from the start scrape and present at the end was created during the step (vLLM
adds labelled series, such as per-position acceptance, when they first count): it counts
from 0. A counter that went *backwards* was reset: the server restarted between the
scrapes, and what it counted across the restart is unknown. Its delta is ``None``, never
the post-restart value (which would read as a step that did almost nothing) and never a
negative number. The live figures (``metrics/vllm.py``), the report's server columns
(``analysis/server.py``) and the histogram estimates (``metrics/histogram.py``) all use this.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["counter_delta", "counter_deltas"]


def counter_delta(before: float | None, after: float | None) -> float | None:
    """``after - before`` (``before`` None: a new series, from 0); None when ``after`` is
    absent or the counter went backwards (reset)."""
    if after is None:
        return None
    start = 0.0 if before is None else before
    return None if after < start else after - start


def counter_deltas(
    start: Mapping[str, float], end: Mapping[str, float], keys: Iterable[str]
) -> tuple[dict[str, float], list[str]]:
    """Deltas of ``keys`` (samples of ``end``) and the keys that were reset (left out)."""
    deltas: dict[str, float] = {}
    resets: list[str] = []
    for key in keys:
        d = counter_delta(start.get(key), end.get(key))
        if d is None:
            if key in end:
                resets.append(key)
        else:
            deltas[key] = d
    return deltas, resets

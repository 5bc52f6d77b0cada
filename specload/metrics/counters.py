"""Counter deltas between two ``/metrics`` scrapes: one rule for every reader.

A Prometheus counter only grows, so over a step its delta is end minus start. A series that
is absent from the start scrape and present at the end was created during the step (vLLM
adds labelled series, such as per-position acceptance, when they first count): it counts
from 0. A counter that went *backwards* was reset: the server restarted between the
scrapes, and what it counted across the restart is unknown. Its delta is ``None``, never
the post-restart value (which would read as a step that did almost nothing) and never a
negative number. The live figures (``metrics/vllm.py``), the report's server columns
(``analysis/inputs/server.py``) and the histogram estimates (``metrics/histogram.py``) all use this.

A counter that restarted and grew past its old value by the next scrape hides its reset from
a two-scrape delta, so ``restarted`` looks at every consecutive pair of a step's scrapes and
at ``process_start_time_seconds`` (which vLLM, like any prometheus_client exporter, serves):
a step in which the server restarted has no trustworthy counter delta at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "CUMULATIVE_SUFFIXES",
    "START_TIME",
    "counter_delta",
    "counter_deltas",
    "is_cumulative",
    "restarted",
]

#: Sample-name endings of cumulative series (counters and histogram parts).
CUMULATIVE_SUFFIXES = ("_total", "_bucket", "_sum", "_count")
#: The exporter process's start (unix s): it changes when the server restarts.
START_TIME = "process_start_time_seconds"


def is_cumulative(key: str) -> bool:
    """True for a counter or histogram sample key (``name{labels}``)."""
    return key.split("{", 1)[0].endswith(CUMULATIVE_SUFFIXES)


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


#: Series that only count up (a histogram's ``_sum`` may shrink: negative observations).
_MONOTONE_SUFFIXES = ("_total", "_bucket", "_count")


def restarted(scrapes: Sequence[Mapping[str, float]]) -> bool:
    """True when the server restarted between two consecutive ``scrapes`` (in time order):
    its process start time changed, or a count (``_total``, ``_bucket``, ``_count``) went
    backwards."""
    for before, after in zip(scrapes, scrapes[1:], strict=False):
        t0, t1 = before.get(START_TIME), after.get(START_TIME)
        if t0 is not None and t1 is not None and t1 != t0:
            return True
        for key, value in after.items():
            if key.split("{", 1)[0].endswith(_MONOTONE_SUFFIXES) and value < before.get(key, value):
                return True
    return False

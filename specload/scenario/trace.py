"""Request traces: when each request of real traffic arrived, and how long it was.

``arrival: trace`` replays a trace instead of drawing arrivals: request ``i`` is sent at its
trace time divided by the step's speedup (``steps`` then are speedups: playing the trace 1x,
2x, 4x is "stepping load" on real traffic). Two formats are read, detected from the first
line:

- ``specload``: JSONL ``{"timestamp": seconds, "input_tokens": n, "output_tokens": m}``,
  optionally ``"category"`` (compare answers per class) and ``"messages"`` (sent as they are;
  otherwise a synthetic prompt of ``n`` tokens is made);
- ``mooncake``: JSONL ``{"timestamp": milliseconds, "input_length": n, "output_length": m,
  "hash_ids": [...]}`` (the Mooncake / FAST'25 trace format): each hash id stands for a
  ``MOONCAKE_BLOCK``-token block of prompt, and equal ids are equal blocks, so requests that
  shared a prefix in the trace share it here and prefix caching is replayed.

Times are made relative to the first request. A step at speedup ``s`` lasts ``span / s``
seconds, where ``span`` is the last request's time plus one mean gap, so its target QPS is
``count / span * s``: the analysis lines steps up by QPS as for any other arrival process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specload.core.errors import ConfigError
from specload.scenario.prompt_files import json_lines

__all__ = ["MOONCAKE_BLOCK", "TRACE_FORMATS", "Trace", "TraceEntry", "read_trace"]

#: Tokens per hash id in the Mooncake trace format.
MOONCAKE_BLOCK = 512
TRACE_FORMATS = ("specload", "mooncake")
_EXPECTED = (
    'expected JSONL of {"timestamp": s, "input_tokens": n, "output_tokens": m} (specload) or '
    '{"timestamp": ms, "input_length": n, "output_length": m, "hash_ids": [...]} (mooncake)'
)


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """One request of a trace; ``at_s`` is seconds after the trace's first request."""

    at_s: float
    input_tokens: int
    output_tokens: int
    category: str | None = None
    messages: tuple[dict[str, Any], ...] | None = None
    hash_ids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Trace:
    """A whole trace, in time order."""

    format: str
    entries: tuple[TraceEntry, ...]

    @property
    def span_s(self) -> float:
        """The last request's time plus one mean gap: one replay at 1x lasts this long."""
        n, last = len(self.entries), self.entries[-1].at_s
        return last * n / (n - 1) if n > 1 and last > 0 else 1.0

    @property
    def rate_qps(self) -> float:
        """Mean arrival rate at 1x."""
        return len(self.entries) / self.span_s


def _int(obj: dict[str, Any], key: str, file: str, where: str) -> int:
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ConfigError(f"got {v!r} (expected an integer >= 1)", file=file, path=f"{where}.{key}")
    return v


def _time(obj: dict[str, Any], file: str, where: str) -> float:
    v = obj.get("timestamp")
    if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
        raise ConfigError(f"got {v!r} (expected a time >= 0)", file=file, path=f"{where}.timestamp")
    return float(v)


def _entry(fmt: str, obj: Any, file: str, where: str) -> tuple[float, TraceEntry]:
    if not isinstance(obj, dict):
        raise ConfigError(f"not an object ({_EXPECTED})", file=file, path=where)
    t = _time(obj, file, where)
    if fmt == "mooncake":
        ids = obj.get("hash_ids", [])
        if not isinstance(ids, list) or not all(isinstance(h, int) for h in ids):
            raise ConfigError("expected a list of integers", file=file, path=f"{where}.hash_ids")
        return t / 1000.0, TraceEntry(
            0.0,
            _int(obj, "input_length", file, where),
            _int(obj, "output_length", file, where),
            hash_ids=tuple(ids),
        )
    msgs = obj.get("messages")
    if msgs is not None and (
        not isinstance(msgs, list)
        or not msgs
        or not all(isinstance(m, dict) and "role" in m and "content" in m for m in msgs)
    ):
        raise ConfigError(
            'expected a list of {"role", "content"}', file=file, path=f"{where}.messages"
        )
    cat = obj.get("category")
    return t, TraceEntry(
        0.0,
        _int(obj, "input_tokens", file, where),
        _int(obj, "output_tokens", file, where),
        category=None if cat is None else str(cat),
        messages=tuple(msgs) if msgs else None,
    )


def _format(first: Any, file: str) -> str:
    if isinstance(first, dict) and "input_length" in first:
        return "mooncake"
    if isinstance(first, dict) and "input_tokens" in first:
        return "specload"
    keys = ", ".join(sorted(first)) if isinstance(first, dict) else type(first).__name__
    raise ConfigError(f"unknown trace format (found {keys}; {_EXPECTED})", file=file, path="line 1")


def read_trace(file: str) -> Trace:
    """The trace at ``file``, times relative to its first request, in time order."""
    try:
        text = open(file, encoding="utf-8").read()
    except OSError as exc:
        raise ConfigError(f"cannot read ({exc.strerror}; {_EXPECTED})", file=file) from None
    rows = json_lines(text, file, _EXPECTED)
    if not rows:
        raise ConfigError(f"no requests ({_EXPECTED})", file=file)
    fmt = _format(rows[0][1], file)
    timed = sorted((_entry(fmt, obj, file, where) for where, obj in rows), key=lambda x: x[0])
    t0 = timed[0][0]
    entries = tuple(
        TraceEntry(t - t0, e.input_tokens, e.output_tokens, e.category, e.messages, e.hash_ids)
        for t, e in timed
    )
    return Trace(fmt, entries)

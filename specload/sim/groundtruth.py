"""Server-side truth for client-accuracy tests: when each content chunk was written.

Kept per ``X-Request-Id`` (``--ground-truth``), at most ``max_requests`` requests (oldest
dropped first), so a long run holds bounded memory. Times are unix seconds: the wall clock
at the request's arrival plus monotonic time since (``TruthRecord.now``), so a wall-clock step
mid-request moves no duration the tests compare with the client's.
Shape: docs/run-dir.md, "Simulator ground truth".

``regime_truth``: which seconds of this server's life were in a slow window of the time
regime (``--spec-regime``), so a test or benchmark can hold a client's measurement against it
(``GET /debug/host``, key ``spec_regime``; in-process, ``TimeRegime.slow_intervals``).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from specload.sim.regime import TimeRegime

__all__ = ["GroundTruth", "TruthRecord", "regime_truth"]


@dataclass(slots=True)
class TruthRecord:
    request_id: str
    arrived_at: float
    prompt_tokens: int
    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    cached_tokens: int = 0
    #: ``time.monotonic()`` read with ``arrived_at``: later stamps are ``arrived_at`` plus the
    #: monotonic time since
    arrived_mono: float = field(default_factory=time.monotonic)

    def now(self) -> float:
        """Unix seconds now, on this request's anchor (durations monotonic)."""
        return self.arrived_at + (time.monotonic() - self.arrived_mono)

    def to_dict(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "arrived_at": self.arrived_at,
            "first_token_at": self.chunk_times[0] if self.chunk_times else None,
            "last_token_at": self.chunk_times[-1] if self.chunk_times else None,
            "chunk_times": self.chunk_times,
            "chunk_tokens": self.chunk_tokens,
            "output_tokens": sum(self.chunk_tokens),
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
        }


class GroundTruth:
    """Bounded store of ``TruthRecord`` by request id."""

    def __init__(self, max_requests: int = 10_000) -> None:
        self.max_requests = max_requests
        self._records: OrderedDict[str, TruthRecord] = OrderedDict()

    def start(
        self, request_id: str, arrived_at: float, prompt_tokens: int, arrived_mono: float
    ) -> TruthRecord:
        rec = TruthRecord(request_id, arrived_at, prompt_tokens, arrived_mono=arrived_mono)
        self._records[request_id] = rec
        self._records.move_to_end(request_id)
        while len(self._records) > self.max_requests:
            self._records.popitem(last=False)
        return rec

    def get(self, request_id: str) -> TruthRecord | None:
        return self._records.get(request_id)

    def all(self) -> list[dict[str, Any]]:
        return [r.to_dict() for r in self._records.values()]


def regime_truth(
    regime: TimeRegime | None, started_at: float, uptime_s: float
) -> dict[str, Any] | None:
    """The regime's parameters and seed and its slow windows in ``[0, uptime_s)``: seconds
    after the start (``start_s``, ``end_s``; the last one clipped at ``uptime_s``) and unix
    times (``start_at``, ``end_at``, from ``started_at``). None when the regime is off."""
    if regime is None:
        return None
    windows = regime.slow_intervals(0.0, uptime_s)
    return {
        **regime.to_dict(),
        "in_slow_window": regime.is_slow(uptime_s),
        "realised_slow_share": regime.slow_share_between(0.0, uptime_s) if uptime_s > 0 else 0.0,
        "slow_windows": [
            {"start_s": a, "end_s": b, "start_at": started_at + a, "end_at": started_at + b}
            for a, b in windows
        ],
    }

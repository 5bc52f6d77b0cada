"""Fault switches for reliability tests, settable by CLI flag or ``POST /debug/faults``.

Request-level faults answer before the engine sees the request (``error_rate`` → HTTP
``error_status``, ``rate_limit_rate`` → 429). Stream faults hit a fraction ``stream_fault_rate``
of streamed requests, chosen when the request arrives: stall (no bytes for ``stall_s`` once
``stall_after_tokens`` tokens were sent), drop (close the connection after ``drop_after_tokens``
tokens, no terminating chunk), malformed (one non-JSON ``data:`` line after
``malformed_after_tokens`` tokens) and ``no_done`` (end the body without ``data: [DONE]``).

Endpoint faults: ``tokenize_reset_every`` N resets the connection of every N-th ``/tokenize``
request instead of answering (a busy server's hiccup while a run is prepared);
``metrics_delay_s`` holds each ``/metrics`` answer that long (a scrape that hangs);
``metrics_status`` answers ``/metrics`` with that HTTP status instead (a failing exporter).
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import Any

__all__ = ["Faults"]


@dataclass
class Faults:
    """Current fault settings; ``None`` token thresholds mean off."""

    error_rate: float = 0.0
    error_status: int = 500
    rate_limit_rate: float = 0.0
    stall_after_tokens: int | None = None
    stall_s: float = 5.0
    drop_after_tokens: int | None = None
    malformed_after_tokens: int | None = None
    no_done: bool = False
    stream_fault_rate: float = 1.0
    tokenize_reset_every: int | None = None
    metrics_delay_s: float = 0.0
    metrics_status: int | None = None

    def update(self, changes: dict[str, Any]) -> None:
        """Apply a partial update; ``ValueError`` names the first bad key."""
        fields = {f.name: f for f in dataclasses.fields(self)}
        new = dataclasses.asdict(self)
        for key, value in changes.items():
            if key not in fields:
                raise ValueError(f"{key}: unknown fault (known: {', '.join(sorted(fields))})")
            new[key] = value
        candidate = Faults(**new)
        candidate.validate()
        self.__dict__.update(candidate.__dict__)

    def validate(self) -> None:
        for key in ("error_rate", "rate_limit_rate", "stream_fault_rate"):
            v = getattr(self, key)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 <= v <= 1:
                raise ValueError(f"{key}: must be a number in [0, 1]")
        if not isinstance(self.error_status, int) or not 500 <= self.error_status <= 599:
            raise ValueError("error_status: must be an integer 500..599")
        for key in ("stall_after_tokens", "drop_after_tokens", "malformed_after_tokens"):
            v = getattr(self, key)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise ValueError(f"{key}: must be null or an integer >= 0")
        for key in ("stall_s", "metrics_delay_s"):
            v = getattr(self, key)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{key}: must be a number >= 0")
        n = self.tokenize_reset_every
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
            raise ValueError("tokenize_reset_every: must be null or an integer >= 1")
        m = self.metrics_status
        if m is not None and (not isinstance(m, int) or isinstance(m, bool) or not 400 <= m <= 599):
            raise ValueError("metrics_status: must be null or an integer 400..599")
        if not isinstance(self.no_done, bool):
            raise ValueError("no_done: must be true or false")  # noqa: TRY004 - a 400

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def request_error(self, rng: random.Random) -> int | None:
        """HTTP status to fail this request with, or None."""
        if self.error_rate and rng.random() < self.error_rate:
            return self.error_status
        if self.rate_limit_rate and rng.random() < self.rate_limit_rate:
            return 429
        return None

    def stream_active(self) -> bool:
        return (
            self.stall_after_tokens is not None
            or self.drop_after_tokens is not None
            or self.malformed_after_tokens is not None
            or self.no_done
        )

"""Server-side truth for client-accuracy tests: when each content chunk was written.

Kept per ``X-Request-Id`` (``--ground-truth``), at most ``max_requests`` requests (oldest
dropped first), so a long run holds bounded memory. Times are unix seconds (``time.time()``).
Shape: docs/architecture.md, "Simulator ground truth".
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

__all__ = ["GroundTruth", "TruthRecord"]


@dataclass(slots=True)
class TruthRecord:
    request_id: str
    arrived_at: float
    prompt_tokens: int
    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    cached_tokens: int = 0

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

    def start(self, request_id: str, arrived_at: float, prompt_tokens: int) -> TruthRecord:
        rec = TruthRecord(request_id, arrived_at, prompt_tokens)
        self._records[request_id] = rec
        self._records.move_to_end(request_id)
        while len(self._records) > self.max_requests:
            self._records.popitem(last=False)
        return rec

    def get(self, request_id: str) -> TruthRecord | None:
        return self._records.get(request_id)

    def all(self) -> list[dict[str, Any]]:
        return [r.to_dict() for r in self._records.values()]

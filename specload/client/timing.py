"""Request timing: one clock, and TTFT / TPOT / E2E / ITL from the timestamps it gives.

Definitions follow vLLM's ``bench serve`` (and ``docs/load-model.md``):

- ``TTFT = t_first_content − t_sent`` (a role-only first chunk is not content);
- ``E2E = t_last_content − t_sent`` (the trailing usage chunk does not extend it);
- ``TPOT = (E2E − TTFT) / (output_tokens − 1)``, only when ``output_tokens > 1``;
- ``ITL`` = gaps between consecutive content chunks. Under speculative decoding one chunk
  can carry several tokens, so chunk gaps are not per-token latency;
  ``output_tokens / content_chunks`` is the client-side tokens-per-chunk estimate.

Durations come from the monotonic clock end to end: ``Clock.now()`` is ``time.monotonic()``
(``CLOCK_MONOTONIC``), which a wall-clock step (NTP stepping, an admin, a VM resumed) never
moves, and which Linux slews with NTP just like the wall clock, so neither drifts from the
other between steps. A record's timestamps (``sent_at``, ``first_token_at``, ``done_at``)
are still unix times, to line up with other processes, the pacer's ``scheduled_at`` and the
simulator's ground truth: each request reads one ``WallAnchor`` (wall and monotonic together)
at its start and maps its monotonic times through it, so they are the wall clock as it read
when the request began. The kernel's receive stamps (``rxstamp``) are ``CLOCK_REALTIME``; the
socket converts each to the monotonic clock as it reads it (``rxstamp.realtime_to_monotonic``).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

__all__ = [
    "CLOCK",
    "Clock",
    "SAME_CLOCK",
    "StreamTiming",
    "WallAnchor",
    "e2e_s",
    "itl_s",
    "tpot_s",
    "ttft_s",
]


class Clock:
    """The monotonic clock every duration of a record is measured on (see module doc)."""

    __slots__ = ()

    @staticmethod
    def now() -> float:
        """Monotonic seconds (float); only differences mean anything."""
        return time.monotonic()


@dataclass(frozen=True, slots=True)
class WallAnchor:
    """The wall and monotonic clocks read together at a request's start: monotonic time
    ``t`` is unix time ``wall + (t - mono)``. Durations never pass through it."""

    wall: float
    mono: float

    @classmethod
    def take(cls) -> WallAnchor:
        return cls(time.time(), time.monotonic())

    def to_wall(self, t: float) -> float:
        """A monotonic time of this request as unix seconds."""
        return self.wall + (t - self.mono)


#: An anchor that maps every time to itself: for times already on the wall clock (tests,
#: records built from unix times).
SAME_CLOCK = WallAnchor(0.0, 0.0)


#: The process-wide clock every client uses, so records of one process share one anchor.
CLOCK = Clock()


def ttft_s(sent_at: float, first_content_at: float | None) -> float | None:
    """Time to first content token (seconds), None when no content arrived."""
    return None if first_content_at is None else first_content_at - sent_at


def e2e_s(sent_at: float, last_content_at: float | None) -> float | None:
    """Send to last content token (seconds), None when no content arrived."""
    return None if last_content_at is None else last_content_at - sent_at


def tpot_s(ttft: float | None, e2e: float | None, output_tokens: int | None) -> float | None:
    """Mean time per output token after the first (seconds); None unless > 1 token."""
    if ttft is None or e2e is None or output_tokens is None or output_tokens < 2:
        return None
    return (e2e - ttft) / (output_tokens - 1)


def itl_s(chunk_times: list[float]) -> list[float]:
    """Gaps between consecutive content chunks (seconds); one fewer than chunks."""
    return [b - a for a, b in itertools.pairwise(chunk_times)]


@dataclass(slots=True)
class StreamTiming:
    """Accumulates content-chunk arrival times of one stream (monotonic seconds, ``Clock``);
    ``anchor`` turns them into the record's unix timestamps."""

    sent_at: float
    anchor: WallAnchor = SAME_CLOCK
    chunk_times: list[float] = field(default_factory=list)

    def content(self, t: float) -> None:
        """A chunk carrying content (text, reasoning or tool-call delta) arrived at ``t``."""
        self.chunk_times.append(t)

    @property
    def first_content_at(self) -> float | None:
        return self.chunk_times[0] if self.chunk_times else None

    @property
    def last_content_at(self) -> float | None:
        return self.chunk_times[-1] if self.chunk_times else None

    @property
    def content_chunks(self) -> int:
        return len(self.chunk_times)

    def summary(self, output_tokens: int | None) -> tuple[float | None, float | None, float | None]:
        """``(ttft_s, tpot_s, e2e_s)`` for this stream given its output token count."""
        ttft = ttft_s(self.sent_at, self.first_content_at)
        e2e = e2e_s(self.sent_at, self.last_content_at)
        return ttft, tpot_s(ttft, e2e, output_tokens), e2e

"""Open-loop arrival schedules: when each request of a step should be sent.

The pacer is pure and seeded: ``Pacer(rate_qps, arrival, seed, start_at).next_send_at(i)``
is the absolute time (unix seconds) at which arrival ``i`` (0-based) is due, whatever
happened to earlier requests. Load therefore does not depend on response times (open loop);
a client that falls behind sends late, and ``sent_at - scheduled_at`` says by how much.

- ``poisson``: gaps are independent exponentials of mean ``1/rate`` drawn from a RNG seeded
  by ``seed`` (``random.Random``, string-seeded: identical across processes and platforms).
  Arrival 0 is one gap after ``start_at``.
- ``constant``: arrival ``i`` at ``start_at + (i + phase) / rate``.
- ``gamma``: gaps are independent Gamma(shape ``burstiness``, scale ``1/(rate * burstiness)``)
  draws: mean ``1/rate`` as Poisson, coefficient of variation ``1/sqrt(burstiness)`` (vLLM
  ``bench serve --burstiness``: 1 is Poisson, below 1 burstier, above 1 smoother).
- ``trace``: arrival ``i`` at ``start_at + offsets[i] / speed`` (a recorded trace replayed at
  a speedup, ``scenario/trace.py``); past the trace's last request there is none (``inf``).

Splitting one step over W processes: ``Pacer.share(rate_qps, arrival, seed, start_at,
index=k, count=W)`` gives process ``k`` its own schedule at ``rate/W``. Poisson shares use
independent seed streams (``derive_seed``), so their superposition is Poisson at ``rate``
with no correlation between processes; constant shares are phase-shifted by ``k/rate`` so the
merged stream is exactly evenly spaced at ``rate``. Gamma shares take every ``W``-th arrival of
one stream at ``rate`` (process ``k``: arrivals ``k``, ``k + W``, ...), because W independent
gamma streams superpose into something smoother than gamma: the merged stream is exactly the
one stream, with its burstiness, however many processes send it. Trace shares split the same
way.

``CountedWindow`` conditions a Poisson schedule on its count inside one window: exactly
``round(rate * (hi - lo))`` arrivals in ``[lo, hi)``, placed as uniform order statistics (a
Poisson process given its count), and the unconditioned schedule outside it. An interleaved
block's measured window is a few seconds; unconditioned, its count varies by ``sqrt(n)``
(a 2-s window at 6 req/s holds 12 ± 3.5 arrivals, one standard deviation), and the block
measured another load than its step's. Shares take every ``W``-th arrival of the window's
one list.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable

__all__ = ["ARRIVALS", "CountedWindow", "Pacer", "derive_seed"]

#: Arrival processes the pacer knows (the scenario's ``arrival`` choices).
ARRIVALS = ("constant", "poisson", "gamma", "trace")


def derive_seed(seed: int, *parts: object) -> int:
    """A 63-bit seed derived from ``seed`` and labels (step index, process index...).

    Hash-based so neighbouring labels give unrelated streams (``seed + k`` would not, for
    some generators), and stable across processes (no ``PYTHONHASHSEED`` dependence).
    """
    text = ":".join([str(seed), *(str(p) for p in parts)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1


class Pacer:
    """Absolute arrival times for one step at ``rate_qps`` requests per second."""

    __slots__ = (
        "_gaps_sum",
        "_rng",
        "arrival",
        "burstiness",
        "offset",
        "offsets",
        "speed",
        "phase",
        "rate_qps",
        "seed",
        "start_at",
        "stride",
    )

    def __init__(
        self,
        rate_qps: float,
        arrival: str,
        seed: int,
        start_at: float,
        *,
        phase: float = 0.0,
        burstiness: float = 1.0,
        stride: int = 1,
        offset: int = 0,
        offsets: tuple[float, ...] = (),
        speed: float = 1.0,
    ) -> None:
        if arrival not in ARRIVALS:
            raise ValueError(f"arrival {arrival!r} not in {ARRIVALS}")
        if not (rate_qps > 0 and math.isfinite(rate_qps)):
            raise ValueError(f"rate_qps must be a positive number, got {rate_qps!r}")
        self.rate_qps = float(rate_qps)
        self.arrival = arrival
        self.seed = seed
        self.start_at = float(start_at)
        self.phase = float(phase)
        if not (burstiness > 0 and math.isfinite(burstiness)):
            raise ValueError(f"burstiness must be a positive number, got {burstiness!r}")
        self.burstiness = float(burstiness)
        #: gamma shares: this process sends arrivals ``offset``, ``offset + stride``, ... of
        #: one stream at ``rate_qps * stride``
        self.stride, self.offset = stride, offset
        #: ``trace``: each request's time in the trace (seconds), replayed ``speed`` times faster
        self.offsets, self.speed = offsets, float(speed)
        self._rng = random.Random(f"specload-pacer:{seed}")
        self._gaps_sum: list[float] = []  # cumulative Poisson offsets, extended lazily

    @classmethod
    def share(
        cls,
        rate_qps: float,
        arrival: str,
        seed: int,
        start_at: float,
        *,
        index: int,
        count: int,
        burstiness: float = 1.0,
        offsets: tuple[float, ...] = (),
        speed: float = 1.0,
    ) -> Pacer:
        """Process ``index`` of ``count``'s part of a step at total ``rate_qps``."""
        if not 0 <= index < count:
            raise ValueError(f"share index {index} not in [0, {count})")
        if arrival == "trace":
            return cls(
                rate_qps / count, arrival, seed, start_at, offsets=offsets, speed=speed,
                stride=count, offset=index,
            )  # fmt: skip
        if arrival == "gamma":  # every count-th arrival of one stream (see module doc)
            return cls(
                rate_qps / count, arrival, seed, start_at, burstiness=burstiness,
                stride=count, offset=index,
            )  # fmt: skip
        if arrival == "constant":
            # Evenly interleaved: process k sends at start + (k + i*count) / rate.
            return cls(rate_qps / count, arrival, seed, start_at, phase=index / count)
        return cls(rate_qps / count, arrival, derive_seed(seed, "share", index, count), start_at)

    def next_send_at(self, i: int) -> float:
        """Unix time at which arrival ``i`` (0-based) is due."""
        if i < 0:
            raise ValueError(f"arrival index must be >= 0, got {i}")
        if self.arrival == "constant":
            return self.start_at + (i + self.phase) / self.rate_qps
        j = i * self.stride + self.offset  # this process's i-th arrival in the whole stream
        if self.arrival == "trace":
            if j >= len(self.offsets):
                return math.inf
            return self.start_at + self.offsets[j] / self.speed
        rate = self.rate_qps * self.stride
        sums = self._gaps_sum
        total = sums[-1] if sums else 0.0
        while len(sums) <= j:
            if self.arrival == "gamma":
                b = self.burstiness
                total += self._rng.gammavariate(b, 1.0 / (rate * b))
            else:
                total += self._rng.expovariate(rate)
            sums.append(total)
        return self.start_at + sums[j]

    def first_at_or_after(self, t: float) -> int:
        """The index of this process's first arrival due at or after ``t`` (a share that
        takes over mid-step continues a trace where it stands, not from its start)."""
        return _first_at_or_after(self.next_send_at, t)

    def __repr__(self) -> str:
        return (
            f"Pacer(rate_qps={self.rate_qps:g}, arrival={self.arrival!r}, "
            f"seed={self.seed}, start_at={self.start_at:.3f})"
        )


def _first_at_or_after(next_send_at: Callable[[int], float], t: float) -> int:
    """The first index whose (non-decreasing) time is at or after ``t``."""
    lo, hi = 0, 1
    while next_send_at(hi) < t:
        lo, hi = hi, hi * 2
    while lo < hi:
        mid = (lo + hi) // 2
        if next_send_at(mid) < t:
            lo = mid + 1
        else:
            hi = mid
    return lo


class CountedWindow:
    """``base``'s schedule with exactly ``round(rate_qps * (hi - lo))`` arrivals in
    ``[lo, hi)`` (see module doc); this process takes arrivals ``index``, ``index + count``,
    ... of the window's one list, which ``seed`` draws the same in every process."""

    def __init__(
        self,
        base: Pacer,
        rate_qps: float,
        seed: int,
        lo: float,
        hi: float,
        *,
        index: int = 0,
        count: int = 1,
    ) -> None:
        rng = random.Random(f"specload-window:{seed}")
        n = round(rate_qps * (hi - lo))
        window = sorted(lo + rng.random() * (hi - lo) for _ in range(n))
        self.base = base
        self.window = window[index::count]
        self._before = base.first_at_or_after(lo)
        self._after = base.first_at_or_after(hi)

    def next_send_at(self, i: int) -> float:
        if i < self._before:
            return self.base.next_send_at(i)
        j = i - self._before
        if j < len(self.window):
            return self.window[j]
        return self.base.next_send_at(self._after + j - len(self.window))

    def first_at_or_after(self, t: float) -> int:
        return _first_at_or_after(self.next_send_at, t)

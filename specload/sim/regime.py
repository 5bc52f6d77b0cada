"""The speculative step's time regime: the host flips between fast and slow windows.

Why: on an H200 with vLLM 0.26, the draft-model speculative step (k draft passes plus the
verify pass: many small CUDA launches, bound by the host) flipped between ~13 ms and ~20 ms
in windows of a few seconds, at any load, while the baseline step stayed flat; in slow
seconds the GPU waited on the host at full clocks (docs/simulator.md, "Time regime";
benchmarks/data/h200-regime.json). So a slow window multiplies the same thing a slower host
does, the launch-bound speculation time (``costmodel.spec_launch_time``), by ``factor``, and
``host.HostDraw`` composes it with the per-start factor and slow window. A baseline step has
no launch-bound speculation time, so the regime leaves it alone by construction.

Model: an alternating renewal process. Fast and slow windows alternate, their lengths
exponential with means ``mean_fast_s`` and ``mean_slow_s`` (long-run slow share
``mean_slow_s / (mean_fast_s + mean_slow_s)``); the state at ``t = 0`` is slow with that share
(a stationary start). The switch times come from a generator seeded by the regime seed
alone and are generated lazily, in order from ``t = 0``, as later times are asked for: the
state at any ``t >= 0`` is a pure function of (parameters, seed, t), whatever order times are
asked in and in whichever process.
"""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass, field
from typing import Any

from specload.sim.profiles import Profile

__all__ = ["CALIBRATED", "OFF", "RegimeParams", "TimeRegime", "parse_regime"]

#: ``--spec-regime`` value (and the flag without a value): the profile's calibrated regime.
CALIBRATED = "calibrated"
#: ``--spec-regime`` value: no regime (the default).
OFF = "off"
_KEYS = ("slow_share", "mean_window_s", "mean_fast_s", "mean_slow_s", "factor")
_EXPECTED = (
    "expected 'calibrated', 'off' or KEY=NUMBER[,KEY=NUMBER...] with KEY one of "
    "slow_share (0-1, exclusive), mean_window_s, mean_fast_s, mean_slow_s (seconds > 0), "
    "factor (> 0)"
)


@dataclass(frozen=True)
class RegimeParams:
    """Mean fast and slow window lengths (s) and the slow windows' factor."""

    mean_fast_s: float
    mean_slow_s: float
    factor: float

    @classmethod
    def from_share(cls, slow_share: float, mean_window_s: float, factor: float) -> RegimeParams:
        """From the long-run slow share and the mean length of a window of either kind
        (half a fast+slow cycle), the way the finding is usually stated."""
        return cls(
            2.0 * (1.0 - slow_share) * mean_window_s, 2.0 * slow_share * mean_window_s, factor
        )

    @classmethod
    def from_profile(cls, prof: Profile) -> RegimeParams:
        """The profile's calibrated regime (``--spec-regime calibrated``)."""
        return cls(
            prof.spec_regime_mean_fast_s, prof.spec_regime_mean_slow_s, prof.spec_regime_factor
        )

    @property
    def slow_share(self) -> float:
        return self.mean_slow_s / (self.mean_fast_s + self.mean_slow_s)

    @property
    def mean_window_s(self) -> float:
        return (self.mean_fast_s + self.mean_slow_s) / 2.0

    def validate(self) -> None:
        """``ValueError`` naming the first bad parameter."""
        for name, value in (
            ("mean_fast_s", self.mean_fast_s),
            ("mean_slow_s", self.mean_slow_s),
            ("factor", self.factor),
        ):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name}: {value} must be a number > 0")

    def to_dict(self) -> dict[str, float]:
        return {
            "slow_share": self.slow_share,
            "mean_window_s": self.mean_window_s,
            "mean_fast_s": self.mean_fast_s,
            "mean_slow_s": self.mean_slow_s,
            "factor": self.factor,
        }


@dataclass(frozen=True)
class TimeRegime:
    """One seeded realisation of ``params``; equal when parameters and seed are equal."""

    params: RegimeParams
    seed: int
    # Switch times (s since the start), generated lazily; mutable state of a frozen value:
    # it only ever grows the same way, so it never changes an answer.
    _switches: list[float] = field(default_factory=list, init=False, compare=False, repr=False)
    _rng: random.Random = field(init=False, compare=False, repr=False)
    _slow_first: bool = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.params.validate()
        rng = random.Random(f"specload-sim-regime:{self.seed}")
        object.__setattr__(self, "_rng", rng)
        object.__setattr__(self, "_slow_first", rng.random() < self.params.slow_share)

    def _extend(self, t: float) -> None:
        """Draw windows until the last switch is after ``t``."""
        sw, p = self._switches, self.params
        while not sw or sw[-1] <= t:
            slow = self._slow_first != (len(sw) % 2 == 1)
            mean = p.mean_slow_s if slow else p.mean_fast_s
            sw.append((sw[-1] if sw else 0.0) + self._rng.expovariate(1.0 / mean))

    def is_slow(self, t: float) -> bool:
        """Is ``t`` seconds after the start inside a slow window (``t < 0`` counts as 0)?"""
        t = max(t, 0.0)
        if not self._switches or t >= self._switches[-1]:
            self._extend(t)
        return self._slow_first != (bisect.bisect_right(self._switches, t) % 2 == 1)

    def factor_at(self, t: float) -> float:
        """The factor on launch-bound speculation time at ``t``: ``factor`` or 1."""
        return self.params.factor if self.is_slow(t) else 1.0

    def slow_intervals(self, t0: float, t1: float) -> list[tuple[float, float]]:
        """The slow windows, clipped to ``[t0, t1)``, as (start, end) seconds after the start."""
        if t1 <= t0:
            return []
        self._extend(t1)
        sw, out = self._switches, []
        i = bisect.bisect_right(sw, max(t0, 0.0))  # window i is [sw[i - 1] (or 0), sw[i])
        start = sw[i - 1] if i else 0.0
        while start < t1:
            if self._slow_first != (i % 2 == 1):
                out.append((max(start, t0), min(sw[i], t1)))
            start, i = sw[i], i + 1
        return out

    def slow_share_between(self, t0: float, t1: float) -> float:
        """The realised fraction of ``[t0, t1)`` spent slow."""
        if t1 <= t0:
            return 0.0
        return sum(b - a for a, b in self.slow_intervals(t0, t1)) / (t1 - t0)

    def to_dict(self) -> dict[str, Any]:
        return {**self.params.to_dict(), "regime_seed": self.seed}

    def describe(self) -> str:
        """The startup log's words for it."""
        p = self.params
        return (
            f"spec_regime=slow_share={p.slow_share:.3g},mean_fast_s={p.mean_fast_s:g},"
            f"mean_slow_s={p.mean_slow_s:g},factor={p.factor:g} regime_seed={self.seed}"
        )


def parse_regime(value: str | None, base: RegimeParams) -> RegimeParams | None:
    """``--spec-regime``: None or ``off`` (no regime), ``calibrated`` (``base``, the profile's)
    or ``KEY=NUMBER,...`` changing ``base``: ``slow_share``/``mean_window_s`` or
    ``mean_fast_s``/``mean_slow_s`` (not both pairs), and ``factor``."""
    if value is None or value.strip().lower() == OFF:
        return None
    try:
        out = base if value.strip().lower() == CALIBRATED else _apply(base, _key_values(value))
        out.validate()
    except ValueError as exc:
        raise ValueError(f"--spec-regime {value}: {exc}") from None
    return out


def _key_values(value: str) -> dict[str, float]:
    kv: dict[str, float] = {}
    for item in value.split(","):
        key, sep, num = item.partition("=")
        key = key.strip()
        if not sep or key not in _KEYS or key in kv:
            raise ValueError(_EXPECTED)
        try:
            kv[key] = float(num)
        except ValueError:
            raise ValueError(f"{key}: {num.strip()!r} is not a number; {_EXPECTED}") from None
    return kv


def _apply(base: RegimeParams, kv: dict[str, float]) -> RegimeParams:
    by_share = {"slow_share", "mean_window_s"} & kv.keys()
    by_means = {"mean_fast_s", "mean_slow_s"} & kv.keys()
    if by_share and by_means:
        raise ValueError("give slow_share/mean_window_s or mean_fast_s/mean_slow_s, not both")
    factor = kv.get("factor", base.factor)
    if by_share:
        share = kv.get("slow_share", base.slow_share)
        if not 0.0 < share < 1.0:
            raise ValueError(f"slow_share: {share} must be between 0 and 1 (exclusive)")
        return RegimeParams.from_share(share, kv.get("mean_window_s", base.mean_window_s), factor)
    return RegimeParams(
        kv.get("mean_fast_s", base.mean_fast_s), kv.get("mean_slow_s", base.mean_slow_s), factor
    )

"""The host a server start lands on: how fast its CPU launches speculation's work.

Real H200 hosts of one kind ran the same vLLM 0.26 config with matching baseline steps but
speculative steps 15-30 % apart, and one start showed a ~15-s window where the spec step ran
1.5x slower (docs/simulator.md, "Hosts and server starts"). Speculation's cost per step (k
sequential draft passes plus the verify pass) is bound by CPU kernel launches; the baseline's
is not. So a host is one number, the factor on the cost model's launch-bound speculation time
(``costmodel.spec_launch_time``), made of:

- ``scale``: ``--spec-overhead-scale`` (1 = the calibration host);
- ``factor``: drawn once per server start with ``--start-jitter`` (lognormal, median 1,
  ``sigma`` of its log), from a generator seeded by ``--start-seed`` alone;
- ``window``: with probability ``slow_window_prob`` per start, one slow window of
  ``slow_window_s`` seconds starting uniformly in ``[0, slow_window_latest_s)`` after the start,
  inside which the factor is multiplied by ``slow_window_factor``;
- ``regime``: ``--spec-regime`` (``regime.py``), fast and slow windows alternating for the
  whole server life, seeded by ``--regime-seed`` (default: the start seed), inside whose slow
  windows the factor is multiplied by the regime's ``factor`` too.

The draws are always taken in the same order (normal, uniform, uniform), so one start seed
gives the same host for any sigma or probability: a larger sigma stretches the same host.
"""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass
from typing import Any

from specload.sim.profiles import Profile
from specload.sim.regime import RegimeParams, TimeRegime

__all__ = [
    "CALIBRATED",
    "HOST_A_SCALE",
    "HostDraw",
    "JitterParams",
    "SlowWindow",
    "draw_host",
    "parse_jitter",
]

#: ``--start-jitter`` given without a value.
CALIBRATED = "calibrated"
#: ``--spec-overhead-scale`` that reproduces the GPU validation's slow H200 host A on ``h200-llama8b``
#: (fitted to its spec p50 TPOT by benchmarks/sim_hosts.py).
HOST_A_SCALE = 1.68


@dataclass(frozen=True)
class JitterParams:
    """Per-start jitter (the profile's ``start_jitter_sigma`` and ``slow_window_*`` fields)."""

    sigma: float
    window_prob: float
    window_s: float
    window_factor: float
    window_latest_s: float

    @classmethod
    def from_profile(cls, prof: Profile) -> JitterParams:
        """The profile's calibrated jitter (``--start-jitter calibrated``)."""
        return cls(
            prof.start_jitter_sigma,
            prof.slow_window_prob,
            prof.slow_window_s,
            prof.slow_window_factor,
            prof.slow_window_latest_s,
        )

    def validate(self) -> None:
        checks = (
            ("start jitter sigma", self.sigma, 0.0 <= self.sigma <= 3.0, "in [0, 3]"),
            ("slow_window_prob", self.window_prob, 0.0 <= self.window_prob <= 1.0, "in [0, 1]"),
            ("slow_window_s", self.window_s, self.window_s > 0, "> 0"),
            ("slow_window_factor", self.window_factor, self.window_factor > 0, "> 0"),
            ("slow_window_latest_s", self.window_latest_s, self.window_latest_s >= 0, ">= 0"),
        )
        for name, value, ok, want in checks:
            if not (ok and math.isfinite(value)):
                raise ValueError(f"{name}: {value} must be {want}")


@dataclass(frozen=True)
class SlowWindow:
    """``[start_s, end_s)`` seconds after the server start, launch-bound cost x ``factor``."""

    start_s: float
    end_s: float
    factor: float


@dataclass(frozen=True)
class HostDraw:
    """This start's host; the identity (scale 1, no jitter) is the calibration host."""

    scale: float = 1.0
    factor: float = 1.0
    window: SlowWindow | None = None
    jitter: JitterParams | None = None
    seed: int | None = None
    regime: TimeRegime | None = None

    @property
    def is_identity(self) -> bool:
        return (
            self.scale == 1.0 and self.factor == 1.0 and self.window is None and self.regime is None
        )

    def spec_scale(self, t: float) -> float:
        """Factor on speculation's launch-bound time at ``t`` seconds after the start."""
        s = self.scale * self.factor
        w = self.window
        if w is not None and w.start_s <= t < w.end_s:
            s *= w.factor
        if self.regime is not None:
            s *= self.regime.factor_at(t)
        return s

    def to_dict(self) -> dict[str, Any]:
        w = self.window
        return {
            "spec_overhead_scale": self.scale,
            "start_jitter": None
            if self.jitter is None
            else {
                "sigma": self.jitter.sigma,
                "slow_window_prob": self.jitter.window_prob,
                "slow_window_s": self.jitter.window_s,
                "slow_window_factor": self.jitter.window_factor,
                "slow_window_latest_s": self.jitter.window_latest_s,
            },
            "start_seed": self.seed,
            "host_factor": self.factor,
            "effective_scale": self.scale * self.factor,
            "slow_window": None
            if w is None
            else {"start_s": w.start_s, "end_s": w.end_s, "factor": w.factor},
            "spec_regime": None if self.regime is None else self.regime.to_dict(),
        }

    def describe(self) -> str:
        """One line for the startup log."""
        text = (
            f"spec_overhead_scale={self.scale:g} host_factor={self.factor:.4f} "
            f"effective_scale={self.scale * self.factor:.4f}"
        )
        if self.jitter is not None:
            text += f" start_jitter={self.jitter.sigma:g} start_seed={self.seed}"
        w = self.window
        text += (
            " slow_window=none"
            if w is None
            else f" slow_window={w.start_s:.1f}-{w.end_s:.1f}s x{w.factor:g}"
        )
        return text + (" spec_regime=off" if self.regime is None else f" {self.regime.describe()}")


def draw_host(
    scale: float = 1.0,
    jitter: JitterParams | None = None,
    seed: int = 0,
    regime: RegimeParams | None = None,
    regime_seed: int | None = None,
) -> HostDraw:
    """This start's host: ``scale`` alone without jitter, else one seeded draw; with
    ``regime``, its windows seeded by ``regime_seed`` (None: the start seed ``seed``, so
    replicates that pass ``--start-seed N`` differ in their regime too)."""
    if not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"--spec-overhead-scale: {scale} must be a number > 0")
    timed = None
    if regime is not None:
        timed = TimeRegime(regime, seed if regime_seed is None else regime_seed)
    if jitter is None:
        return HostDraw(scale=scale, regime=timed)
    jitter.validate()
    rng = random.Random(f"specload-sim-start:{seed}")
    z = rng.gauss(0.0, 1.0)
    u_window = rng.random()
    u_start = rng.random()
    window = None
    if u_window < jitter.window_prob:
        start = u_start * jitter.window_latest_s
        window = SlowWindow(start, start + jitter.window_s, jitter.window_factor)
    return HostDraw(
        scale=scale,
        factor=math.exp(jitter.sigma * z),
        window=window,
        jitter=jitter,
        seed=seed,
        regime=timed,
    )


def parse_jitter(value: str | None, base: JitterParams) -> JitterParams | None:
    """``--start-jitter``: None (off), ``calibrated`` (``base``, the profile's) or a sigma."""
    if value is None:
        return None
    if value.strip().lower() == CALIBRATED:
        out = base
    else:
        try:
            sigma = float(value)
        except ValueError:
            raise ValueError(
                f"--start-jitter {value}: expected 'calibrated' or a sigma (a number >= 0)"
            ) from None
        out = dataclasses.replace(base, sigma=sigma)
    try:
        out.validate()
    except ValueError as exc:
        raise ValueError(f"--start-jitter: {exc}") from None
    return out

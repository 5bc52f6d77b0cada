"""Length distributions for synthetic prompts and outputs: a fixed number, or a seeded draw.

Real traffic does not have one prompt length and one output length, and the crossover moves
with both (longer contexts make the decode step memory-bound for longer). A scenario's
``prompts.synthetic.input_tokens`` and ``max_tokens`` accept a number or::

    {dist: fixed|uniform|normal|lognormal, mean, stddev | sigma, min, max}

- ``fixed``: ``mean`` (the same as giving the number);
- ``uniform``: integers in ``[min, max]``;
- ``normal``: ``mean`` and ``stddev``, clipped to ``[min, max]``;
- ``lognormal``: arithmetic ``mean`` and log-space ``sigma`` (so ``mean`` is the mean of the
  draws, before clipping), clipped to ``[min, max]``.

``min`` defaults to 1 and ``max`` to ``mean`` times 8 (normal, lognormal). Each prompt ``i``
draws from its own seeded stream (``derive_seed(seed, what, i)``): the same scenario gives the
same lengths in every run and process, and the draws do not depend on how many prompts there
are. ``mean`` is what ``int`` fields elsewhere see (``Scenario.max_tokens``, the report).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from specload.core.pacer import derive_seed
from specload.scenario.keys import unknown_key

__all__ = ["DISTS", "LengthDist", "parse_length"]

DISTS = ("fixed", "uniform", "normal", "lognormal")
_KEYS = {"dist", "mean", "stddev", "sigma", "min", "max"}


@dataclass(frozen=True, slots=True)
class LengthDist:
    """A token-length distribution (see module doc); ``draw(seed, what, i)`` is pure."""

    dist: str
    mean: float
    stddev: float = 0.0
    sigma: float = 0.0
    min: int = 1
    max: int = 1

    def draw(self, seed: int, what: str, i: int) -> int:
        """Prompt ``i``'s length for ``what`` (``input``, ``output``)."""
        if self.dist == "fixed":
            return int(round(self.mean))
        rng = random.Random(derive_seed(seed, "length", what, i))
        if self.dist == "uniform":
            return rng.randint(self.min, self.max)
        if self.dist == "normal":
            v = rng.gauss(self.mean, self.stddev)
        else:
            mu = math.log(self.mean) - self.sigma**2 / 2
            v = rng.lognormvariate(mu, self.sigma)
        return int(min(max(round(v), self.min), self.max))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _num(fail: Callable[[str, str], Exception], v: Any, path: str, lo: float) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < lo:
        raise fail(path, f"got {v!r} (expected a number >= {lo:g})")
    return float(v)


def parse_length(
    value: Any, path: str, fail: Callable[[str, str], Exception]
) -> tuple[int, LengthDist | None]:
    """``(mean as int, distribution or None)`` from a number or a ``{dist: ...}`` mapping.

    ``fail(path, problem)`` builds the error (the scenario reader's, so it names the file)."""
    if not isinstance(value, dict):
        n = _num(fail, value, path, 1)
        if n != int(n):
            raise fail(path, f"got {value!r} (expected a whole number of tokens >= 1)")
        return int(n), None
    unknown = sorted(set(map(str, value)) - _KEYS)
    if unknown:
        raise fail(f"{path}.{unknown[0]}", unknown_key(unknown[0], _KEYS))
    dist = value.get("dist")
    if dist not in DISTS:
        raise fail(f"{path}.dist", f"got {dist!r} (expected one of {', '.join(DISTS)})")
    lo = int(_num(fail, value.get("min", 1), f"{path}.min", 1))
    if dist == "uniform":
        if "max" not in value:
            raise fail(f"{path}.max", "missing (expected the largest length, with min)")
        hi = int(_num(fail, value["max"], f"{path}.max", lo))
        return (lo + hi) // 2, LengthDist(dist, (lo + hi) / 2, min=lo, max=hi)
    if "mean" not in value:
        raise fail(f"{path}.mean", "missing (expected the mean length in tokens)")
    mean = _num(fail, value["mean"], f"{path}.mean", 1)
    hi = int(_num(fail, value.get("max", max(mean * 8, lo)), f"{path}.max", lo))
    if dist == "fixed":
        return int(round(mean)), LengthDist(dist, mean, min=lo, max=hi)
    spread = "stddev" if dist == "normal" else "sigma"
    if spread not in value:
        raise fail(f"{path}.{spread}", f"missing (expected the {dist} {spread}, a number > 0)")
    s = _num(fail, value[spread], f"{path}.{spread}", 0)
    d = LengthDist(dist, mean, min=lo, max=hi, **{spread: s})
    return int(round(mean)), d

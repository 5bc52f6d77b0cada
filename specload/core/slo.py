"""Latency SLOs: a percentile of a request latency and its limit (``tpot_p95=25ms``).

Given on ``specload compare --slo`` (repeatable) or in a scenario's ``slo:`` mapping, so the
runs carry the objective they were made for. Limits need a unit (``ms`` or ``s``): a bare
``25`` is refused rather than guessed. ``analysis/decisions/capacity.py`` finds each condition's
capacity within the SLOs and its goodput.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specload.core.errors import ConfigError

__all__ = [
    "EXPECTED_DURATION",
    "EXPECTED_METRIC",
    "Slo",
    "duration_s",
    "parse_slo",
    "slo_metrics",
    "slos_from_scenario",
]

_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ms|s)\s*$")


def slo_metrics() -> list[str]:
    """Metric names an SLO may bound: ``ttft_p95``, ``tpot_p50``, ``e2e_p99``, ..."""
    return [f"{fam}_{tag}" for fam in ("ttft", "tpot", "e2e") for tag in ("p50", "p95", "p99")]


@dataclass(frozen=True, slots=True)
class Slo:
    """One latency objective: ``metric`` (e.g. ``tpot_p95``) at most ``limit_s`` seconds."""

    metric: str
    limit_s: float

    @property
    def family(self) -> str:
        """``ttft``, ``tpot`` or ``e2e``: the per-request value goodput checks."""
        return self.metric.split("_", 1)[0]

    def text(self) -> str:
        """``tpot_p95 ≤ 25 ms``."""
        ms = self.limit_s * 1000
        limit = f"{ms:g} ms" if ms < 1000 else f"{self.limit_s:g} s"
        return f"{self.metric} ≤ {limit}"

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "limit_s": self.limit_s}


def duration_s(value: Any) -> float | None:
    """``"500ms"`` → 0.5, ``"8s"`` → 8.0; None when not a positive duration with a unit."""
    if not isinstance(value, str):
        return None
    m = _DURATION.match(value)
    if m is None or float(m.group(1)) <= 0:
        return None
    return float(m.group(1)) / (1000.0 if m.group(2) == "ms" else 1.0)


#: What a limit must look like, for error messages.
EXPECTED_DURATION = "a positive duration with a unit, such as 500ms or 8s"
EXPECTED_METRIC = f"one of {', '.join(slo_metrics())}"


def parse_slo(spec: str) -> Slo:
    """``--slo tpot_p95=25ms`` → Slo; ConfigError (exit 2) naming what was expected."""
    name, sep, value = spec.partition("=")
    name = name.strip()
    if not sep or name not in slo_metrics():
        raise ConfigError(
            f"--slo {spec!r}: expected METRIC=DURATION with METRIC {EXPECTED_METRIC} "
            "(e.g. tpot_p95=25ms)"
        )
    limit = duration_s(value.strip())
    if limit is None:
        raise ConfigError(f"--slo {spec!r}: expected {EXPECTED_DURATION} after '='")
    return Slo(name, limit)


def slos_from_scenario(slo: Mapping[str, Any] | None) -> list[Slo]:
    """A scenario's ``slo:`` mapping (``{tpot_p95: 25ms}``, validated when it was loaded)."""
    out = []
    for name, value in (slo or {}).items():
        limit = duration_s(value)
        if str(name) in slo_metrics() and limit is not None:
            out.append(Slo(str(name), limit))
    return out

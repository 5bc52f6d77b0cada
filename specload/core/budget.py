"""The error budget: how many failed requests a run may have before it measured nothing useful.

One definition for the run side (``specload run``, sweep and the Locust plugin mark a run
``degraded`` past it) and for compare (steps past it are left out of every conclusion).
Latencies of a step where more than 1 request in 20 failed come from the requests that
survived: a biased sample, not a measurement.
"""

from __future__ import annotations

from typing import Any

from specload.core.errors import ConfigError

__all__ = ["BUDGET_HELP", "DEFAULT_MAX_ERROR_RATE", "max_error_rate"]

#: ``--max-error-rate`` unless given: more than 1 request in 20 failing is not a measurement.
DEFAULT_MAX_ERROR_RATE = 0.05

#: What the budget is, at the head of every command's ``--max-error-rate`` help; each command
#: adds its default and what it does with a step past the budget (run: ends degraded;
#: compare: leaves the step out of its conclusions).
BUDGET_HELP = (
    "error budget, a fraction of requests: a step whose error rate passes it measured the "
    "requests that survived, not the load"
)


def max_error_rate(value: Any) -> float:
    """``--max-error-rate`` checked: a fraction from 0 to 1 (``ConfigError`` otherwise)."""
    try:
        rate = float(value)
    except (TypeError, ValueError):
        raise ConfigError(
            f"{value!r} is not a number (expected a fraction, e.g. 0.05)", path="--max-error-rate"
        ) from None
    if not 0.0 <= rate <= 1.0:
        raise ConfigError(
            f"{value!r} is not a fraction from 0 to 1 (e.g. 0.05 for 5 %)", path="--max-error-rate"
        )
    return rate

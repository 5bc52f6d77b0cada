"""The minimum gain: how large a change must be to count, for the help/hurt rule and its users.

A step helps only when the change is at least this large and its CI says so; within it, the
change is no practical difference (``analysis.statistics.effect`` applies the rule). Here, on
the ground floor, so that every command's ``--min-gain`` shows the same default without
importing the analysis (and numpy) to print its help.
"""

from __future__ import annotations

import math

from specload.core.errors import ConfigError

__all__ = ["DEFAULT_MIN_GAIN", "check_min_gain"]

#: ``--min-gain`` unless given: a change smaller than 5 % is no practical difference.
DEFAULT_MIN_GAIN = 0.05


def check_min_gain(value: float) -> float:
    """``--min-gain`` checked: a fraction in [0, 1) (``ConfigError`` otherwise)."""
    if math.isnan(value) or not 0 <= value < 1:
        raise ConfigError(f"--min-gain {value}: expected a fraction in [0, 1), e.g. 0.05")
    return value

"""The interval of a share (k of n seeds covered, decided, ...), for the benchmarks' tables."""

from __future__ import annotations

import math


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The 95 % Wilson score interval of a share ``k / n`` (NaN where ``n`` is 0): unlike
    ``k / n ± z·se`` it stays inside 0..1 and does not collapse at 0 or n of n."""
    if n == 0:
        return math.nan, math.nan
    p, d = k / n, 1 + z * z / n
    mid, half = (p + z * z / (2 * n)) / d, z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, mid - half), min(1.0, mid + half)

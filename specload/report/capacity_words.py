"""Capacity under the SLO in words: a capacity as a load or beyond the tested range, its
change against the baseline's, and the capacity tables' "vs baseline" cell.

``analysis/decisions/capacity.py`` finds each condition's capacity and its change and returns
them as facts (``Capacity``, ``CapacityChange``); they are worded here, for the capacity
tables (overall and per class) and the verdict's capacity sentence.
"""

from __future__ import annotations

from specload.analysis.decisions.capacity import Capacity, CapacityChange, times100
from specload.report.crossover_words import boundary_qps_text
from specload.report.wording import pct_ci_text

__all__ = ["change_text", "qps_text", "versus_text"]


def qps_text(cap: Capacity) -> str:
    """``17.4``, or ``>24`` / ``<4`` beyond the tested range."""
    return boundary_qps_text(cap.boundary, cap.tested_range)


def change_text(change: CapacityChange, digits: int = 0) -> str:
    """ "-21 % (-27…-14)", "-21 % (<-48…-14)"; "—" without a value."""
    if change.value is None:
        return "—"
    ci = pct_ci_text(times100(change.ci), change.ci_beyond, digits)
    return f"{change.value * 100:+.{digits}f} %" + (f" ({ci})" if ci else "")


def versus_text(cond: Capacity, base: Capacity, change: CapacityChange | None) -> str:
    """A condition's capacity against the baseline's, as the capacity table says it: the
    change with its CI, or, where one capacity lies beyond the tested range so there is no
    ratio, what the steps do show ("baseline >12 req/s: not reached"), never a bare dash."""
    if cond.condition == base.condition:
        return "—"
    if change is not None and change.value is not None:
        return change_text(change)
    for who, cap in (("baseline", base), (cond.condition, cond)):
        if cap.qps is None:
            return f"{who} {qps_text(cap)} req/s: {_beyond_words(cap)}"
    return "—"


def _beyond_words(cap: Capacity) -> str:
    """Why a capacity has no figure: the SLOs held at every tested step, or at none."""
    above = cap.boundary.qps is not None and cap.boundary.qps > 0
    return "not reached" if above else "missed at the lowest step"

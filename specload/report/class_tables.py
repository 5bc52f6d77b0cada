"""Tables of the per-class answer beyond ``tables.class_table``: capacity within the SLOs per
class of request (a drafting pool for one class carries a load of its own, which the
whole traffic's capacity does not tell)."""

from __future__ import annotations

from specload.analysis.decisions.capacity import capacity_change
from specload.report.capacity_words import qps_text, versus_text
from specload.report.crossover_words import boundary_ci_text
from specload.report.model import Report
from specload.report.tables import DASH, Table

__all__ = ["class_capacity_table"]


def class_capacity_table(report: Report) -> Table | None:
    """Per class and condition: capacity within the SLOs, its CI, what limits it and the
    change against the baseline's capacity for the same class; None without SLOs or classes."""
    c = report.comparison
    rows = []
    for a in c.classes:
        base = a.capacity.get(c.baseline)
        for label, cap in a.capacity.items():
            ci = boundary_ci_text(cap.boundary, cap.tested_range) if cap.qps is not None else DASH
            versus = DASH if base is None else versus_text(cap, base, capacity_change(cap, base))
            rows.append([a.name, label, qps_text(cap), ci, cap.limiting_slo or DASH, versus])
    if not rows:
        return None
    return Table(
        "Capacity within the SLO per class (" + ", ".join(s.text() for s in c.slos) + ")",
        ["class", "condition", "capacity req/s", "95 % CI", "limited by", "vs baseline"],
        rows,
        note="Each class's records on their own against the same SLOs: the load of the whole "
        "traffic at which that class's requests still meet every SLO (a pool serving only that "
        "class carries a different load); vs baseline: the same class in the baseline.",
    )

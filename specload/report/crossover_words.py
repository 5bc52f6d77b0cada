"""The crossover in words: its boundaries, steps, where the server starts disagree and where
a step's effect holds, for the verdict, the tables, the advice and report.json.

``analysis/decisions/crossover.py`` finds the status and the boundaries and returns them as
facts (``Crossover``, ``Boundary``); every phrase about them is written here, as
``verdict_words`` writes the verdict from them.
"""

from __future__ import annotations

from specload.analysis.decisions.crossover import BETWEEN, CROSSES, MIXED, Boundary, Crossover
from specload.analysis.statistics.effect import HELPS, INCOMPLETE, NA
from specload.analysis.statistics.ratios import RatioRow
from specload.report.rule_words import effect_text
from specload.report.wording import load_ci_text, load_with_ci, step_label

__all__ = [
    "boundary_ci_text",
    "boundary_qps_text",
    "ci_text",
    "crossover_dict",
    "fmt_qps",
    "mixed_note",
    "split_text",
    "step_text",
    "steps_text",
    "where_effect",
]


def fmt_qps(v: float) -> str:
    """A load as people read it: 17.6, 16.0, 0.85 (``wording.load_decimals``)."""
    return load_with_ci(v, None, None)[0]


def boundary_qps_text(b: Boundary, tested_range: tuple[float, float]) -> str:
    """ "17.4", or ">24" / "<4" for a boundary beyond the tested range."""
    if b.inside:
        return fmt_qps(b.qps)
    return f">{tested_range[1]:g}" if b.qps > 0 else f"<{tested_range[0]:g}"


def boundary_ci_text(b: Boundary, tested_range: tuple[float, float]) -> str:
    """ "8–16", "<2–4", ">32–>32" (``wording.load_ci_text``)."""
    return load_ci_text(b.ci, b.ci_beyond, tested_range)


def ci_text(x: Crossover) -> str:
    """The CI of the crossover's own boundary (the stop where it stops helping, else the
    start); empty without one."""
    b = x.stop if x.status in (CROSSES, BETWEEN) else x.start
    return boundary_ci_text(b, x.tested_range) if b is not None else ""


def step_text(x: Crossover, qps: float) -> str:
    """A step named with its achieved load beside the nominal one (``step_label``)."""
    return step_label(qps, x.achieved.get(qps))


def steps_text(x: Crossover, qps: list[float]) -> str:
    """Steps named with their achieved loads: "4, 16 (17.1) req/s"."""
    return ", ".join(step_text(x, q) for q in qps) + " req/s"


def split_text(x: Crossover) -> str:
    """Where and how the starts disagree: "at 1 req/s (helps in r2; hurts in r1) and 24
    req/s (helps in r1; hurts in r2)"."""
    parts = []
    for q in x.split_qps:
        runs: dict[str, list[str]] = {}
        for s in x.starts:
            if q in s.effects:
                runs.setdefault(effect_text(s.effects[q]), []).append(s.run)
        how = "; ".join(f"{e} in {', '.join(rs)}" for e, rs in runs.items())
        parts.append(f"{step_text(x, q)} req/s ({how})")
    return "at " + (" and ".join(parts) if len(parts) < 3 else ", ".join(parts))


def mixed_note(x: Crossover) -> str:
    """Helping steps with non-helping steps between them: where, and that no boundary is
    claimed; empty for every other status."""
    if x.status != MIXED:
        return ""
    helps = [e == HELPS for e in x.effects]
    on = ", ".join(f"{v:g}" for v, h in zip(x.steps, helps, strict=False) if h)
    off = ", ".join(f"{v:g}" for v, h in zip(x.steps, helps, strict=False) if not h)
    return f"helps at {on} req/s but not at {off} req/s: no single boundary"


def crossover_dict(x: Crossover) -> dict[str, object]:
    """report.json's crossover: the facts (``Crossover.to_dict``) and its ``note``."""
    return {**x.to_dict(), "note": mixed_note(x)}


def where_effect(rows: list[RatioRow], effect: str) -> str | None:
    """ "at every tested load" / "from 20 req/s" / "at 4, 8 req/s" where the step's effect is
    ``effect``; None if nowhere. Incomplete steps and steps without data are left out."""
    used = [r for r in rows if r.effect not in (INCOMPLETE, NA)]
    hits = [r.effect == effect for r in used]
    if not used or not any(hits):
        return None
    if all(hits):
        return "at every tested load"
    first = hits.index(True)
    if all(hits[first:]):
        return f"from {_rows_text(used[first : first + 1])}"
    return "at " + _rows_text([r for r, h in zip(used, hits, strict=False) if h])


def _rows_text(rows: list[RatioRow]) -> str:
    """The rows' steps, each with its achieved load beside the nominal one ("16 (17.1)")."""
    return ", ".join(step_label(r.target_qps, r.achieved_qps) for r in rows) + " req/s"

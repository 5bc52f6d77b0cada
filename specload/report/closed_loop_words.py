"""Closed-loop steps in words: the warning where a level's users ran in lockstep, and the
comparison's warnings with those added, for the findings and report.json's ``warnings``.

``analysis/decisions/closed_loop.py`` measures each level's lockstep share and says which
conditions ran in lockstep (``ClosedLoop.in_lockstep``); the sentence is written here.
"""

from __future__ import annotations

from specload.analysis.comparison import Comparison
from specload.analysis.decisions.closed_loop import LOCKSTEP_S, ClosedLoop
from specload.analysis.wording import step_name

__all__ = ["comparison_warnings", "lockstep_warnings"]


def lockstep_warnings(level: ClosedLoop) -> list[str]:
    """One sentence per condition whose users ran in lockstep at this level."""
    return [
        f"{label} at {step_name(0.0, level.concurrency)}: {share:.0%} of sends came within "
        f"{LOCKSTEP_S * 1000:.0f} ms of another (users in lockstep): its TTFT there "
        f"measures bursts of {level.concurrency} simultaneous prefills"
        for label, share in level.in_lockstep.items()
    ]


def comparison_warnings(c: Comparison) -> list[str]:
    """The comparison's warnings (the runs', the telemetry's, ...), then each closed-loop
    level's lockstep warnings."""
    return [*c.warnings, *(w for level in c.closed_loop for w in lockstep_warnings(level))]

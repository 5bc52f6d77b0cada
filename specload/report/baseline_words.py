"""Why a run cannot be compared live with its baseline run, in words.

Before any traffic (headless: bad input, ``options/run.py``) and at the start of the web
UI's live comparison (a banner, ``locust/live_compare.py``), the baseline run
(``recorder/baseline_run.py``) is checked against this run: another label (``compare`` pools
runs of one label as server starts), a finished run, the same scenario (the keys that differ
are ``analysis.inputs.comparable.scenario_differences``'s facts). The answer is a sentence
a person reads, so it is written here, with the report's other words, below both of its
readers.
"""

from __future__ import annotations

from typing import Any

from specload.analysis.inputs.comparable import scenario_differences
from specload.recorder.baseline_run import Baseline

__all__ = ["baseline_problem"]


def baseline_problem(baseline: Baseline, label: str, scenario: dict[str, Any]) -> str | None:
    """Why this run cannot be compared live with ``baseline``; None when it can."""
    if baseline.label == label:
        return (
            f"the baseline run {baseline.path.name} has this run's label {label!r}: give this "
            "run another label (compare pools runs of one label as server starts)"
        )
    if baseline.status not in ("completed", "degraded"):
        return f"the baseline run {baseline.path.name} is {baseline.status!r}, not completed"
    diff = scenario_differences(baseline.scenario, scenario)
    if diff:
        keys = ", ".join(diff[:4]) + (" ..." if len(diff) > 4 else "")
        return f"the baseline run {baseline.path.name} ran another scenario (differs in {keys})"
    return None

"""Step windows are back to back from the start time, with warm-up first."""

from __future__ import annotations

from specload.locust.step_plan import timed_steps
from specload.scenario import StepPlan


def test_windows_are_contiguous_with_warmup_and_prompt_offsets() -> None:
    plans = [
        StepPlan(0, 0, 2.0, 10.0, 5.0),
        StepPlan(1, 0, 4.0, 10.0, 5.0),
        StepPlan(2, 1, 2.0, 10.0, 5.0),
    ]
    steps = timed_steps(plans, 1000.0)
    assert [(s.start, s.warmup_end, s.end) for s in steps] == [
        (1000.0, 1005.0, 1015.0),
        (1015.0, 1020.0, 1030.0),
        (1030.0, 1035.0, 1045.0),
    ]
    assert [s.prompt_offset for s in steps] == [0, 30, 90]
    assert [(s.index, s.repeat, s.target_qps) for s in steps] == [
        (0, 0, 2.0),
        (1, 0, 4.0),
        (2, 1, 2.0),
    ]

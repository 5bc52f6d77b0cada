"""The web UI's banners and clock (``specload/locust/live_view.py``), from a session snapshot."""

from __future__ import annotations

from typing import Any

from specload.locust.live_view import _banners, _clock
from specload.locust.session import SessionSnapshot


def _snap(**kw: Any) -> SessionSnapshot:
    base: dict[str, Any] = dict(
        run_id="r", label="spec", status="running", finished=False, run_dir="runs/spec",
        host="http://h", model="m", plans=((0, 0, 2.0), (1, 0, 4.0)), live={}, sent=0,
        recorded=0, workers={}, lost_workers=(), notes=(),
    )  # fmt: skip
    return SessionSnapshot(**{**base, **kw})


def test_banners_say_what_must_not_be_missed_once_each() -> None:
    lost = {"worker": "w1", "at": 1_800_000_000.0, "sent": 3, "recorded": 3}
    snap = _snap(
        lost_workers=(lost,),
        # the session leaves lost workers out of these (they have their own banner)
        over_budget=("errors 9/80 (11.2 %) at 4 req/s exceed --max-error-rate 5 %",),
        compare={"problem": "the baseline run b ran another scenario (differs in max_tokens)"},
        report={"problem": "compare took over 300 s"},
    )
    got = [(b["kind"], b["text"]) for b in _banners(snap, "--scenario: no scenario")]
    assert got == [
        ("error", "the run could not start: --scenario: no scenario"),
        ("error", "worker w1 lost at 08:00:00 UTC: its share went unsent until the re-split; "
                  "the run will end degraded"),
        ("error", "error budget passed: errors 9/80 (11.2 %) at 4 req/s exceed "
                  "--max-error-rate 5 %"),
        ("warning", "no live comparison: the baseline run b ran another scenario "
                    "(differs in max_tokens)"),
        ("warning", "report: compare took over 300 s"),
    ]  # fmt: skip
    assert _banners(_snap(), None) == []


def test_the_clock_gives_step_k_and_the_time_left() -> None:
    snap = _snap(timeline=((0, 100.0, 101.0, 110.0), (1, 110.0, 111.0, 120.0)))
    assert _clock(snap, 112.5) == {
        "step_now": 1,
        "time_left_step_s": 7.5,
        "time_left_run_s": 7.5,
    }
    assert _clock(snap, 99.0)["step_now"] is None and _clock(snap, 99.0)["time_left_run_s"] == 21
    assert _clock(_snap(timeline=snap.timeline, finished=True), 105.0)["time_left_run_s"] is None

"""Live per-step figures: percentiles from records as they arrive, in any order."""

from __future__ import annotations

import random

import numpy as np
import pytest

from specload.locust.live import LiveStats


def test_snapshot_percentiles_match_numpy_for_records_in_any_order() -> None:
    rng = random.Random(7)
    tpots = [rng.lognormvariate(-4.5, 0.4) for _ in range(501)]
    live = LiveStats()
    live.begin_step(0, 0, 8.0, 100.0, 101.0, 121.0)
    for i, tpot in enumerate(tpots):
        live.add(
            {
                "step": 0,
                "ok": True,
                "warmup": False,
                "tpot_s": tpot,
                "ttft_s": 0.05 + i * 1e-4,
                "e2e_s": 1.0,
                "content_chunks": 4,
                "output_tokens": 4 + i % 3,
            }
        )
        if i in (10, 250):  # a snapshot in between must not disturb what follows
            live.steps[0].summary()
    tally = live.steps[0]
    assert tally.tpot_s == sorted(tpots)
    summary = tally.summary()
    assert summary["tpot_s"]["p50"] == pytest.approx(np.percentile(tpots, 50))
    assert summary["tpot_s"]["p95"] == pytest.approx(np.percentile(tpots, 95))
    assert summary["tpot_s"]["n"] == 501
    assert summary["tokens_per_chunk"] == pytest.approx(1.25)


def test_a_step_settles_when_every_request_sent_has_its_record() -> None:
    """The live comparison takes a step only when its figures are final: ended, the counts
    in, and a record for each measured arrival queued (or the request timeout passed)."""
    live = LiveStats()
    live.begin_step(0, 0, 2.0, start=100.0, warmup_end=101.0, end=105.0)
    live.begin_step(1, 0, 4.0, start=105.0, warmup_end=106.0, end=110.0)
    live.set_due("w1", {0: 3, 1: 2})
    for _ in range(2):
        live.add({"step": 0, "ok": True, "warmup": False, "ttft_s": 0.1, "tpot_s": 0.01})
    assert live.settled(now=104.0, grace_s=30) == set()  # still running
    assert live.settled(now=107.0, grace_s=30) == set()  # one request of step 0 in flight
    live.add({"step": 0, "ok": False, "warmup": False})  # an error is a record too
    assert live.settled(now=105.5, grace_s=30) == set()  # the last sent count may be late
    assert live.settled(now=107.0, grace_s=30) == {0}
    assert live.settled(now=141.0, grace_s=30) == {0, 1}  # step 1's records never came


def test_a_step_under_queueing_or_with_later_turns_settles_on_one_basis() -> None:
    """Settled counts records and arrivals on the same basis (step, measured, any turn): an
    arrival of the window still queued after the end keeps its step open although every
    request *sent* in the window is back, and later turns do not stand in for it."""
    live = LiveStats()
    live.begin_step(0, 0, 2.0, start=100.0, warmup_end=101.0, end=105.0)
    live.set_sent_in_window("w1", {0: 2})  # 2 conversation starts sent inside the window
    live.set_due("w1", {0: 5})  # 3 starts + 2 later turns queued for the step's window
    for turn in (1, 1, 2):  # both sent starts and one later turn are back
        live.add({"step": 0, "ok": True, "warmup": False, "turn": turn, "tpot_s": 0.01})
    assert live.steps[0].measured >= live.steps[0].sent  # the old test: settled, too early
    assert live.settled(now=107.0, grace_s=30) == set()
    for turn in (1, 2):  # the queued start, sent after the end, and its step's last turn
        live.add({"step": 0, "ok": True, "warmup": False, "turn": turn, "tpot_s": 0.05})
    assert live.settled(now=107.0, grace_s=30) == {0}


@pytest.mark.parametrize(("late", "behind"), [(5, False), (6, True)])
def test_the_live_line_says_fell_behind_by_the_one_rule(late: int, behind: bool) -> None:
    """The progress line and compare judge lateness alike (``core.records.fell_behind``):
    5 of 100 requests past ``LATE_S`` is not behind, 6 is. The others sent just in time and
    the late ones very late: an interpolated p95 passes ``LATE_S`` already with 5."""
    from specload.core.records import LATE_S

    live = LiveStats()
    live.begin_step(0, 0, 8.0, 100.0, 101.0, 121.0)
    for i in range(100):
        delay = 2.0 if i < late else LATE_S * 0.9
        live.add({"step": 0, "ok": True, "warmup": False, "queue_delay_s": delay})
    assert live.steps[0].late_share == late / 100
    line = live.progress_line(0, 1)
    assert ("fell behind" in line) is behind, line
    if behind:
        assert f"{late} % sent over 50 ms late" in line, line

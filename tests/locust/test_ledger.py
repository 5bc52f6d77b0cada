"""The master's ledger of sent requests and written records (``locust/ledger.py``)."""

from __future__ import annotations

from typing import Any

from specload.locust.ledger import WorkerLedger
from specload.locust.messages import FinalCounts, WorkerReady


def _ledger() -> WorkerLedger:
    led = WorkerLedger()
    for w in ("w1", "w2"):
        led.ready[w] = WorkerReady("run", w)
    led.sent.update({"w1": 10, "w2": 7})
    led.received.update({"w1": 10, "w2": 4})
    return led


def test_counts_name_the_requests_sent_without_a_record() -> None:
    led = _ledger()
    led.late_records = 2
    assert led.unrecorded() == {"w2": 3}
    counts = led.counts()
    assert (counts["sent"], counts["recorded"], counts["unrecorded"], counts["late"]) == (
        17,
        14,
        3,
        2,
    )
    assert counts["by_worker"]["w2"] == {"sent": 7, "recorded": 4}


def test_a_worker_lost_once_keeps_its_first_figures_until_the_end() -> None:
    led = _ledger()
    lost: list[dict[str, Any]] = []
    led.mark_lost(lost, {"w2"}, now=100.0)
    led.received["w2"] = 6  # a batch it had sent before it vanished
    led.mark_lost(lost, {"w2"}, now=101.0)  # noticed again: listed once
    assert lost == [{"worker": "w2", "at": 100.0, "sent": 7, "recorded": 4}]
    notes: list[str] = []
    led.settle_lost(lost, last_end=200.0, notes=notes)
    assert lost == [{"worker": "w2", "at": 100.0, "sent": 7, "recorded": 6}] and notes == []


def test_a_worker_missing_only_after_the_last_step_that_reports_back_was_not_lost() -> None:
    led = _ledger()
    lost: list[dict[str, Any]] = []
    led.mark_lost(lost, {"w2"}, now=250.0)
    led.finals["w2"] = FinalCounts("run", "w2", 7, 7)
    notes: list[str] = []
    led.settle_lost(lost, last_end=200.0, notes=notes)
    assert lost == [] and len(notes) == 1 and "came back with its final counts" in notes[0]

"""One process's pacing (a re-split share replaces the old one at its ``begin_at``) and its
record outbox (no record is lost when a send to the master fails)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import gevent
import pytest

from specload.locust.load_process import LoadProcess, RecordOutbox
from specload.locust.messages import RunStart, StepChange


def _process() -> LoadProcess:
    proc = LoadProcess("w1", lambda _type, _data: None)
    proc.run = RunStart("run-1", {}, None, "m", "http://127.0.0.1:1")
    proc.scenario = SimpleNamespace(arrival="constant", seed=1)
    proc.requests = [object()] * 10
    proc.outbox.run_id = "run-1"
    proc._ready.set()
    return proc


def _step(t0: float, begin_at: float, epoch: int, slot: int, slots: int) -> StepChange:
    return StepChange("run-1", 0, 0, 40.0, t0, t0, t0 + 2.0, begin_at, epoch, slot, slots)


def _drain(proc: LoadProcess) -> list[float]:
    out = []
    while not proc.queue.empty():
        out.append(proc.queue.get_nowait().scheduled_at)
    return out


def test_worker_left_out_of_a_resplit_stops_drawing_arrivals() -> None:
    proc = _process()
    t0 = time.time() + 0.05
    cut, back = t0 + 0.4, t0 + 1.2
    proc.on_step(_step(t0, t0, epoch=0, slot=0, slots=1))
    pacer = gevent.spawn(proc._pace)
    try:
        gevent.sleep(0.1)
        proc.on_step(_step(t0, cut, epoch=1, slot=0, slots=0))  # the master dropped us
        gevent.sleep(0.5)
        proc.on_step(_step(t0, back, epoch=2, slot=0, slots=1))  # ... and took us back
        gevent.sleep(back + 0.3 - time.time())
        arrivals = _drain(proc)
        alive = not pacer.dead
    finally:
        pacer.kill()
    assert alive, "the pacer died on the empty share"
    assert arrivals, "the first share drew no arrivals"
    assert not [a for a in arrivals if cut <= a < back], "arrivals drawn during the empty share"
    # 40 qps over the 0.4 s before the cut: about 16 arrivals.
    assert 12 <= len([a for a in arrivals if a < cut]) <= 17
    assert [a for a in arrivals if a >= back], "pacing did not resume with the next share"


def test_resplit_share_continues_at_the_new_rate() -> None:
    proc = _process()
    t0 = time.time() + 0.05
    cut = t0 + 0.4
    proc.on_step(_step(t0, t0, epoch=0, slot=0, slots=2))  # half of 40 qps
    pacer = gevent.spawn(proc._pace)
    try:
        gevent.sleep(0.1)
        proc.on_step(_step(t0, cut, epoch=1, slot=0, slots=1))  # the other worker left
        gevent.sleep(1.0)
        arrivals = _drain(proc)
    finally:
        pacer.kill()
    before = [a for a in arrivals if a < cut]
    after = [a for a in arrivals if cut <= a < cut + 0.5]
    assert len(after) > 1.5 * len(before), (len(before), len(after))


def test_a_failing_send_to_the_master_loses_no_record() -> None:
    """Sends 1 and 3 raise (the master unreachable for a moment): every record still arrives
    exactly once, in order, and the last batch carries the full sent count."""
    outcomes = [False, True, False, True]  # True: the send goes through
    delivered: list[int] = []
    counts: list[int] = []

    def send(_type: str, data: dict) -> None:
        if not outcomes.pop(0):
            raise ConnectionError("master unreachable")
        delivered.extend(r["id"] for r in data["records"])
        counts.append(data["sent"])

    outbox = RecordOutbox(send, "w1", max_records=3)
    outbox.run_id = "run-1"
    for i in range(7):  # a full buffer flushes: at 3 (fails), 4 (sent), 3 more (fails)
        outbox.count_sent(0)
        outbox.add({"id": i})
    assert delivered == [0, 1, 2, 3]
    outbox.flush()
    assert delivered == list(range(7)) and counts[-1] == 7 and not outcomes


def test_a_send_that_raises_from_flush_keeps_the_batch_for_the_next_flush() -> None:
    sends: list[list[int]] = []
    fail = [True]

    def send(_type: str, data: dict) -> None:
        outbox.add({"id": 99})  # a record that arrives while the send is under way
        if fail and fail.pop():
            raise ConnectionError("reset")
        sends.append([r["id"] for r in data["records"]])

    outbox = RecordOutbox(send, "w1")
    outbox.run_id = "run-1"
    outbox.add({"id": 1})
    with pytest.raises(ConnectionError):
        outbox.flush()
    outbox.flush()
    outbox.flush()
    # the failed batch went out whole with the next flush; each record added during a send
    # waited for the following one
    assert sends == [[1, 99], [99]]
    assert outbox._buf == [{"id": 99}]

"""One process's pacing (a re-split share replaces the old one at its ``begin_at``) and its
record outbox (no record is lost when a send to the master fails)."""

from __future__ import annotations

from types import SimpleNamespace

import gevent
import gevent.event
import pytest

from specload.locust.load_process import LoadProcess, PacingClock, RecordOutbox
from specload.locust.messages import RunStart, StepChange


class VirtualClock(PacingClock):
    """Pacing time that moves only when the test says: no real sleeps, no timing luck."""

    def __init__(self, t: float) -> None:
        self.t = t
        self._moved = gevent.event.Event()

    def now(self) -> float:
        return self.t

    def wait(self, event: gevent.event.Event, timeout: float) -> None:
        deadline = self.t + timeout
        while self.t < deadline and not event.is_set():
            self._moved.clear()
            gevent.wait([event, self._moved], count=1)

    def advance_to(self, t: float, step: float = 0.005) -> None:
        """Move time forward in small steps, letting the pacer catch up after each."""
        while self.t < t:
            self.t = min(t, self.t + step)
            self._moved.set()
            gevent.sleep(0)


T0 = 1_000.0


def _process(clock: VirtualClock) -> LoadProcess:
    proc = LoadProcess("w1", lambda _type, _data: None, clock=clock)
    proc.run = RunStart("run-1", {}, None, "m", "http://127.0.0.1:1")
    proc.scenario = SimpleNamespace(arrival="constant", seed=1, burstiness=1.0)
    proc.requests = [object()] * 10
    proc.outbox.run_id = "run-1"
    proc._ready.set()
    return proc


def _step(begin_at: float, epoch: int, slot: int, slots: int) -> StepChange:
    return StepChange("run-1", 0, 0, 40.0, T0, T0, T0 + 2.0, begin_at, epoch, slot, slots)


def _drain(proc: LoadProcess) -> list[float]:
    out = []
    while not proc.queue.empty():
        out.append(proc.queue.get_nowait().scheduled_at)
    return out


def _paced(
    proc: LoadProcess, clock: VirtualClock, script: list[tuple[float, StepChange]], until: float
) -> tuple[list[float], bool]:
    """Run the pacer, delivering each share at its (virtual) time; arrivals drawn, and
    whether the pacer is still alive."""
    pacer = gevent.spawn(proc._pace)
    try:
        for at, share in script:
            clock.advance_to(at)
            proc.on_step(share)
        clock.advance_to(until)
        return _drain(proc), not pacer.dead
    finally:
        pacer.kill()


def test_worker_left_out_of_a_resplit_stops_drawing_arrivals() -> None:
    clock = VirtualClock(T0 - 0.05)
    cut, back = T0 + 0.4, T0 + 1.2
    proc = _process(clock)
    arrivals, alive = _paced(
        proc,
        clock,
        [
            (T0 - 0.05, _step(T0, epoch=0, slot=0, slots=1)),
            (T0 + 0.1, _step(cut, epoch=1, slot=0, slots=0)),  # the master dropped us
            (T0 + 0.6, _step(back, epoch=2, slot=0, slots=1)),  # ... and took us back
        ],
        until=back + 0.3,
    )
    assert alive, "the pacer died on the empty share"
    assert not [a for a in arrivals if cut <= a < back], "arrivals drawn during the empty share"
    # 40 qps, constant arrivals, over the 0.4 s before the cut: exactly 16
    assert len([a for a in arrivals if a < cut]) == 16
    # and again from the new share on: 40 qps from back to back + 0.3 s, both ends included
    assert len([a for a in arrivals if a >= back]) == 13


def test_resplit_share_continues_at_the_new_rate() -> None:
    clock = VirtualClock(T0 - 0.05)
    cut = T0 + 0.4
    proc = _process(clock)
    arrivals, _ = _paced(
        proc,
        clock,
        [
            (T0 - 0.05, _step(T0, epoch=0, slot=0, slots=2)),  # half of 40 qps
            (T0 + 0.1, _step(cut, epoch=1, slot=0, slots=1)),  # the other worker left
        ],
        until=cut + 0.5,
    )
    before = [a for a in arrivals if a < cut]
    after = [a for a in arrivals if cut <= a < cut + 0.5]
    assert (len(before), len(after)) == (8, 20)  # 20 qps for 0.4 s, then 40 qps for 0.5 s


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


def test_due_counts_every_measured_arrival_queued_for_its_step() -> None:
    """``due`` (the settled basis) counts arrivals as they are queued, warm-up left out:
    each will end as one measured record of its step, sent or still waiting."""
    clock = VirtualClock(T0)
    proc = _process(clock)
    share = StepChange("run-1", 0, 0, 40.0, T0, T0 + 0.5, T0 + 2.0, T0, 0, 0, 1)
    drawn, _alive = _paced(proc, clock, [(T0, share)], T0 + 2.0)
    measured = [t for t in drawn if t >= T0 + 0.5]
    assert 0 < len(measured) < len(drawn)
    assert proc.outbox.due == {0: len(measured)}


def test_only_what_the_step_scheduled_counts_as_its_load() -> None:
    """A conversation's later turns are requests, not arrivals of the step: the window's
    load count (achieved QPS, live) takes its first turns only (``counts_as_load``)."""
    from specload.core.records import RequestRecord
    from specload.locust.load_process import Arrival

    proc = _process(VirtualClock(T0))
    proc.scenario.conversation = None

    def send(_req: object, **kw: object) -> RequestRecord:
        return RequestRecord(sent_at=T0 + 1, **kw)

    proc.client = SimpleNamespace(send=send)
    plan = StepChange("run-1", 0, 0, 4.0, T0, T0, 4e9, T0, 0, 0, 1)  # its window still open
    for turn in (1, 2, 3, 1):
        proc.execute(Arrival(plan, T0 + 1, 0, turn, "c1"))
    assert proc.outbox.sent == 4
    assert proc.outbox.sent_in_window == {0: 2}


def _block(begin_at: float, seed: int = 7, concurrency: int = 0) -> StepChange:
    """A block: 1 s warm-up, 2 s measured window, open-ended (its load goes on)."""
    return StepChange(
        "run-1", 3, 0, 0.0 if concurrency else 6.0, begin_at, begin_at + 1.0, begin_at + 3.0,
        begin_at, concurrency=concurrency, condition="spec", block=3, open_end=True, seed=seed,
        origin=begin_at,
    )  # fmt: skip


def test_a_block_runs_at_its_load_and_goes_on_unmeasured_until_the_next_begins() -> None:
    clock = VirtualClock(T0)
    proc = _process(clock)
    proc.scenario = SimpleNamespace(arrival="poisson", seed=1, burstiness=1.0)
    nxt = StepChange("run-1", 4, 0, 6.0, T0 + 5.0, T0 + 6.0, T0 + 8.0, T0 + 5.0)
    pacer = gevent.spawn(proc._pace)
    clock.advance_to(T0)
    proc.on_step(_block(T0))
    clock.advance_to(T0 + 0.5)
    proc.on_step(nxt)
    clock.advance_to(T0 + 4.99)
    assert not pacer.dead
    pacer.kill()
    queued = [proc.queue.get_nowait() for _ in range(proc.queue.qsize())]
    mine = [a for a in queued if a.plan.block == 3]
    measured = [a for a in mine if not a.warmup]
    assert len(measured) == 12  # exactly 6 req/s x 2 s (a Poisson draw given its count)
    assert all(T0 + 1.0 <= a.scheduled_at < T0 + 3.0 for a in measured)
    cooldown = [a for a in mine if a.cooldown]
    assert cooldown and all(a.warmup and a.scheduled_at >= T0 + 3.0 for a in cooldown)
    assert max(a.scheduled_at for a in mine) < T0 + 5.0  # stops where the next share begins
    assert proc.outbox.due[3] == 12 and proc.outbox.queued[3] == len(mine)


def test_blocks_of_one_unit_draw_alike_and_other_units_otherwise() -> None:
    def measured_offsets(seed: int, begin_at: float) -> list[float]:
        clock = VirtualClock(begin_at)
        proc = _process(clock)
        proc.scenario = SimpleNamespace(arrival="poisson", seed=1, burstiness=1.0)
        times, _ = _paced(proc, clock, [(begin_at, _block(begin_at, seed))], until=begin_at + 3)
        return [round(t - begin_at - 1.0, 6) for t in times if t >= begin_at + 1.0]

    a = measured_offsets(7, T0)
    assert a == measured_offsets(7, T0 + 100.0) != measured_offsets(8, T0)


def test_closed_loop_users_start_spread_over_the_warm_up() -> None:
    clock = VirtualClock(T0)
    proc = _process(clock)
    share = _block(T0, concurrency=4)
    times, _ = _paced(proc, clock, [(T0, share)], until=T0 + 2.0)
    assert times[:4] == pytest.approx([T0, T0 + 0.25, T0 + 0.5, T0 + 0.75], abs=0.01)


def test_a_closed_loop_block_that_continues_another_takes_over_its_requests_in_flight() -> None:
    """A block that continues the previous one (same server and load, ``continues``) starts
    no requests of its own while the previous block's are in flight: each one that returns
    is replaced by one of the new block, so the server keeps N in flight, never 2N."""
    clock = VirtualClock(T0)
    proc = _process(clock)
    first = _block(T0, concurrency=4)
    nxt = StepChange(
        "run-1", 4, 0, 0.0, T0 + 3.0, T0 + 3.0, T0 + 5.0, T0 + 3.0, concurrency=4,
        condition="spec", block=4, open_end=True, seed=8, origin=T0 + 3.0, continues=3,
    )  # fmt: skip
    pacer = gevent.spawn(proc._pace)
    try:
        clock.advance_to(T0)
        proc.on_step(first)
        clock.advance_to(T0 + 2.0)
        proc.on_step(nxt)
        clock.advance_to(T0 + 3.5)
        in_flight = [proc.queue.get_nowait() for _ in range(proc.queue.qsize())]
        assert [a.plan.index for a in in_flight] == [3, 3, 3, 3]  # none started for block 4
        for a in in_flight:  # each returns (no sender here: done as a sender would)
            proc._closed_live[a.plan.index] -= 1
            proc._refill(a.plan)
        refills = [proc.queue.get_nowait() for _ in range(proc.queue.qsize())]
        assert [a.plan.index for a in refills] == [4, 4, 4, 4]
        assert proc._closed_live[3] == 0 and proc._closed_live[4] == 4
    finally:
        pacer.kill()


def test_a_cancelled_request_of_a_block_is_recorded_with_its_condition() -> None:
    """Stopped mid-block, the request in flight ends as one ``cancelled`` record, and that
    record lands in its condition's run dir like every other (``split_session``)."""
    from specload.client import RequestCancelled
    from specload.core.records import ErrorInfo, RequestRecord
    from specload.locust.load_process import Arrival

    class Stopped:
        def send(self, _req: object, **kw: object) -> RequestRecord:
            raise RequestCancelled(
                RequestRecord(
                    request_id=str(kw["request_id"]),
                    worker="w1",
                    step=3,
                    target_qps=6.0,
                    warmup=False,
                    scheduled_at=T0 + 1.5,
                    sent_at=T0 + 1.5,
                    error=ErrorInfo("cancelled", "run stopped"),
                )  # fmt: skip
            )

    kept: list[dict] = []
    proc = _process(VirtualClock(T0))
    proc.scenario = SimpleNamespace(arrival="poisson", seed=1, burstiness=1.0, conversation=None)
    proc.requests = [SimpleNamespace(category=None, model="m")]
    proc.clients = {"spec": Stopped()}
    proc.outbox.add = kept.append  # type: ignore[method-assign]
    with pytest.raises(RequestCancelled):
        proc.execute(Arrival(_block(T0), T0 + 1.5, 0))
    assert [(r["condition"], r["block"], r["error"]["kind"]) for r in kept] == [
        ("spec", 3, "cancelled")
    ]


@pytest.mark.parametrize("end", ["_finish", "_abort"])
def test_locusts_statistics_go_out_after_the_last_records_and_before_the_final_counts(
    end: str,
) -> None:
    """The master ends the run when every worker's final counts are in; a request missing
    from the worker's last statistics report would be missing from ``--csv`` and ``--html``."""
    sent: list[str] = []
    proc = LoadProcess(
        "w1",
        lambda type_, _data: sent.append(type_),
        report_stats=lambda: sent.append("stats"),
    )
    proc.run = RunStart("run-1", {}, None, "m", "http://127.0.0.1:1")
    proc.outbox.run_id = "run-1"
    proc.outbox.count_sent(0)
    proc.outbox.add({"id": 1})
    getattr(proc, end)()
    assert sent == ["specload_records", "stats", "specload_final"]

"""A wall-clock step during a request (NTP stepping, an admin, a VM resumed) moves no duration.

TTFT, TPOT, E2E and ITL are differences of monotonic times (``client/timing.py``); the
record's unix timestamps come from one (wall, monotonic) pair read at the request's start.
``time.time`` is patched to jump by ``JUMP_S`` once the server has the request and before its
first chunk: durations measured on the wall clock would be off by the whole jump.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from specload.client import ChatRequest, ClientSettings, StreamClient, make_client
from specload.client.rxstamp import realtime_to_monotonic
from specload.core.records import RequestRecord
from tests.client.rawserver import raw_server, sse_response
from tests.client.test_stream_client import DONE, chunk

#: The step: far beyond any duration of the scripted stream (0.1 s to the first chunk).
JUMP_S = 1000.0
USAGE = {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
EVENTS = [
    chunk({"content": "a"}),
    chunk({"content": "b"}),
    chunk({"content": "c"}),
    chunk({"content": "d"}, "stop"),
    chunk(None, usage=USAGE),
    DONE,
]


class SteppedClock:
    """``time.time`` that can jump: the real clock plus an offset the test sets."""

    def __init__(self) -> None:
        self.offset = 0.0
        self.real = time.time

    def __call__(self) -> float:
        return self.real() + self.offset


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[SteppedClock]:
    c = SteppedClock()
    monkeypatch.setattr(time, "time", c)
    yield c


def _client(kind: str, url: str) -> Any:
    # user-space stamps for the fast client: the patched time.time cannot move the kernel's
    # receive stamps as a real step would (their conversion has its own test below)
    if kind == "fast":
        return StreamClient(url, ClientSettings(timeout_s=10), kernel_stamps=False)
    return make_client("openai", url, ClientSettings(timeout_s=10))


def _send(kind: str, clock: SteppedClock, jump: float) -> RequestRecord:
    """One request whose answer starts 0.1 s after it arrives; the clock jumps in between."""
    with raw_server([0.1, *sse_response(EVENTS, gap_s=0.01)]) as srv:

        def step_the_clock() -> None:  # a thread: the SDK's blocking socket holds this one
            while not srv.requests:  # the request is out; its first chunk is 0.1 s away
                time.sleep(0.001)
            clock.offset = jump

        stepper = threading.Thread(target=step_the_clock, daemon=True)
        stepper.start()
        req = ChatRequest(model="m", messages=({"role": "user", "content": "x"},))
        rec = _client(kind, srv.url).send(
            req,
            request_id="r",
            worker="w",
            step=0,
            repeat=0,
            target_qps=1.0,
            warmup=False,
            scheduled_at=time.time(),
        )
        stepper.join(timeout=10)
    assert clock.offset == jump  # the step happened, during the request
    clock.offset = 0.0
    assert rec.ok, rec.error
    return rec


@pytest.mark.parametrize("kind", ["fast", "openai"])
@pytest.mark.parametrize("jump", [JUMP_S, -JUMP_S], ids=["forward", "back"])
def test_a_clock_step_mid_request_changes_no_duration(
    clock: SteppedClock, kind: str, jump: float
) -> None:
    steady = _send(kind, clock, 0.0)
    stepped = _send(kind, clock, jump)
    for rec in (steady, stepped):
        assert rec.ttft_s is not None and rec.tpot_s is not None and rec.e2e_s is not None
        assert 0 < rec.ttft_s < JUMP_S / 10 and 0 < rec.tpot_s < rec.e2e_s < JUMP_S / 10
        # timestamps share the request's anchor: they agree with the durations exactly
        assert rec.first_token_at is not None
        assert rec.first_token_at - rec.sent_at == pytest.approx(rec.ttft_s, abs=1e-6)
    assert stepped.ttft_s == pytest.approx(steady.ttft_s, abs=JUMP_S / 100)
    assert stepped.tpot_s == pytest.approx(steady.tpot_s, abs=JUMP_S / 100)
    assert abs(stepped.sent_at - clock.real()) < JUMP_S / 10  # the wall clock at the start


def test_a_kernel_stamp_is_converted_by_its_age_on_the_clock_read_now(
    clock: SteppedClock,
) -> None:
    """Kernel receive stamps are ``CLOCK_REALTIME``: after a step they carry it, and their
    age by the stepped clock read at the same moment is still right; a stamp from the future
    (the clock stepped back after the packet came) is never placed after now."""
    clock.offset = JUMP_S
    stamp = time.time() - 0.25  # arrived a quarter second ago, on the stepped clock
    mono = time.monotonic()
    assert realtime_to_monotonic(stamp) == pytest.approx(mono - 0.25, abs=0.05)
    assert realtime_to_monotonic(time.time() + JUMP_S) <= time.monotonic()


def test_the_simulators_ground_truth_durations_survive_a_clock_step(
    clock: SteppedClock,
) -> None:
    """The truth the client is checked against (``sim --ground-truth``) stamps chunks on
    its request's anchor too, so a step does not move a server-side TTFT either."""
    from specload.sim.groundtruth import GroundTruth

    truth = GroundTruth().start("r", time.time(), 3, time.monotonic())
    clock.offset = -JUMP_S
    truth.chunk_times.append(truth.now())
    assert 0 <= truth.chunk_times[0] - truth.arrived_at < JUMP_S / 10

"""A held warm-up (``locust/blocks.py``): the next block's window opens once the previous
block's server is idle, soon after, never before its planned end, and never early at a load
process that hears late."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import gevent

from specload.locust.blocks import BLOCK_LEAD_S, BlockSchedule
from specload.locust.schedule import LEAD_S
from specload.locust.step_plan import TimedStep


@dataclass
class _Tally:
    idle: bool = False


@dataclass
class _Writer:
    updates: list[tuple[int, dict[str, float]]] = field(default_factory=list)

    def update_step(self, index: int, **fields: float) -> None:
        self.updates.append((index, fields))


class _Live:
    def __init__(self) -> None:
        self.steps: dict[int, _Tally] = {}
        self.rewindows: list[tuple[int, float, float]] = []

    def rewindow(self, index: int, warmup_end: float, end: float) -> None:
        self.rewindows.append((index, warmup_end, end))


class _Session(BlockSchedule):
    """What ``_hold_warmup`` reads of a session, and the shares it sends."""

    def __init__(self, step: TimedStep) -> None:
        self.scenario: Any = SimpleNamespace(request_timeout_s=20.0)
        self.live: Any = _Live()
        self.writer: Any = _Writer()
        self.scrapes: Any = SimpleNamespace(current=step)
        self.epoch = 0
        self.announced = [step]
        self.timeline = [step]
        self.shares: list[tuple[TimedStep, float, int]] = []

    def _sleep_until(self, t: float) -> None:
        gevent.sleep(max(0.0, t - time.time()))

    def _send_share(self, step: TimedStep, begin_at: float) -> None:
        self.shares.append((step, begin_at, self.epoch))


def _blocks(warmup_s: float) -> tuple[TimedStep, TimedStep]:
    now = time.time()
    prev = TimedStep(0, 0, 4.0, now - 5, now - 4, now - 1, 0, condition="spec", block=0)
    start = now
    step = TimedStep(
        1, 0, 4.0, start, start + warmup_s, start + warmup_s + 3, 0, condition="baseline",
        block=1, origin=start,
    )  # fmt: skip
    return prev, step


def test_a_block_whose_neighbour_is_idle_opens_as_planned() -> None:
    prev, step = _blocks(warmup_s=LEAD_S + 0.1)
    s = _Session(step)
    s.live.steps[prev.index] = _Tally(idle=True)
    assert s._hold_warmup(step, [prev]) == step
    assert s.shares == [] and s.writer.updates == []


def test_a_held_block_opens_soon_after_its_neighbour_is_idle_and_not_before() -> None:
    prev, step = _blocks(warmup_s=LEAD_S + 0.1)
    s = _Session(step)
    busy = s.live.steps[prev.index] = _Tally(idle=False)
    idle_at: list[float] = []

    def finish_later() -> None:
        gevent.sleep(LEAD_S + 0.6)  # the neighbour's last request ends past the planned end
        busy.idle = True
        idle_at.append(time.time())

    g = gevent.spawn(finish_later)
    opened = s._hold_warmup(step, [prev])
    g.join()
    # first, the load processes' window moves out of reach, sent a whole LEAD_S ahead, with
    # the block's arrivals unchanged; the run's record of the block is left alone
    far, begin, _ = s.shares[0]
    assert far.warmup_end > step.warmup_end + 10 and far.origin == step.origin
    assert begin >= step.warmup_end - 0.05
    # then it opens BLOCK_LEAD_S after the master saw the neighbour idle, its share starting
    # there, its measured window as long as planned and its arrivals moved with it
    last, begin, epoch = s.shares[-1]
    assert len(s.shares) == 2 and epoch == 2 and last == opened
    assert idle_at[0] + BLOCK_LEAD_S <= opened.warmup_end < idle_at[0] + BLOCK_LEAD_S + 0.2
    assert abs(begin - opened.warmup_end) < 0.02
    assert opened.end - opened.warmup_end == step.end - step.warmup_end
    assert opened.origin - step.origin == opened.warmup_end - step.warmup_end
    assert s.writer.updates == [(1, {"warmup_end": opened.warmup_end, "end": opened.end})]
    assert s.timeline == [opened] and s.scrapes.current == opened


def test_a_hold_never_ends_a_warm_up_before_its_planned_end() -> None:
    prev, step = _blocks(warmup_s=LEAD_S + 0.4)
    s = _Session(step)
    busy = s.live.steps[prev.index] = _Tally(idle=False)

    def finish_soon() -> None:
        gevent.sleep(LEAD_S)  # idle just after the check, well before the planned end
        busy.idle = True

    g = gevent.spawn(finish_soon)
    opened = s._hold_warmup(step, [prev])
    g.join()
    assert len(s.shares) == 2  # held (the check saw it busy), then opened as planned
    assert opened.warmup_end == step.warmup_end and opened.origin == step.origin


def test_a_block_after_a_run_of_two_waits_for_both_of_the_other_servers_blocks() -> None:
    """After a server ran two blocks in a row (``continues``), the next server's window waits
    until neither has a request in flight, the first one's included."""
    prev, step = _blocks(warmup_s=LEAD_S + 0.1)
    first = TimedStep(9, 0, 4.0, prev.start - 3, prev.start - 3, prev.start, 0, condition="spec")
    s = _Session(step)
    s.live.steps[prev.index] = _Tally(idle=True)
    busy = s.live.steps[first.index] = _Tally(idle=False)
    idle_at: list[float] = []

    def finish_later() -> None:
        gevent.sleep(LEAD_S + 0.6)
        busy.idle = True
        idle_at.append(time.time())

    g = gevent.spawn(finish_later)
    opened = s._hold_warmup(step, [first, prev])
    g.join()
    assert len(s.shares) == 2 and opened.warmup_end >= idle_at[0] + BLOCK_LEAD_S


def test_time_left_counts_an_overhead_only_for_blocks_that_open_after_a_switch() -> None:
    """Grouped (A B B A per step): the overhead per opened block so far, times the blocks
    still to open, plus every window still to run; a continued block adds only its window."""
    from specload.locust.blocks import time_left_s
    from specload.protocol.interleave import plan_blocks
    from specload.scenario import parse_scenario

    sc = parse_scenario(
        {"steps": [4, 8], "step_duration_s": 6, "interleave": {"blocks": 2, "order": "grouped"}},
        file="s",
    )
    blocks = plan_blocks(sc, ["baseline", "spec"])
    assert [b.duration_s for b in blocks] == [3.0] * 8
    t0 = 1000.0
    # block 0: 5-s warm-up; 1 s of cool-down and switch; block 1: 2-s warm-up; block 2
    # continues block 1 at its window's end
    done = [
        TimedStep(0, 0, 4.0, t0, t0 + 5, t0 + 8, 0),
        TimedStep(1, 0, 4.0, t0 + 9, t0 + 11, t0 + 14, 0),
        TimedStep(2, 0, 4.0, t0 + 14, t0 + 14, t0 + 17, 0),
    ]
    # 17 s so far, 9 measured: 8 s of overhead over 2 opened blocks; left: 5 windows of 3 s
    # and 4 blocks that open (3, 4, 5, 7; 6 continues 5)
    assert time_left_s(blocks, done, now=t0 + 17) == 5 * 3 + 4 * 4.0

"""An interleaved session as one run: every block a step, each sent to its condition's server.

``sweep --interleave`` starts one ``specload run`` per session with ``--interleave-targets``
(each condition's URL). Its steps are the blocks of ``protocol.interleave.plan_blocks``, in
that order, so every GPU second between the first block and the last is one of a block's
phases and no run starts, prepares prompts or shuts down in between. A block is:

1. **warm-up** (``block_warmup_s``): the condition's server gets the cell's load, unmeasured;
   it is held longer while the previous block's server still has requests in flight, so no
   measured request shares the GPU with the other server's work;
2. **measured** (``duration_s``): arrivals here are the block's records;
3. **cool-down**: the same load goes on, unmeasured (``cooldown`` records), until every
   measured request of the block has its record, so none is served while the load falls.

Only then is the next block announced (``BLOCK_LEAD_S`` ahead). The block's prefix cache is reset
before its warm-up. Each block draws its own arrivals (``block_seed``), and records carry
their ``condition`` and ``block`` as written; ``protocol.interleave.split_session`` then gives
each condition its run dir. A mixin of ``RunSession``, beside ``schedule.StepSchedule``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gevent

from specload.analysis.statistics.stats import quantile_sorted
from specload.locust.messages import Drain
from specload.locust.schedule import LEAD_S
from specload.locust.step_plan import TimedStep
from specload.protocol.interleave import (
    Block,
    Cell,
    Round,
    cells_of,
    continues,
    opens,
    plan_blocks,
)
from specload.protocol.target import reset_prefix_cache
from specload.scenario.schema import InterleaveSpec

if TYPE_CHECKING:
    from specload.locust.live import LiveStats
    from specload.locust.scrapes import StepScrapes
    from specload.options.run import RunOptions
    from specload.recorder.rundir import RunWriter

__all__ = ["POLL_S", "BlockSchedule", "block_seed", "time_left_s"]

#: Seconds within which a load process sends its counts after any change (its record
#: outbox's interval, ``load_process.RecordOutbox``)
COUNTS_EVERY_S = 0.5
#: Seconds by which a block is announced before it starts. Shorter than a step's
#: ``LEAD_S``: a message that comes late only delays the block's warm-up, which is not
#: measured (the previous block's load goes on until the new share begins).
BLOCK_LEAD_S = 0.1
#: A block's shortest warm-up: the check for the previous block's last requests comes
#: ``LEAD_S`` before it ends and must come after the block began (``_hold_warmup``)
MIN_WARMUP_S = 2 * LEAD_S
#: Seconds between the master's looks at whether the previous block's server is idle, while
#: a block's warm-up is held (its load processes send that block's last records at once).
POLL_S = 0.05


def time_left_s(blocks: list[Block], done: list[TimedStep], now: float) -> float:
    """The session's time left after the blocks ``done`` (run order): the windows still to
    run, plus, for each block still to open after another server's (or a step change), the
    overhead such a block has cost so far (its warm-up, the cool-down and switch before it).
    A block that continues its server's load adds only its window."""
    if not done:
        return 0.0
    opened = opens(blocks)
    measured = sum(t.end - t.warmup_end for t in done)
    overhead = (now - done[0].start - measured) / max(1, sum(opened[: len(done)]))
    rest = range(len(done), len(blocks))
    return sum(blocks[i].duration_s + (overhead if opened[i] else 0.0) for i in rest)


def block_seed(seed: int, replicate: int, block: Block) -> int:
    """The arrival draw of one block: its own for every block, cell and server start, and
    the same for both conditions' blocks of one unit (they are compared as a pair)."""
    key = f"specload-block:{seed}:{replicate}:{block.cell}:{block.k}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:4], "big")


class BlockSchedule:
    """Runs the session's blocks (see module doc); ``blocks`` is the plan once it starts."""

    if TYPE_CHECKING:
        runner: Any
        scenario: Any
        opts: RunOptions
        run_id: str
        finished: bool
        epoch: int
        split: dict[str, tuple[int, int]]
        announced: list[TimedStep]
        timeline: list[TimedStep]
        live: LiveStats
        writer: RunWriter
        scrapes: StepScrapes

        def _sleep_until(self, t: float) -> None: ...
        def _announce(self, step: TimedStep) -> None: ...
        def _send_share(self, step: TimedStep, begin_at: float) -> None: ...
        def _wait_ready(self) -> bool: ...
        def _wait_finals(self) -> None: ...
        def _say(self, line: str) -> None: ...
        def finish(self, status: str) -> None: ...
        def _progress(self, index: int) -> None: ...

    blocks: list[Block]
    cells: list[Cell]
    #: blocks whose cool-down is over (their progress line may be printed)
    cooled: set[int]
    #: unit -> where its blocks start in the prompt set; where the next unit starts
    _offsets: dict[int, int]
    _next_offset: int

    def plan_session(self) -> None:
        """The block plan, before the run starts (run.json carries it from the start)."""
        self.cells = cells_of(self.scenario)
        self.cooled = set()
        self._offsets, self._next_offset = {}, 0
        later = self.opts.interleave_round
        self.blocks = plan_blocks(
            self.scenario,
            list(self.opts.targets),
            salt=self.opts.replicate - 1,
            later=Round.from_json(later) if later is not None else None,
        )
        spec = self.scenario.interleave
        short = spec.block_warmup_s if spec is not None else None
        if short is not None and short < MIN_WARMUP_S:
            self.writer.meta.notes.append(
                f"block warm-up {short:g} s raised to {MIN_WARMUP_S:g} s (the shortest that "
                "lets a block wait for the previous one's last requests)"
            )

    def _schedule_blocks(self) -> None:
        if not self._wait_ready():
            return
        run: list[TimedStep] = []  # the blocks the current server has run in a row
        nxt: TimedStep | None = None  # the next block, announced when it continues this one
        for i, block in enumerate(self.blocks):
            if nxt is None:
                step = self._open_block(block, run)
                run = [step]
            else:  # took over the load at the last block's end, whose measured requests finish now
                step, nxt = nxt, None
                run.append(step)
                self._cool_down(run[-2])
            later = self.blocks[i + 1] if i + 1 < len(self.blocks) else None
            if later is not None and continues(block, later) and time.time() < step.end - LEAD_S:
                nxt = self._continue_with(later, step)
            else:
                self._sleep_until(step.end)
                self.scrapes.boundary(None)
                self._cool_down(step)
        self.runner.send_message(Drain.TYPE, Drain(self.run_id).to_wire())
        self._wait_finals()
        self.finish("completed")

    def _open_block(self, block: Block, run: list[TimedStep]) -> TimedStep:
        """A block after another server's run of blocks ``run`` (none: the session's first):
        its cache reset, its warm-up, held while that run still has requests in flight."""
        self._reset_cache(block.condition)
        step = self._block_step(block, time.time() + BLOCK_LEAD_S)
        self.timeline.append(step)
        self._announce(step)
        self._sleep_until(step.start)
        self.scrapes.boundary(step)
        if run:
            step = self._hold_warmup(step, run)
        return step

    def _continue_with(self, block: Block, step: TimedStep) -> TimedStep:
        """``block`` takes over ``step``'s load where its window ends (``continues``): no
        cache reset (its server is in the steady state of that load), no warm-up, announced
        ``LEAD_S`` ahead so every load process switches at the edge; one scrape closes
        ``step`` and opens ``block`` (one server)."""
        self._sleep_until(step.end - LEAD_S)
        nxt = dataclasses.replace(
            self._block_step(block, step.end, warmup_s=0.0), continues=step.index
        )
        self.timeline.append(nxt)
        self._announce(nxt)
        self._sleep_until(step.end)
        self.scrapes.boundary(nxt)
        return nxt

    def _prompt_offset(self, block: Block) -> int:
        """Where ``block`` starts in the prompt set: both blocks of a unit send the same
        prompts; each unit goes on where the previous one's planned arrivals stopped."""
        if block.unit not in self._offsets:
            qps = self.cells[block.cell].target_qps
            self._offsets[block.unit] = self._next_offset
            self._next_offset += round(qps * (block.warmup_s + block.duration_s))
        return self._offsets[block.unit]

    def _block_step(self, block: Block, start: float, warmup_s: float | None = None) -> TimedStep:
        cell = self.cells[block.cell]
        warmup_end = start + (self._warmup_for(block) if warmup_s is None else warmup_s)
        return TimedStep(
            index=block.number,
            repeat=block.k // self._blocks_per_repeat(),
            target_qps=cell.target_qps,
            start=start,
            warmup_end=warmup_end,
            end=warmup_end + block.duration_s,
            prompt_offset=self._prompt_offset(block),
            concurrency=cell.concurrency,
            condition=block.condition,
            block=block.number,
            seed=block_seed(self.scenario.seed, self.opts.replicate, block),
            origin=start,
        )

    def _warmup_for(self, block: Block) -> float:
        """The block's warm-up: the scenario's ``block_warmup_s``, else derived from its cell
        (``InterleaveSpec``): the largest p50 E2E the cell's earlier blocks showed, of either
        condition (both get the same); for a cell's first block the largest any cell showed
        (no request of it is known yet: the longest one seen is the safe guess); for the
        session's first block the plan's; at least ``MIN_WARMUP_S`` either way."""
        spec = self.scenario.interleave
        if spec is not None and spec.block_warmup_s is not None:
            return max(block.warmup_s, MIN_WARMUP_S)
        cell = self._p50_e2e(lambda b: b.cell == block.cell)
        if cell is None:  # the cell's first block: the longest request seen in any cell
            cell = self._p50_e2e(lambda b: True)
        return max(block.warmup_s if cell is None else cell, MIN_WARMUP_S)

    def _p50_e2e(self, which: Callable[[Block], bool]) -> float | None:
        """The largest p50 E2E among the blocks run so far that ``which`` picks."""
        seen = [
            p50
            for b in self.blocks
            if which(b) and b.number in self.live.steps
            if (p50 := quantile_sorted(self.live.steps[b.number].e2e_s, 0.50)) is not None
        ]
        return max(seen) if seen else None

    def _blocks_per_repeat(self) -> int:
        """Blocks of one condition per cell in one scenario repeat (``interleave.blocks``)."""
        return int((self.scenario.interleave or InterleaveSpec()).blocks)

    def _reset_cache(self, condition: str) -> None:
        """The block starts with its server's prefix cache empty, as a fresh run would."""
        url = self.opts.targets[condition]
        try:
            reset_prefix_cache(url)
        except Exception as exc:  # a server that cannot reset: said once, the block runs
            note = f"{condition}: prefix cache not reset before its blocks ({exc})"
            if note not in self.writer.meta.notes:
                self.writer.meta.notes.append(note)

    def _hold_warmup(self, step: TimedStep, run: list[TimedStep]) -> TimedStep:
        """Keep ``step`` in its warm-up while the blocks the previous server ran in a row
        (``run``, the last of them just cooled down) have requests in flight (the cool-down's
        last ones), bounded by the request timeout.

        Checked ``LEAD_S`` before the warm-up ends, which is after the block began at every
        load process (``MIN_WARMUP_S``). Still busy: the window moves out to the deadline
        (a new share, ``LEAD_S`` ahead, before the planned window could open), and opens
        ``BLOCK_LEAD_S`` after the master sees ``prev`` idle (checked every ``POLL_S``). A
        late message then only lengthens the warm-up, so the window can open that soon; a
        hold costs about ``BLOCK_LEAD_S`` instead of steps of ``LEAD_S``."""
        deadline = run[-1].end + float(self.scenario.request_timeout_s)
        self._sleep_until(step.warmup_end - LEAD_S)
        if self._idle(run) or time.time() >= deadline:
            return step
        self._hold_share(step, max(deadline, step.warmup_end) + LEAD_S)
        while time.time() < deadline and not self._idle(run):
            gevent.sleep(POLL_S)
        opens = max(time.time() + BLOCK_LEAD_S, step.warmup_end)  # never before planned
        return self._rewindow(step, opens, opens - time.time())

    def _hold_share(self, step: TimedStep, warmup_end: float) -> None:
        """The load processes keep ``step`` in its warm-up up to ``warmup_end`` (a share sent
        ``LEAD_S`` ahead, before its window could open); the run's own record of the block
        (steps.json, the live figures) changes once, when ``_rewindow`` opens it."""
        held = warmup_end - step.warmup_end
        origin = step.origin or step.start  # the same arrivals: only their window moves out
        self.epoch += 1
        self._send_share(
            dataclasses.replace(step, warmup_end=warmup_end, end=step.end + held, origin=origin),
            time.time() + LEAD_S,
        )

    def _idle(self, steps: list[TimedStep]) -> bool:
        """No request of ``steps`` in flight: every arrival queued for them has its record."""
        return all(
            (tally := self.live.steps.get(step.index)) is None or tally.idle for step in steps
        )

    def _rewindow(self, step: TimedStep, warmup_end: float, lead: float) -> TimedStep:
        """The same block with another warm-up end (and measured window after it), sent as a
        new share from ``lead`` ahead: arrivals before it keep the share they had."""
        held = warmup_end - step.warmup_end
        moved = dataclasses.replace(
            step,
            warmup_end=warmup_end,
            end=step.end + held,
            origin=(step.origin or step.start) + held,
        )
        self.epoch += 1
        self.announced[self.announced.index(step)] = moved
        self.timeline[self.timeline.index(step)] = moved
        if self.scrapes.current is step:  # its end scrape closes the moved window
            self.scrapes.current = moved
        self._send_share(moved, time.time() + lead)
        self.live.rewindow(moved.index, moved.warmup_end, moved.end)
        self.writer.update_step(moved.index, warmup_end=moved.warmup_end, end=moved.end)
        return moved

    def _counted_after(self, tally: Any, end: float) -> bool:
        """Every load process's counts cover the whole measured window: a batch came from it
        after ``end``, or none came for longer than a batch interval (it queued nothing new:
        a load process sends its counts within ``COUNTS_EVERY_S`` of any change)."""
        if time.time() >= end + COUNTS_EVERY_S + LEAD_S:
            return True
        return all(tally.counted_at.get(w, 0.0) > end for w in self.split)

    def _cool_down(self, step: TimedStep) -> None:
        """The load goes on (the block's share is open-ended) until every measured request
        of the block has its record, bounded by the request timeout."""
        deadline = step.end + float(self.scenario.request_timeout_s) + 5.0
        while time.time() < deadline:
            tally = self.live.steps.get(step.index)
            if tally is not None and tally.measured_in and self._counted_after(tally, step.end):
                break
            gevent.sleep(0.05)
        self.writer.update_step(step.index, cooldown_end=time.time())
        self.cooled.add(step.index)
        self._progress(step.index)  # the block's line, once its measured requests are in

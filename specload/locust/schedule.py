"""The master's step schedule: when each step starts, who paces which share of it, and
the wait for every worker's last counts at the end.

Times are absolute (unix seconds) and fixed ahead: step ``k`` runs ``[start_k, end_k)`` and
is announced ``LEAD_S`` before it starts, so a message's latency never shifts a boundary.
The load processes that are connected, ready and hold users share each step (``slot`` of
``slots``); when that set changes (a worker lost, or one joining), the current and next steps
are re-sent with a new ``epoch`` from ``now + LEAD_S``, and a worker left out gets an empty
share so it stops pacing its old one. A mixin of ``RunSession``: the state it reads is the
session's (declared below for the type checker only).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import gevent

from specload.locust.messages import Drain, RunStart, StepChange, split_slots
from specload.locust.step_plan import TimedStep, timed_steps

if TYPE_CHECKING:
    from specload.locust.ledger import WorkerLedger
    from specload.locust.live import LiveStats
    from specload.locust.scrapes import StepScrapes
    from specload.locust.workers import WorkerView
    from specload.recorder.rundir import RunWriter
    from specload.scenario.preparation import PreparedPrompts

__all__ = ["DRAIN_WAIT_S", "INVITE_EVERY_S", "LEAD_S", "StepSchedule"]

#: Seconds by which each step is announced before it starts (message latency budget).
LEAD_S = 0.5
#: Seconds between copies of ``RunStart`` to a worker that has not answered ``WorkerReady``.
INVITE_EVERY_S = 2.0
#: Seconds a stopped run (Ctrl-C, Stop) waits for every worker's last records and counts, and
#: the end of a run waits for those of a worker that missed its heartbeats (paused, a busy
#: box: it may come back). Bounded so a worker that is really gone cannot hold the run open;
#: whatever comes later is still appended while the master lives, else counted.
DRAIN_WAIT_S = 10.0


class StepSchedule:
    """Announces each step to the load processes and re-splits it when they change."""

    if TYPE_CHECKING:
        runner: Any
        scenario: Any
        run_id: str
        finished: bool
        workers: WorkerView
        ledger: WorkerLedger
        live: LiveStats
        writer: RunWriter
        scrapes: StepScrapes
        prepared: PreparedPrompts | None
        epoch: int
        split: dict[str, tuple[int, int]]
        announced: list[TimedStep]
        timeline: list[TimedStep]
        _greenlets: list[gevent.Greenlet]

        def _run_start(self) -> dict[str, Any]: ...
        def finish(self, status: str) -> None: ...

    def on_worker_connect(self, worker: str) -> None:
        """A worker joined mid-run: it gets the run; it takes a share once ready with users."""
        if not self.finished:
            self._greenlets.append(gevent.spawn(self._invite, worker))

    def _invite(self, worker: str) -> None:
        """Send ``RunStart`` until the worker is ready: a worker says hello to the master before
        it has registered its message handlers, so the first copy may be dropped."""
        for attempt in range(30):
            gevent.sleep(0.5 if attempt == 0 else INVITE_EVERY_S)
            if (
                self.finished
                or worker in self.ledger.ready
                or worker not in self.workers.connected()
            ):
                return
            if self.prepared is not None:  # else the run's own RunStart will reach it
                self.runner.send_message(RunStart.TYPE, self._run_start(), client_id=worker)

    def _sleep_until(self, t: float) -> None:
        while (d := t - time.time()) > 0:
            gevent.sleep(min(d, 0.5))
            self._check_workers()

    def _schedule(self) -> None:
        if not self._wait_ready():
            return
        steps = timed_steps(
            self.scenario.schedule(),
            time.time() + LEAD_S,
            replay=self.scenario.arrival == "trace",
        )
        self.timeline = steps
        for step in steps:
            self._sleep_until(step.start - LEAD_S)
            self._announce(step)
            self._sleep_until(step.start)
            self.scrapes.boundary(step)
        last = steps[-1]
        self._sleep_until(last.end)
        self.scrapes.boundary(None)
        self.runner.send_message(Drain.TYPE, Drain(self.run_id).to_wire())
        self._wait_finals()
        self.finish("completed")

    def _wait_ready(self) -> bool:
        """Users spawned and every connected load process ready (it took the prompt set)."""
        deadline = time.time() + 300.0
        resend_at = time.time() + INVITE_EVERY_S
        while time.time() < deadline:
            connected = set(self.workers.connected())
            errors = [r for r in self.ledger.ready.values() if r.error]
            if errors:
                self.writer.meta.notes.append(f"worker {errors[0].worker}: {errors[0].error}")
                self.finish("failed")
                return False
            if self.workers.spawned() and connected and connected <= set(self.ledger.ready):
                return True
            if time.time() >= resend_at:  # see _invite: an early copy may have been dropped
                for w in connected - set(self.ledger.ready):
                    self.runner.send_message(RunStart.TYPE, self._run_start(), client_id=w)
                resend_at = time.time() + INVITE_EVERY_S
            gevent.sleep(0.05)
        self.writer.meta.notes.append("load processes were not ready within 300 s")
        self.finish("failed")
        return False

    def _announce(self, step: TimedStep) -> None:
        self.announced.append(step)
        live = self.workers.candidates(self.ledger.ready)
        if live != set(self.split):
            self.split = split_slots(sorted(live))
        self._send_share(step, step.start)
        self.live.begin_step(*step.window(), step.concurrency, step.condition)
        self.writer.begin_step(
            {
                "index": step.index,
                "repeat": step.repeat,
                "target_qps": step.target_qps,
                **({"concurrency": step.concurrency} if step.concurrency else {}),
                "start": step.start,
                "warmup_end": step.warmup_end,
                "end": step.end,
                **({"condition": step.condition, "block": step.block} if step.condition else {}),
            }
        )

    def _send_share(self, step: TimedStep, begin_at: float) -> None:
        for worker, (slot, slots) in self.split.items():
            msg = self._step_change(step, begin_at, slot, slots)
            self.runner.send_message(StepChange.TYPE, msg.to_wire(), client_id=worker)

    def _step_change(self, step: TimedStep, begin_at: float, slot: int, slots: int) -> StepChange:
        """This step's message for one worker: its share ``slot`` of ``slots`` from ``begin_at``."""
        return StepChange(
            self.run_id,
            *step.window(),
            begin_at,
            self.epoch,
            slot,
            slots,
            step.prompt_offset,
            step.concurrency,
            step.condition,
            step.block,
            step.open_end,
            step.seed,
            step.origin,
            step.continues,
        )

    def _send_no_share(self, step: TimedStep, begin_at: float, workers: set[str]) -> None:
        """Tell workers left out of a re-split to stop pacing their old share.

        A worker marked missing may only have missed heartbeats: if it kept pacing its old
        share while the others took it over, the step would overshoot its target QPS.
        ``slots=0`` is an empty share; a worker that is really gone never reads it.
        """
        for worker in sorted(workers):
            msg = self._step_change(step, begin_at, 0, 0)
            self.runner.send_message(StepChange.TYPE, msg.to_wire(), client_id=worker)

    def _check_workers(self) -> None:
        """Mark lost workers and re-split the current step when the set of workers changes."""
        if self.finished or not self.announced:
            return
        now = time.time()
        self._mark_lost(now)
        live = self.workers.candidates(self.ledger.ready)
        if not live or live == set(self.split):
            return
        self.epoch += 1
        dropped = set(self.split) - live
        self.split = split_slots(sorted(live))
        switch_at = now + LEAD_S
        for step in self.announced:
            if step.end > switch_at or (step.open_end and step is self.announced[-1]):
                self._send_share(step, max(step.start, switch_at))
                self._send_no_share(step, max(step.start, switch_at), dropped)
        self.writer.meta.notes.append(
            f"re-split at {switch_at:.3f} over {len(live)} worker(s) (epoch {self.epoch})"
        )
        self.writer.write_meta()

    def _wait_finals(self) -> None:
        """After ``Drain``: every worker's last batch and final counts, bounded. A connected
        worker gets the request timeout plus 15 s to finish its requests; one that missed its
        heartbeats (it may only be paused) ``DRAIN_WAIT_S``."""
        start = time.time()
        deadline = start + float(self.scenario.request_timeout_s) + 15.0
        while time.time() < deadline:
            self._mark_lost(time.time())
            waiting = set(self.ledger.ready) - set(self.ledger.finals)
            if not waiting:
                return
            lost = {x["worker"] for x in self.writer.meta.lost_workers}
            if waiting <= lost and time.time() >= start + DRAIN_WAIT_S:
                break
            gevent.sleep(0.05)
        missing = sorted(set(self.ledger.ready) - set(self.ledger.finals))
        self.writer.meta.notes.append(f"no final counts from {missing} within the timeout")

    def _mark_lost(self, now: float) -> None:
        led = self.ledger
        gone = self.workers.lost_since(set(led.ready), set(led.finals))
        led.mark_lost(self.writer.meta.lost_workers, gone, now)

"""The end of a run on the master: the final run.json, the verdict on the error budget, and,
headless with a baseline run, the live comparison's and the gates' exit code.

A run that went to its end but failed more requests than ``--max-error-rate`` allows, in any
step or overall, lost a worker, or has requests sent without a record (``counts.unrecorded``)
ends ``degraded`` with the reasons in run.json (headless: exit code 1); its records are all
kept. A run stopped from outside (Ctrl-C, the UI's Stop) first asks every worker to cancel
what is in flight and report, then ends ``interrupted``. A mixin of ``RunSession``: the state
it reads is the session's (declared below for the type checker only).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gevent

from specload.locust.live import budget_reasons
from specload.locust.messages import Drain
from specload.locust.schedule import DRAIN_WAIT_S
from specload.metrics import host as hostinfo

if TYPE_CHECKING:
    from specload.locust.ledger import WorkerLedger
    from specload.locust.live import LiveStats
    from specload.locust.live_compare import LiveComparison, ReportJob
    from specload.locust.scrapes import StepScrapes
    from specload.locust.step_plan import TimedStep
    from specload.locust.workers import WorkerView
    from specload.metrics.telemetry import TelemetrySampler
    from specload.options.run import RunOptions
    from specload.recorder.rundir import RunWriter

__all__ = ["EDGE_WAIT_S", "RunEnd"]

log = logging.getLogger("specload")

#: Seconds the end of a run waits for a step-edge scrape still in flight.
EDGE_WAIT_S = 5.0


class RunEnd:
    """Ends the run once: run.json's counts, lost workers and status, then the report."""

    if TYPE_CHECKING:
        runner: Any
        opts: RunOptions
        run_id: str
        finished: bool
        _finishing: bool
        _end_written: bool
        _ended_as: str
        _set_exit_code: bool
        stopped_externally: bool
        status: str
        workers: WorkerView
        ledger: WorkerLedger
        live: LiveStats
        writer: RunWriter
        scrapes: StepScrapes
        compare: LiveComparison | None
        report: ReportJob
        closing: list[str]
        announced: list[TimedStep]
        timeline: list[TimedStep]
        _telemetry: TelemetrySampler
        _greenlets: list[gevent.Greenlet]

        def _progress(self, index: int) -> None: ...
        def _say(self, line: str) -> None: ...

    def finish(self, status: str) -> None:
        """Write the final run.json (counts, lost workers, status) once; stop greenlets."""
        if self.finished or self._finishing:
            return
        self._finishing = True  # records still arriving while an edge scrape ends are kept
        self.scrapes.wait(EDGE_WAIT_S)
        self.finished = True
        self.status, self._ended_as = status, status
        for g in [*self._greenlets, *self.scrapes.edges]:
            if g is not gevent.getcurrent():
                g.kill(block=False)
        hostinfo.finish(self.writer.meta.host)
        self.writer.meta.telemetry = self._telemetry.close()
        # from here to close() nothing yields: every batch that arrived so far is counted,
        # every later one goes through _late
        self._final_counts()
        status = self._judge(status)
        now = time.time()
        if status not in ("completed", "degraded"):  # ended early: the steps end where it ended
            self.writer.steps = [x for x in self.writer.steps if x["start"] < now]
            if (current := self.scrapes.current) is not None:
                self.writer.end_step(current.index, min(now, current.end))
        self.writer.close(status, time.time())
        self._end_written = True
        for step in self.announced:  # the last step's line (its delayed greenlet may not run)
            if step.start < time.time():
                self._progress(step.index)
        counts = self.writer.meta.counts
        unrecorded = f", {counts['unrecorded']} sent without one" if counts["unrecorded"] else ""
        self._say(
            f"run {status}: {counts['recorded']} records{unrecorded} in {self.writer.path} "
            f"(sent {counts['sent']}, recorded {counts['recorded']}, "
            f"unrecorded {counts['unrecorded']})"
        )
        if self.compare is not None:  # every step that ran to its end, every record in
            ran = {i for i, t in self.live.steps.items() if t.end <= now and t.measured}
            self.compare.update(ran, final=True)
        for why in self.writer.meta.degraded:
            log.warning("run degraded: %s", why)

    def start_report(self) -> None:
        """``specload compare`` of the finished run, with the gate options: against the
        baseline run when there is one it can use (even when a live update failed: compare's
        own message then says why), else the run's own report. Written beside the run dir,
        in ``reports/<run>-vs-<baseline>`` (or ``reports/<run>``) under its parent."""
        dirs, name, base = [self.writer.path], self.writer.path.name, None
        c = self.compare
        if c is not None and c.blocked is None:
            dirs.insert(0, c.baseline.path)
            name, base = f"{name}-vs-{c.baseline.path.name}", c.baseline.label
        out = Path(self.writer.path).parent / "reports" / name
        self.report.start(dirs, out, base, tuple(self.opts.gates.argv()))

    def end_pending(self) -> bool:
        """Headless with ``--baseline-run``: whether Locust must wait before it exits: for
        the final live comparison, then, with gates (``--max-regression``, ``--slo``,
        ``--junit``), for ``specload compare`` with them (started here)."""
        if not self.opts.headless or self.compare is None:
            return False
        if not self.compare.final:
            return True
        if self.opts.gates.asked and self.report.state == "none":
            self.start_report()
            return True
        return self.report.state == "running"

    def end_comparison(self) -> None:
        """Headless, the exit code of the comparison: a live comparison asked for
        (``--baseline-run``) that gave no final answer is exit 1 (CI must not read a run
        that compared nothing as a pass; its reason was printed); a failed gate is
        compare's exit 1, bad gate input its exit 2, each with compare's own lines."""
        if not self.opts.headless or self.compare is None:
            return
        code = 1 if self.compare.failure is not None else 0
        if self.opts.gates.asked and self.report.code is not None:
            # said once Locust has printed its tables (``closing``): last in a CI log
            self.closing += self.report.said
            if self.report.problem:
                self.closing.append(f"gates not checked: {self.report.problem}")
            code = max(code, self.report.code if self.report.code in (0, 1, 2) else 1)
        env = self.runner.environment
        env.process_exit_code = max(env.process_exit_code or 0, code) or None

    def say_closing(self) -> None:
        """The lines kept for the very end (the gates' outcome), after Locust's tables:
        Locust's ``quit`` event, which fires once it printed them."""
        lines, self.closing = self.closing, []
        for line in lines:
            self._say(line)

    def _judge(self, status: str) -> str:
        """A run that went to its end over its error budget, or short of a worker, is
        ``degraded`` (records kept, reasons in run.json); headless Locust then exits 1."""
        meta = self.writer.meta
        if status != "completed":
            return status
        meta.degraded = budget_reasons(
            self.live.steps, meta.lost_workers, self.opts.max_error_rate, self.ledger.unrecorded()
        )
        self.status = "degraded" if meta.degraded else status
        if self.opts.headless and (meta.degraded or self._set_exit_code):
            self.runner.environment.process_exit_code = 1 if meta.degraded else None
            self._set_exit_code = bool(meta.degraded)
        return self.status

    def _final_counts(self) -> None:
        """counts and lost workers into run.json (``WorkerLedger``)."""
        meta = self.writer.meta
        meta.counts = self.ledger.counts()
        end = self.timeline[-1].end if self.timeline else None
        self.ledger.settle_lost(meta.lost_workers, end, meta.notes)

    def stop(self) -> None:
        """The test was stopped from outside (Ctrl-C, the UI's Stop): end as interrupted.

        Workers are told to cancel what is in flight and report first (every worker of the
        run, up to ``DRAIN_WAIT_S``), so their last records and counts make it into the run;
        anything later is still appended (``_late``) or counted in run.json.
        """
        if self.finished:
            return
        self.stopped_externally = True
        for g in self._greenlets:
            if g is not gevent.getcurrent():
                g.kill(block=False)
        if self.workers.distributed and self.ledger.ready:
            self.runner.send_message(Drain.TYPE, Drain(self.run_id, abort=True).to_wire())
            self._await_every_worker()
        self.finish("interrupted")

    def _await_every_worker(self) -> None:
        """Up to ``DRAIN_WAIT_S`` for every worker's last records and final counts, those
        whose heartbeats stopped too (one may only be paused). Says so once when only such
        workers are left, so a stop that waits for them does not look hung."""
        deadline = time.time() + DRAIN_WAIT_S
        said = False
        while time.time() < deadline:
            waiting = set(self.ledger.ready) - set(self.ledger.finals)
            if not waiting:
                return
            if not said and not waiting & set(self.workers.connected()):
                left = deadline - time.time()
                who = ", ".join(sorted(waiting))
                log.warning(
                    "stopping: waiting up to %.0f s for %s, whose heartbeats stopped", left, who
                )
                said = True
            gevent.sleep(0.05)

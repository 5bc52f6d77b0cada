"""One run on the master: the schedule, the run directory and the end of the run; the
scrapes of ``/metrics`` are ``scrapes.StepScrapes``'s, what each worker sent and what was
written ``ledger.WorkerLedger``'s.

The master (or the local runner) owns the step schedule; pacers in each load process only
follow ``StepChange`` messages. Times are absolute (unix seconds) and fixed ahead: step
``k`` runs ``[start_k, end_k)`` and is announced ``LEAD_S`` before it starts, so a message's
latency never shifts a boundary. At each boundary ``/metrics`` is scraped once (the end of
one step is the start of the next), run.json is rewritten, and a progress line is printed
once the step's records have had a moment to arrive. After the last step, ``Drain`` asks each
load process to finish and report its counts; the master waits for every worker's last batch
and final counts (a worker that missed its heartbeats, paused or on a busy box, up to
``DRAIN_WAIT_S``), checks that every request sent has a record and writes the counts to
run.json. No record is dropped: a batch that arrives after run.json's end was written is
appended and run.json rewritten. A run that went to its end but failed more requests than
``--max-error-rate`` allows, in any step or overall, lost a worker, or has requests sent
without a record (``counts.unrecorded``) ends ``degraded`` with the reasons in run.json
(headless: exit code 1); its records are all kept.
Only this object writes the run directory.
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gevent

from specload.core.condition import declared_condition
from specload.locust.ledger import WorkerLedger
from specload.locust.live import LiveStats, budget_reasons
from specload.locust.live_compare import LiveComparison, ReportJob
from specload.locust.messages import (
    Drain,
    FinalCounts,
    RecordBatch,
    RunStart,
    StepChange,
    WorkerReady,
    split_slots,
)
from specload.locust.scrapes import StepScrapes
from specload.locust.step_plan import TimedStep, timed_steps
from specload.locust.workers import WorkerView
from specload.metrics import host as hostinfo
from specload.metrics.gpu import GpuMemorySampler, open_gpu_source
from specload.metrics.scrape import MetricsScraper, fetch_server_info
from specload.metrics.telemetry import TelemetrySampler
from specload.options.run import RunOptions
from specload.protocol.provisional import load_baseline
from specload.recorder.rundir import RunMeta, RunWriter
from specload.scenario.preparation import PreparationFailed, PreparedPrompts, prepare_prompts

__all__ = ["DRAIN_WAIT_S", "LEAD_S", "RunSession", "SessionSnapshot"]

log = logging.getLogger("specload")

#: Seconds by which each step is announced before it starts (message latency budget).
LEAD_S = 0.5
#: Seconds between flushes of requests.jsonl / metrics.jsonl to the OS.
FLUSH_S = 1.0
#: Seconds between copies of ``RunStart`` to a worker that has not answered ``WorkerReady``.
INVITE_EVERY_S = 2.0
#: Seconds the end of a run waits for a step-edge scrape still in flight.
EDGE_WAIT_S = 5.0
#: Seconds a stopped run (Ctrl-C, Stop) waits for every worker's last records and counts, and
#: the end of a run waits for those of a worker that missed its heartbeats (paused, a busy
#: box: it may come back). Bounded so a worker that is really gone cannot hold the run open;
#: whatever comes later is still appended while the master lives, else counted.
DRAIN_WAIT_S = 10.0


def new_run_id(label: str) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    return f"{label}-{stamp}-{secrets.token_hex(2)}"


def free_run_dir(path: str) -> Path:
    """``path``, or ``path-2``, ``path-3``... when it already holds a run (UI re-runs)."""
    p = Path(path)
    n = 1
    while (p.parent / (p.name if n == 1 else f"{p.name}-{n}") / "run.json").exists():
        n += 1
    return p if n == 1 else p.parent / f"{p.name}-{n}"


@dataclass(frozen=True, slots=True)
class SessionSnapshot:
    """What a run looks like right now, for the web UI: copies, never the session's own state.

    ``live`` is ``LiveStats.snapshot()`` (per-step figures); ``plans`` the scenario's steps as
    ``(index, repeat, target_qps)``; ``workers`` maps each load process to what it says it
    sent, what arrived here and whether it is ``connected``, ``gone`` or ``lost``.
    """

    run_id: str
    label: str
    status: str
    finished: bool
    run_dir: str
    host: str
    model: str
    plans: tuple[tuple[int, int, float], ...]
    live: dict[str, Any]
    sent: int
    recorded: int
    workers: dict[str, dict[str, Any]]
    lost_workers: tuple[dict[str, Any], ...]
    notes: tuple[str, ...]
    #: ``(index, start, warmup_end, end)`` per step once the schedule has started
    timeline: tuple[tuple[int, float, float, float], ...] = ()
    #: the error rates over budget so far (``budget_reasons`` without lost workers, which
    #: ``lost_workers`` lists): one sentence each
    over_budget: tuple[str, ...] = ()
    #: ``LiveComparison.view()`` with a baseline run, else None
    compare: dict[str, Any] | None = None
    #: ``ReportJob.view()``
    report: dict[str, Any] | None = None


class RunSession:
    """The master's side of one run (see module doc). ``finished`` once run.json is final."""

    def __init__(self, runner: Any, scenario: Any, opts: RunOptions, api_key: str | None) -> None:
        self.runner = runner
        self.scenario = scenario
        self.opts = opts
        self.workers = WorkerView(runner)
        self.run_id = new_run_id(opts.label)
        self.live = LiveStats()
        self.finished = False
        self._finishing = False
        #: run.json's end is written: later batches are appended by ``_late``
        self._end_written = False
        #: the status ``finish`` was given, before ``_judge`` (re-judged on late arrivals)
        self._ended_as = "running"
        self._set_exit_code = False
        self.stopped_externally = False
        self.end_reported = False
        self.status = "running"
        self.ledger = WorkerLedger()
        self.epoch = 0
        self.split: dict[str, tuple[int, int]] = {}
        self.announced: list[TimedStep] = []
        self._printed: set[int] = set()
        self._api_key = api_key
        self.prepared: PreparedPrompts | None = None
        self._start_wire: dict[str, Any] | None = None
        source, self._gpu_note = open_gpu_source(opts.gpu_metrics_url, opts.host)
        info = fetch_server_info(opts.host, api_key=api_key)
        models = info.get("models") or []
        self.model = scenario.model or (models[0] if models else "default")
        self.writer = RunWriter(free_run_dir(opts.run_dir), self._meta(info))
        pool = gevent.get_hub().threadpool  # NVML's C calls run there, off the loop
        self._telemetry = TelemetrySampler.open(  # GPU and host at 2 Hz (metrics/telemetry.py)
            self.writer.path, opts.gpu_metrics_url, opts.host, offload=pool.apply
        )
        self.writer.meta.telemetry = self._telemetry.summary()
        self.scrapes = StepScrapes(
            MetricsScraper(opts.host, api_key=api_key),
            GpuMemorySampler(source) if source is not None else None,
            self.writer,
            self.live,
            say=self._say,
            guarded=self._guarded,
            progress=self._progress,
        )
        self._greenlets: list[gevent.Greenlet] = []
        #: the steps with their times, once the schedule starts (the UI's time left)
        self.timeline: list[TimedStep] = []
        self.report = ReportJob()
        self.compare = (
            LiveComparison(
                load_baseline(opts.baseline_run),
                self.writer.path,
                opts.label,
                self.writer.meta.scenario,
                self._say,
            )
            if opts.baseline_run
            else None
        )

    def _meta(self, info: dict[str, Any]) -> RunMeta:
        sc = {**self.scenario.to_dict(), "path": self.opts.scenario_path}
        notes = (
            []
            if self.scenario.model or info.get("models")
            else ["scenario names no model and the server lists none at /v1/models; sent 'default'"]
        )
        notes.append(self._gpu_note)
        return RunMeta(
            run_id=self.run_id,
            label=self.opts.label,
            condition=declared_condition(*self.opts.speculative, self.opts.prefix_caching),
            target={
                "url": self.opts.host,
                "model": self.model,
                "server_version": info.get("server_version"),
                "models": info.get("models"),
            },
            scenario=sc,
            started_at=time.time(),
            server_cmd=self.opts.server_cmd,
            notes=notes,
            max_error_rate=self.opts.max_error_rate,
            host=hostinfo.fingerprint(self.opts.host, self.opts.gpu_metrics_url),
        )

    # --- lifecycle ----------------------------------------------------------------------
    def _run_start(self) -> dict[str, Any]:
        """``RunStart`` with the prepared prompt set (built once, see ``_prepare``)."""
        if self._start_wire is None:
            assert self.prepared is not None
            self._start_wire = RunStart(
                self.run_id,
                self.scenario.to_dict(),
                self.opts.scenario_path,
                self.model,
                self.opts.host,
                self.opts.store_text,
                self.prepared.prompts.to_wire(),
            ).to_wire()
        return self._start_wire

    def start(self) -> None:
        """Prepare the prompts, tell every load process about the run, then run the schedule
        (in a greenlet: preparing may take seconds of ``/tokenize``)."""
        self._greenlets = [
            gevent.spawn(self._guarded, self._prepare_and_run),
            gevent.spawn(self._guarded, self._scrape_interval),
            gevent.spawn(self._guarded, self._flush_loop),
            gevent.spawn(self._telemetry.run, gevent.sleep),  # never raises: not guarded
        ]

    def _prepare_and_run(self) -> None:
        if self._prepare():
            self.runner.send_message(RunStart.TYPE, self._run_start())
            self._schedule()

    def _prepare(self) -> bool:
        """Build the prompt set once, here (``scenario/preparation.py``); False: the run failed."""
        n = self.scenario.prompts.count
        self._say(f"preparing {n or 'the'} prompts (token counts from {self.opts.host}/tokenize)")
        t0 = time.time()
        try:
            prepared = prepare_prompts(self.scenario, self.opts.host, self.model, self._api_key)
        except PreparationFailed as exc:
            self.writer.meta.notes.append(str(exc))
            self.finish("failed")
            return False
        meta = self.writer.meta
        meta.token_count_source = prepared.prompts.token_count_source
        meta.prompt_set = prepared.summary()
        meta.notes.extend(prepared.warnings)
        self.prepared = prepared
        self._say(
            f"prompts ready: {len(prepared.prompts)} prompts, token counts by "
            f"{prepared.prompts.token_count_source}, sha256 {prepared.prompts.sha256[:12]}, "
            f"{time.time() - t0:.1f} s"
        )
        return True

    def snapshot(self) -> SessionSnapshot:
        """The run as it stands (see ``SessionSnapshot``)."""
        meta = self.writer.meta
        lost = {x["worker"] for x in meta.lost_workers}
        connected = set(self.workers.connected())
        led = self.ledger
        workers = {
            w: {
                "sent": led.sent.get(w, 0),
                "recorded": led.received.get(w, 0),
                "state": "lost" if w in lost else ("connected" if w in connected else "gone"),
            }
            for w in led.names()
        }
        return SessionSnapshot(
            run_id=self.run_id,
            label=self.opts.label,
            status=self.status,
            finished=self.finished,
            run_dir=str(self.writer.path),
            host=self.opts.host,
            model=self.model,
            plans=tuple((p.index, p.repeat, p.target_qps) for p in self.scenario.schedule()),
            live=self.live.snapshot(),
            sent=sum(led.sent.values()),
            recorded=sum(led.received.values()),
            workers=workers,
            lost_workers=tuple(dict(x) for x in meta.lost_workers),
            notes=tuple(meta.notes),
            timeline=tuple((t.index, t.start, t.warmup_end, t.end) for t in self.timeline),
            over_budget=tuple(budget_reasons(self.live.steps, [], self.opts.max_error_rate)),
            compare=self.compare.view() if self.compare is not None else None,
            report=self.report.view(),
        )

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

    def _guarded(self, fn: Any) -> None:
        try:
            fn()
        except gevent.GreenletExit:
            raise
        except Exception as exc:
            log.exception("specload: run failed")
            self.writer.meta.notes.append(f"run failed: {type(exc).__name__}: {exc}")
            self.finish("failed")

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

    # --- steps --------------------------------------------------------------------------
    def _announce(self, step: TimedStep) -> None:
        self.announced.append(step)
        live = self.workers.candidates(self.ledger.ready)
        if live != set(self.split):
            self.split = split_slots(sorted(live))
        self._send_share(step, step.start)
        self.live.begin_step(
            step.index,
            step.repeat,
            step.target_qps,
            step.start,
            step.warmup_end,
            step.end,
            step.concurrency,
        )
        self.writer.begin_step(
            {
                "index": step.index,
                "repeat": step.repeat,
                "target_qps": step.target_qps,
                **({"concurrency": step.concurrency} if step.concurrency else {}),
                "start": step.start,
                "warmup_end": step.warmup_end,
                "end": step.end,
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
            step.index,
            step.repeat,
            step.target_qps,
            step.start,
            step.warmup_end,
            step.end,
            begin_at,
            self.epoch,
            slot,
            slots,
            step.prompt_offset,
            step.concurrency,
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

    def _scrape_interval(self) -> None:
        self.scrapes.interval_loop(self.scenario.metrics_interval_s, lambda: self.finished)

    def _flush_loop(self) -> None:
        """Records reach the disk within ``FLUSH_S`` even in a long step (a SIGKILL loses little)."""
        while not self.finished:
            gevent.sleep(FLUSH_S)
            if not self.finished:
                self.writer.flush()
                if self.compare is not None:
                    grace = float(self.scenario.request_timeout_s) + 5.0
                    self.compare.update(self.live.settled(time.time(), grace))

    def _progress(self, index: int) -> None:
        if index in self._printed or index not in self.live.steps:
            return
        self._printed.add(index)
        self._say(self.live.progress_line(index, len(self.scenario.schedule())))

    def _say(self, line: str) -> None:
        """Once on the terminal: printed headless (``specload run`` shows ``[specload]``
        lines), else logged. Both at once showed every line twice under ``locust --headless``."""
        if self.opts.headless:
            print(f"[specload] {line}", flush=True)
        else:
            log.info("specload: %s", line)

    # --- workers ------------------------------------------------------------------------
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
            if step.end > switch_at:
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

    # --- messages from load processes ---------------------------------------------------
    def on_ready(self, msg: WorkerReady) -> None:
        if msg.run_id != self.run_id:
            return
        self.ledger.ready[msg.worker] = msg
        meta = self.writer.meta
        if msg.lookup_method and meta.lookup_method is None:
            meta.lookup_method = msg.lookup_method
        if msg.worker not in meta.workers:
            meta.workers.append(msg.worker)

    def on_records(self, msg: RecordBatch) -> None:
        """A worker's batch: written, whenever it comes (after the end: ``_late``)."""
        if msg.run_id != self.run_id:
            return
        self.ledger.sent[msg.worker] = max(self.ledger.sent[msg.worker], msg.sent)
        self.live.set_sent_in_window(msg.worker, msg.sent_in_window)
        self.live.set_due(msg.worker, msg.due)
        if self._end_written:
            self._late(msg.worker, msg.records)
            return
        self.ledger.received[msg.worker] += self.writer.add_records(msg.records)
        for r in msg.records:
            self.live.add(r)

    def on_final(self, msg: FinalCounts) -> None:
        if msg.run_id == self.run_id:
            self.ledger.finals[msg.worker] = msg
            self.ledger.sent[msg.worker] = max(self.ledger.sent[msg.worker], msg.sent)
            if self._end_written:
                self._rewrite_end()

    def _late(self, worker: str, records: list[dict[str, Any]]) -> None:
        """Records that arrived after run.json's end was written (a worker slow at the end):
        appended to requests.jsonl, counted, and run.json rewritten with the new counts."""
        n = self.writer.append_late(records) if records else 0
        self.ledger.received[worker] += n
        self.ledger.late_records += n
        for r in records:
            self.live.add(r)
        if n:
            self._say(f"{n} records from {worker} arrived after the end: appended to the run")
        self._rewrite_end()

    def _rewrite_end(self) -> None:
        """Counts, lost workers and the verdict again (late records or counts), run.json
        rewritten: what arrived late is in the run, never only in a log."""
        self._final_counts()
        status = self._judge(self._ended_as)
        self.writer.meta.status = status
        self.writer.write_meta()

    # --- the end ------------------------------------------------------------------------
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
        self._say(f"run {status}: {counts['recorded']} records{unrecorded} in {self.writer.path}")
        if self.compare is not None:  # every step that ran to its end, every record in
            ran = {i for i, t in self.live.steps.items() if t.end <= now and t.measured}
            self.compare.update(ran, final=True)
        for why in self.writer.meta.degraded:
            log.warning("specload: run degraded: %s", why)

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
            for line in self.report.said:
                self._say(line)
            if self.report.problem:
                self._say(f"gates not checked: {self.report.problem}")
            code = max(code, self.report.code if self.report.code in (0, 1, 2) else 1)
        env = self.runner.environment
        env.process_exit_code = max(env.process_exit_code or 0, code) or None

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
            deadline = time.time() + DRAIN_WAIT_S
            while time.time() < deadline and not set(self.ledger.ready) <= set(self.ledger.finals):
                gevent.sleep(0.05)
        self.finish("interrupted")

"""One run on the master: its run directory, its prompt set and its lifecycle.

The master (or the local runner) owns the run; pacers in each load process only follow the
messages it sends. ``RunSession`` puts together what the run needs, by responsibility:

- ``schedule.StepSchedule``: the step windows, fixed ahead and announced ``LEAD_S`` before
  each starts, each load process's share of a step, re-splits when workers come and go, and
  the wait for every worker's final counts;
- ``intake.RecordIntake``: the records and counts the load processes send, written whenever
  they come (after the end too);
- ``run_end.RunEnd``: the final run.json, the error budget's verdict, and the headless
  comparison's exit code;
- ``scrapes.StepScrapes``: ``/metrics`` at each step edge and on an interval.

This module holds what is left: building the run (its run.json header, the prompt set, built
once from the server's ``/tokenize``), starting the greenlets, flushing the files every
``FLUSH_S``, the progress lines, and the ``SessionSnapshot`` the web UI reads. Only the
session writes the run directory.
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
from specload.locust.blocks import BlockSchedule, time_left_s
from specload.locust.intake import RecordIntake
from specload.locust.ledger import WorkerLedger
from specload.locust.live import LiveStats, budget_reasons
from specload.locust.live_compare import LiveComparison, ReportJob
from specload.locust.messages import RunStart
from specload.locust.run_end import RunEnd
from specload.locust.schedule import DRAIN_WAIT_S, LEAD_S, StepSchedule
from specload.locust.scrapes import StepScrapes
from specload.locust.step_plan import TimedStep
from specload.locust.workers import WorkerView
from specload.metrics import host as hostinfo
from specload.metrics.gpu import GpuMemorySampler, open_gpu_source
from specload.metrics.scrape import MetricsScraper, fetch_server_info
from specload.metrics.telemetry import TelemetrySampler
from specload.options.run import RunOptions
from specload.protocol.interleave import blocks_so_far
from specload.recorder.baseline_run import load_baseline
from specload.recorder.rundir import RunMeta, RunWriter
from specload.scenario.preparation import PreparationFailed, PreparedPrompts, prepare_prompts

__all__ = ["DRAIN_WAIT_S", "LEAD_S", "RunSession", "SessionSnapshot"]

log = logging.getLogger("specload")

#: Seconds between flushes of requests.jsonl / metrics.jsonl to the OS.
FLUSH_S = 1.0


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


class RunSession(StepSchedule, BlockSchedule, RecordIntake, RunEnd):
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
        #: an interleaved session's servers: condition -> (URL, model it serves)
        self.targets = {label: self._target(url, api_key) for label, url in opts.targets.items()}
        self.writer = RunWriter(free_run_dir(opts.run_dir), self._meta(info))
        if self.targets:
            self.plan_session()
            self.writer.meta.interleave = self._session_json()
            self.writer.write_meta()
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
            by_condition={
                label: MetricsScraper(url, api_key=api_key) for label, url in opts.targets.items()
            },
        )
        self._greenlets: list[gevent.Greenlet] = []
        #: the steps with their times, once the schedule starts (the UI's time left)
        self.timeline: list[TimedStep] = []
        self.report = ReportJob()
        #: lines said at the very end, after Locust's tables (``RunEnd.say_closing``)
        self.closing: list[str] = []
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

    def _target(self, url: str, api_key: str | None) -> tuple[str, str]:
        """One condition's server of a session and the model it serves (the scenario's, else
        the first it lists)."""
        if url == self.opts.host:
            return url, self.model
        models = fetch_server_info(url, api_key=api_key).get("models") or []
        return url, self.scenario.model or (models[0] if models else "default")

    def _session_json(self) -> dict[str, Any]:
        """run.json ``interleave``: the design, every block, the servers and the start."""
        from specload.protocol.interleave import plan_json

        design = plan_json(self.scenario, self.blocks, salt=self.opts.replicate - 1)
        targets = {label: {"url": u, "model": m} for label, (u, m) in self.targets.items()}
        return {**design, "targets": targets, "replicate": self.opts.replicate}

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
                {label: [url, model] for label, (url, model) in self.targets.items()},
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
            if self.targets:
                self._schedule_blocks()
            else:
                self._schedule()

    def _prepare(self) -> bool:
        """Build the prompt set once, here (``scenario/preparation.py``); False: the run failed."""
        n = self.scenario.prompts.count
        self._say(f"preparing {n or 'the'} prompts (token counts from {self.opts.host}/tokenize)")
        t0 = time.time()
        try:
            prepared = prepare_prompts(self.scenario, self.opts.host, self.model, self._api_key)
            self._same_prompts_everywhere(prepared)
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

    def _same_prompts_everywhere(self, prepared: PreparedPrompts) -> None:
        """An interleaved session sends one prompt set to every server: prepared once per
        server, it must come out the same (servers that count tokens differently would make
        the conditions' prompts differ, and their comparison meaningless)."""
        for label, (url, model) in self.targets.items():
            if url == self.opts.host and model == self.model:
                continue
            other = prepare_prompts(self.scenario, url, model, self._api_key)
            if other.prompts.sha256 != prepared.prompts.sha256:
                raise PreparationFailed(
                    f"the prompt set prepared with {label}'s server ({url}) differs from the "
                    f"one prepared with {self.opts.host} (sha256 {other.prompts.sha256[:12]} vs "
                    f"{prepared.prompts.sha256[:12]}): do the servers tokenize alike?"
                )

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

    def _guarded(self, fn: Any) -> None:
        try:
            fn()
        except gevent.GreenletExit:
            raise
        except Exception as exc:
            log.exception("run failed")
            self.writer.meta.notes.append(f"run failed: {type(exc).__name__}: {exc}")
            self.finish("failed")

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
        if self.targets and index not in self.cooled and not self.finished:
            return  # a block's line comes once its measured requests are in (blocks.py)
        self._printed.add(index)
        if not self.targets:
            self._say(self.live.progress_line(index, len(self.scenario.schedule())))
            return
        done = [t for t in self.timeline if t.index <= index]
        left = time_left_s(self.blocks, done, time.time())
        self._say(self.live.progress_line(index, blocks_so_far(self.blocks), left_s=left))

    def _say(self, line: str) -> None:
        """Once on the terminal: printed headless (``specload run`` shows ``[specload]``
        lines), else logged: both would show every line twice under ``locust --headless``."""
        if self.opts.headless:
            print(f"[specload] {line}", flush=True)
        else:
            log.info("%s", line)

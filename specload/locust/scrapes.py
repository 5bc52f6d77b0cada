"""The master's scrapes of the server's ``/metrics`` during a run: at every step edge and
every ``metrics_interval_s`` between them.

One scrape at each boundary closes the step before (its ``end``) and opens the next (its
``start``), in a greenlet of its own so a slow ``/metrics`` never delays the schedule; the
interval scrapes between them feed the live per-step server figures. A step whose scrape
failed says so in its ``server_notes``; a counter that went backwards (a server restart)
drops that step's server counters with a line on the terminal. GPU memory is sampled with
each scrape when a source exists (``metrics/gpu.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import gevent

from specload.locust.live import LiveStats
from specload.locust.step_plan import TimedStep
from specload.metrics.counters import restarted
from specload.metrics.gpu import GpuMemorySampler
from specload.metrics.scrape import MetricsScraper
from specload.metrics.vllm import step_server_metrics
from specload.recorder.rundir import RunWriter

__all__ = ["PROGRESS_DELAY_S", "StepScrapes"]

#: Seconds after a step's end before its progress line (batches arrive every 0.5 s).
PROGRESS_DELAY_S = 0.8


class StepScrapes:
    """Scrapes of one run, written to its run dir and into ``LiveStats.server``.

    ``current`` is the step being measured (None between steps and after the last);
    ``boundary`` moves it, ``interval_loop`` runs until ``stopped()`` says so.
    """

    def __init__(
        self,
        scraper: MetricsScraper,
        gpu: GpuMemorySampler | None,
        writer: RunWriter,
        live: LiveStats,
        *,
        say: Callable[[str], None],
        guarded: Callable[[Callable[[], None]], None],
        progress: Callable[[int], None],
        by_condition: dict[str, MetricsScraper] | None = None,
    ) -> None:
        self.scraper, self.gpu, self.writer, self.live = scraper, gpu, writer, live
        #: an interleaved session: each condition's server (a block is scraped on its own)
        self.by_condition = by_condition or {}
        self._say, self._guarded, self._progress = say, guarded, progress
        self.current: TimedStep | None = None
        self._scrapes: list[dict[str, float]] = []
        self.edges: list[gevent.Greenlet] = []

    def boundary(self, step: TimedStep | None) -> None:
        """A step edge (``step`` None: the run's end): switch steps now, scrape in the
        background."""
        prev, scrapes = self.current, self._scrapes
        self.current, self._scrapes = step, []
        self.edges.append(gevent.spawn(self._guarded, lambda: self._edge(prev, scrapes, step)))

    def _edge(
        self, prev: TimedStep | None, scrapes: list[dict[str, float]], step: TimedStep | None
    ) -> None:
        """One scrape closes ``prev`` (its ``end``) and opens ``step`` (its ``start``); in an
        interleaved session one of the two is None (a block's edges are scraped apart)."""
        t, values = self.timed_scrape(step or prev)
        if prev is not None:
            if values is not None:
                self.writer.add_metrics(t, prev.index, "end", values)
                scrapes.append(values)
            else:
                self._failed(prev.index, "end")
            if restarted(scrapes):
                self._say(
                    f"step {prev.index + 1} ({prev.target_qps:g} qps): the server restarted "
                    "during this step (its counters went back); its server counters are "
                    "left out"
                )
            self.live.server[prev.index] = step_server_metrics(scrapes).to_dict()
            self.writer.end_step(prev.index, prev.end)
            gevent.spawn_later(PROGRESS_DELAY_S, self._progress, prev.index)
        if step is not None and values is None:
            self._failed(step.index, "start")
        if step is not None and values is not None:
            self.writer.add_metrics(t, step.index, "start", values)
            if step is self.current:
                self._scrapes.insert(0, values)
        scraper = self._scraper(step or prev)
        if scraper.last_error and not scraper.scrapes:
            note = f"no server metrics: {scraper.last_error}"
            if note not in self.writer.meta.notes:
                self.writer.meta.notes.append(note)

    def _failed(self, index: int, phase: str) -> None:
        """Keep why a step has no server figures, or fewer (its ``server_notes``)."""
        why = self._scraper(self.current).last_error or "no answer"
        self.writer.note_step(index, f"the {phase} scrape of /metrics failed: {why}")

    def _scraper(self, step: TimedStep | None) -> MetricsScraper:
        """The server behind ``step``: its block's condition's, else the run's one."""
        return self.by_condition.get(step.condition, self.scraper) if step else self.scraper

    def timed_scrape(self, step: TimedStep | None = None) -> tuple[float, dict[str, float] | None]:
        """``/metrics`` of ``step``'s server, plus GPU memory
        (``specload:gpu_memory_used_mib{gpu}``) when sampled."""
        t, values = self._scraper(step).timed_scrape()
        if self.gpu is not None:
            reading = self.gpu.sample()
            if reading is not None:
                values = {**(values or {}), **reading.as_values()}
            elif self.gpu.errors == 1 and self.gpu.last_error:
                self.writer.meta.notes.append(f"GPU memory sample failed: {self.gpu.last_error}")
        return t, values

    def interval_loop(self, interval_s: float, stopped: Callable[[], bool]) -> None:
        """Scrape every ``interval_s`` (at least 0.5 s) until ``stopped()``."""
        interval = max(0.5, float(interval_s))
        while not stopped():
            gevent.sleep(interval)
            step = self.current
            t, values = self.timed_scrape(step)
            if stopped():
                continue
            if values is None:
                if step is not None:
                    self._failed(step.index, "interval")
                continue
            self.writer.add_metrics(t, step.index if step else None, "interval", values)
            if step is not None and step is self.current:
                self._scrapes.append(values)
                self.live.server[step.index] = step_server_metrics(self._scrapes).to_dict()

    def wait(self, timeout_s: float) -> None:
        """Let the edge scrapes in flight finish (the caller's own greenlet excepted)."""
        me = gevent.getcurrent()
        gevent.joinall([g for g in self.edges if g is not me], timeout=timeout_s)

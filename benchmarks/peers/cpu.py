"""CPU seconds of a client's whole process tree, as a time series.

A load generator is often several processes (Locust's master and workers, guidellm's worker
processes), some of which start and end during the run. A sampler thread reads user + system
seconds of the root and every descendant every ``interval_s``; a process that has ended keeps
the last value read, so the tree's total never goes backwards (the last ``interval_s`` of a
process that exits is lost: the runs here keep their processes for their whole length).
``cpu_between(t0, t1)`` interpolates the cumulative total at two wall-clock times, so the CPU
of one load window can be cut out of a run that also imports, tokenizes and reports.
"""

from __future__ import annotations

import bisect
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import psutil

__all__ = ["TreeCPU", "run_measured"]


class TreeCPU:
    """Samples the CPU of ``pid`` and its descendants until ``stop()``."""

    def __init__(self, pid: int, interval_s: float = 0.25) -> None:
        self.pid = pid
        self.interval_s = interval_s
        self.times: list[float] = []  # wall clock (time.time())
        self.totals: list[float] = []  # cumulative CPU seconds of the tree
        self._last: dict[tuple[int, float], float] = {}  # (pid, create_time) -> cpu s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            procs = []
        for p in procs:
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    key = (p.pid, p.create_time())
                self._last[key] = t.user + t.system
            except psutil.Error:
                continue
        self.times.append(time.time())
        self.totals.append(sum(self._last.values()))

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval_s)

    def stop(self) -> None:
        """Take a last sample and end the thread."""
        self._stop.set()
        self._thread.join(timeout=5)
        self._sample()

    def total_at(self, t: float) -> float:
        """Cumulative CPU seconds at wall time ``t`` (linear between samples)."""
        if not self.times:
            return 0.0
        i = bisect.bisect_left(self.times, t)
        if i == 0:
            return self.totals[0]
        if i >= len(self.times):
            return self.totals[-1]
        t0, t1 = self.times[i - 1], self.times[i]
        c0, c1 = self.totals[i - 1], self.totals[i]
        return c0 + (c1 - c0) * ((t - t0) / (t1 - t0) if t1 > t0 else 1.0)

    def cpu_between(self, t0: float, t1: float) -> float:
        """CPU seconds the tree used between wall times ``t0`` and ``t1``."""
        return max(0.0, self.total_at(t1) - self.total_at(t0))


def run_measured(
    cmd: Sequence[str],
    log: Path,
    timeout_s: float,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> tuple[int, TreeCPU]:
    """Run a client to completion in its own session, sampling its tree's CPU.

    Output goes to ``log``; a client past ``timeout_s`` is killed. Returns the exit code and
    the sampler (stopped), from which each run cuts its load windows.
    """
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            list(cmd),
            cwd=cwd,
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=None if env is None else dict(env),
            start_new_session=True,
        )
        cpu = TreeCPU(proc.pid)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        finally:
            cpu.stop()
    return rc, cpu

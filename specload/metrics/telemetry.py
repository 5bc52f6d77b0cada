"""GPU and host telemetry while a run measures: ``RUN_DIR/telemetry.jsonl`` at 1-2 Hz.

On an H200, vLLM's speculative decode step flips between a fast and a slow regime within
seconds. Three causes look alike from the client: the GPU throttled (SM clock down, a
clock-event reason active), the server's host could not feed the GPU (utilisation down at
full clocks), or specload's own CPU was saturated. Telling them apart needs GPU and host
figures sampled alongside the requests, at a rate finer than the regimes.

- **GPU**, the server's GPUs where they can be read (``metrics/gpu.py``): on the server's host,
  NVML (``specload[gpu]``), else ``nvidia-smi``; else the DCGM exporter of
  ``--gpu-metrics-url``; else none, and the info line says why.
- **Host**, procfs only: whole-host CPU shares from ``/proc/stat`` deltas, the 1-minute load,
  and the load generator's own CPU (this process and its descendants, i.e. Locust's
  ``--processes`` children) from ``/proc/<pid>/stat``. Workers on other hosts are not seen.

The file's line formats are in ``docs/run-dir.md`` ("Run directory");
``analysis/inputs/telemetry.py`` reads it back. Sampling must never slow or break a run: every
source that raises is logged once and stops (a GPU read error after a few in a row), the
rest goes on; NVML's C calls run off the event loop (``offload``).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from specload.core.errors import ConfigError
from specload.metrics.gpu import (
    NOT_ON_THIS_HOST,
    DcgmSource,
    GpuSourceError,
    NvmlSource,
    SmiSource,
    server_on_this_host,
)
from specload.recorder.jsonl import JsonlWriter
from specload.recorder.rundir import TELEMETRY_FILE

__all__ = [
    "DEFAULT_INTERVAL_S",
    "GpuTelemetrySource",
    "HostSampler",
    "TelemetrySampler",
    "loadgen_cores",
    "open_gpu_telemetry",
    "open_host_sampler",
]

log = logging.getLogger("specload")

#: Seconds between samples: finer than the seconds-long fast/slow regimes it must resolve.
DEFAULT_INTERVAL_S = 0.5
#: GPU read errors in a row (an exporter hiccup) before the GPU source stops.
GPU_ERRORS_TO_STOP = 3

#: Runs a blocking call off the event loop and returns its result (gevent's threadpool).
Offload = Callable[[Callable[[], Any]], Any]


class GpuTelemetrySource(Protocol):
    """``NvmlSource``, ``SmiSource`` or ``DcgmSource``: one telemetry dict per GPU per read."""

    kind: str
    blocking: bool

    def telemetry(self) -> list[dict[str, Any]]: ...


# --- GPU -------------------------------------------------------------------------------
def _local_gpu() -> tuple[GpuTelemetrySource | None, list[str]]:
    """NVML, else nvidia-smi; the reasons each was not available."""
    why: list[str] = []
    for make in (NvmlSource, SmiSource):
        try:
            return make(), why
        except GpuSourceError as exc:
            why.append(str(exc))
    return None, why


def open_gpu_telemetry(
    gpu_metrics_url: str | None, target_url: str | None
) -> tuple[GpuTelemetrySource | None, str | None]:
    """The GPU telemetry source for a run and, when there is none, why (one sentence).

    Local GPUs first when the server is on this host (NVML and nvidia-smi read them live;
    an exporter repeats values between its collections), then the DCGM exporter if named.
    Never raises.
    """
    why: list[str] = []
    if server_on_this_host(gpu_metrics_url, target_url):
        source, why = _local_gpu()
        if source is not None:
            return source, None
    if gpu_metrics_url and gpu_metrics_url != "nvml":
        try:
            return DcgmSource(gpu_metrics_url), None
        except ConfigError as exc:
            why.append(str(exc))
    return None, "; ".join(why) or NOT_ON_THIS_HOST


# --- host ------------------------------------------------------------------------------
#: /proc/stat's cpu line, in order (guest time is already inside user and nice).
_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def _cpu_times(proc: Path) -> tuple[int, ...]:
    first = (proc / "stat").read_text().split("\n", 1)[0].split()
    if not first or first[0] != "cpu":
        raise OSError(f"{proc}/stat: no cpu line")
    values = [int(x) for x in first[1 : 1 + len(_CPU_FIELDS)]]
    return tuple(values + [0] * (len(_CPU_FIELDS) - len(values)))


def _cpu_shares(prev: tuple[int, ...], cur: tuple[int, ...]) -> dict[str, float | None]:
    d = dict(zip(_CPU_FIELDS, (c - p for c, p in zip(cur, prev, strict=True)), strict=True))
    total = sum(d.values())

    def pct(*names: str) -> float | None:
        return round(100.0 * sum(d[n] for n in names) / total, 2) if total > 0 else None

    return {
        "cpu_user_pct": pct("user", "nice"),
        "cpu_system_pct": pct("system", "irq", "softirq"),
        "cpu_idle_pct": pct("idle"),
        "cpu_iowait_pct": pct("iowait"),
        "cpu_steal_pct": pct("steal"),
    }


def _load1(proc: Path) -> float | None:
    try:
        return float((proc / "loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def loadgen_cores() -> int | None:
    """Cores this process may run on (its CPU affinity), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


@dataclass(slots=True)
class _ProcTree:
    """CPU ticks (utime + stime) of a process and its descendants, read from procfs."""

    proc: Path
    root: int

    def _stat(self, pid: int) -> tuple[int, int] | None:
        """``(ppid, utime + stime)``; None for a process that is gone."""
        try:
            raw = (self.proc / str(pid) / "stat").read_bytes()
        except OSError:
            return None
        rest = raw[raw.rindex(b")") + 2 :].split()  # comm may hold spaces and parentheses
        return int(rest[1]), int(rest[11]) + int(rest[12])

    def _children(self, pid: int) -> list[int] | None:
        """Children from ``task/*/children`` (None where the kernel has no such file)."""
        try:
            tids = os.listdir(self.proc / str(pid) / "task")
        except OSError:
            return []
        kids: list[int] = []
        for tid in tids:
            try:
                text = (self.proc / str(pid) / "task" / tid / "children").read_text()
            except FileNotFoundError:
                return None
            except OSError:
                continue
            kids.extend(int(x) for x in text.split())
        return kids

    def _scan_children(self) -> dict[int, list[int]]:
        """Every process's children, from each ``/proc/<pid>/stat``'s ppid (the fallback)."""
        tree: dict[int, list[int]] = {}
        for name in os.listdir(self.proc):
            if name.isdigit() and (st := self._stat(int(name))) is not None:
                tree.setdefault(st[0], []).append(int(name))
        return tree

    def pids(self) -> list[int]:
        """The root and all its descendants, alive now."""
        scanned: dict[int, list[int]] | None = None
        out, todo = [], [self.root]
        while todo:
            pid = todo.pop()
            out.append(pid)
            kids = self._children(pid) if scanned is None else scanned.get(pid, [])
            if kids is None:
                scanned = self._scan_children()
                kids = scanned.get(pid, [])
            todo.extend(kids)
        return out

    def ticks(self) -> dict[int, int]:
        return {pid: st[1] for pid in self.pids() if (st := self._stat(pid)) is not None}


class HostSampler:
    """Host CPU shares and the load generator's CPU since the previous ``sample()``.

    The constructor takes the first reading, so the first sample covers the time since.
    Raises ``OSError`` when procfs is not there (not Linux): the host part is then none.
    """

    kind = "procfs"

    def __init__(self, *, proc: Path = Path("/proc"), pid: int | None = None) -> None:
        self._proc = proc
        self._tree = _ProcTree(proc, pid if pid is not None else os.getpid())
        self._hz = float(os.sysconf("SC_CLK_TCK"))
        self._cores = loadgen_cores()
        self._cpu = _cpu_times(proc)
        self._ticks = self._tree.ticks()
        self._at = time.monotonic()

    def _loadgen_pct(self, ticks: dict[int, int], dt: float) -> float | None:
        """% of one core, summed over the process tree; a new process counts from zero."""
        if dt <= 0:
            return None
        used = sum(t - self._ticks.get(pid, 0) for pid, t in ticks.items())
        return round(100.0 * max(used, 0) / self._hz / dt, 2)

    def sample(self) -> dict[str, Any]:
        """The host fields of one ``telemetry.jsonl`` line (without ``t`` and ``source``)."""
        cpu, ticks, now = _cpu_times(self._proc), self._tree.ticks(), time.monotonic()
        line: dict[str, Any] = {
            **_cpu_shares(self._cpu, cpu),
            "load1": _load1(self._proc),
            "loadgen_cpu_pct": self._loadgen_pct(ticks, now - self._at),
            "loadgen_cores": self._cores,
        }
        self._cpu, self._ticks, self._at = cpu, ticks, now
        return line


def open_host_sampler(proc: Path = Path("/proc")) -> tuple[HostSampler | None, str | None]:
    """A procfs host sampler, or None and why (no procfs here). Never raises."""
    try:
        return HostSampler(proc=proc), None
    except (OSError, ValueError) as exc:
        return None, f"no procfs ({exc})"


# --- the sampler -----------------------------------------------------------------------
class TelemetrySampler:
    """Writes ``RUN_DIR/telemetry.jsonl``: the info line at once, then a host line and one
    line per GPU every ``interval_s`` while ``run`` loops, until ``close``.

    Owned by the master's ``RunSession``; ``run(sleep)`` is its greenlet (``sleep`` is
    ``gevent.sleep`` there). ``offload`` runs NVML's blocking calls (gevent's threadpool).
    """

    def __init__(
        self,
        run_dir: Path,
        gpu: tuple[GpuTelemetrySource | None, str | None],
        host: tuple[HostSampler | None, str | None],
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        offload: Offload | None = None,
    ) -> None:
        (self._gpu, self._gpu_why), (self._host, self._host_why) = gpu, host
        self.interval_s = interval_s
        self._offload = offload
        self._gpu_errors = 0
        self.stopped: list[str] = []  # one sentence per source that stopped
        self._writer = JsonlWriter(Path(run_dir) / TELEMETRY_FILE, buffer_lines=64)
        self._writer.write(self._info_line())
        self._writer.flush()

    @classmethod
    def open(
        cls,
        run_dir: Path,
        gpu_metrics_url: str | None,
        target_url: str | None,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        offload: Offload | None = None,
    ) -> TelemetrySampler:
        """The sources this host allows, for a server at ``target_url``."""
        gpu = open_gpu_telemetry(gpu_metrics_url, target_url)
        return cls(run_dir, gpu, open_host_sampler(), interval_s=interval_s, offload=offload)

    def _info_line(self) -> dict[str, Any]:
        return {
            "t": time.time(),
            "source": "info",
            "gpu": self._gpu.kind if self._gpu else None,
            "gpu_why_none": self._gpu_why,
            "host": HostSampler.kind if self._host else None,
            "host_why_none": self._host_why,
            "interval_s": self.interval_s,
        }

    def summary(self) -> dict[str, Any]:
        """run.json's ``telemetry``: what is sampled (or was, until a source stopped)."""
        info = self._info_line()
        out = {k: info[k] for k in ("gpu", "host", "interval_s")}
        if self._gpu_why:
            out["gpu_why_none"] = self._gpu_why
        if self.stopped:
            out["stopped"] = list(self.stopped)
        return out

    @property
    def closed(self) -> bool:
        return self._writer.closed

    def _stop(self, what: str, exc: BaseException) -> None:
        why = f"{what} telemetry stopped: {type(exc).__name__}: {exc}"
        log.warning("%s", why)
        self.stopped.append(why)

    def _sample_host(self, t: float) -> None:
        if self._host is None:
            return
        try:
            self._writer.write({"t": t, "source": "host", **self._host.sample()})
        except Exception as exc:  # noqa: BLE001 -- telemetry never breaks a run
            self._host = None
            self._stop("host", exc)

    def _read_gpu(self, gpu: GpuTelemetrySource) -> list[dict[str, Any]]:
        if gpu.blocking and self._offload is not None:
            return list(self._offload(gpu.telemetry))
        return gpu.telemetry()

    def _sample_gpu(self, t: float) -> None:
        if self._gpu is None:
            return
        try:
            devices = self._read_gpu(self._gpu)
        except GpuSourceError as exc:
            self._gpu_errors += 1
            if self._gpu_errors >= GPU_ERRORS_TO_STOP:
                self._gpu = None
                self._stop("GPU", exc)
            return
        except Exception as exc:  # noqa: BLE001 -- telemetry never breaks a run
            self._gpu = None
            self._stop("GPU", exc)
            return
        self._gpu_errors = 0
        if self.closed:  # the run ended while the read waited
            return
        for device in devices:
            self._writer.write({"t": t, "source": "gpu", **device})

    def sample(self) -> None:
        """One round: a host line and the GPU lines, stamped with one time, then flushed."""
        if self.closed:
            return
        t = time.time()
        self._sample_host(t)
        self._sample_gpu(t)
        self._writer.flush()  # a no-op once closed

    def run(self, sleep: Callable[[float], object] = time.sleep) -> None:
        """Sample every ``interval_s`` until ``close``; a late round is not made up for.

        The first round comes one interval in: a host sample is a delta since the previous
        reading, and one taken right after the first would cover a few clock ticks.
        """
        if self._gpu is None and self._host is None:
            return
        due = time.monotonic()
        while not self.closed:
            due = max(due + self.interval_s, time.monotonic())
            sleep(max(0.0, due - time.monotonic()))
            self.sample()

    def close(self) -> dict[str, Any]:
        """Flush and fsync the file (the run's end, interrupted runs too); ``summary()``."""
        try:
            self._writer.close()
        except OSError as exc:
            self._stop("file", exc)
        return self.summary()

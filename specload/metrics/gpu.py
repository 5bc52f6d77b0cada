"""GPU memory while the load runs: what speculative decoding costs in memory, per step.

Model-based drafting loads draft weights and extra KV; more drafted tokens shrink the KV
budget. The protocol asks for GPU memory next to TTFT/TPOT. Two sources, never a guess:

- **NVML** (``nvidia-ml-py``, optional extra ``specload[gpu]``) when the load generator runs on
  the GPU host, i.e. when the target URL is this machine (loopback or a local host name) or
  the user says ``--gpu-metrics-url nvml``. A remote server's GPUs are not this host's GPUs.
- **DCGM exporter** (``--gpu-metrics-url http://host:9400/metrics``): its
  ``DCGM_FI_DEV_FB_USED`` gauge, framebuffer memory used in MiB, one sample per GPU labelled
  ``gpu`` (index) and ``UUID``.

When neither is available, ``open_gpu_source`` returns ``None`` and a sentence saying why, for
``run.json``'s notes; the report then says "not sampled" instead of showing a number.

``GpuMemorySampler`` is called by the master's metrics loop: ``sample()`` at each scrape,
``take_peak()`` at each step end (peak MiB since the last take). Readings can also be merged
into a ``metrics.jsonl`` line as ``specload:gpu_memory_used_mib{gpu="0"}`` keys (a gauge:
compare takes the max over a step, like ``kv_cache_usage_perc``). A failing source never
breaks a run: the sampler counts the failure and keeps its last error.

The same sources also give the 1-2 Hz GPU telemetry of ``metrics/telemetry.py`` (``telemetry()``:
utilisation, power, clocks, temperature, memory and the active clock-event reasons, one dict
per GPU), plus ``SmiSource``: ``nvidia-smi`` as a subprocess, for a GPU host without
``nvidia-ml-py``. The clock-event (throttle) reason bits are one bitmask in NVML, DCGM and
nvidia-smi alike; ``clock_event_names`` decodes it.
"""

from __future__ import annotations

import importlib
import math
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

from specload.core.errors import ConfigError

__all__ = [
    "CLOCK_EVENT_BITS",
    "DCGM_FB_USED",
    "GPU_MEMORY_KEY",
    "NOT_ON_THIS_HOST",
    "DcgmSource",
    "GpuMemoryPeak",
    "GpuMemoryReading",
    "GpuMemorySampler",
    "GpuMemorySource",
    "GpuSourceError",
    "NvmlSource",
    "SmiSource",
    "clock_event_names",
    "exporter_samples",
    "gpu_source_kind",
    "open_gpu_source",
    "parse_smi_csv",
    "peak_from_values",
    "server_on_this_host",
]

#: The DCGM exporter's framebuffer-used gauge (MiB).
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"
#: Name under which readings are merged into ``metrics.jsonl`` values (MiB, label ``gpu``).
GPU_MEMORY_KEY = "specload:gpu_memory_used_mib"

_MIB = 1024 * 1024

#: Clock-event ("throttle") reason bits, as NVML (``nvmlClocksEventReason*``), DCGM
#: (``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS``) and nvidia-smi (``clocks_event_reasons.active``)
#: report them: why the SM clock is below its maximum right now.
CLOCK_EVENT_BITS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
_KNOWN_BITS = sum(CLOCK_EVENT_BITS)

#: DCGM gauge -> GPU telemetry key (``NvmlSource.telemetry`` keys).
_DCGM_TELEMETRY = {
    "DCGM_FI_DEV_GPU_UTIL": "util_pct",
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_DEV_SM_CLOCK": "sm_clock_mhz",
    "DCGM_FI_DEV_MEM_CLOCK": "mem_clock_mhz",
    "DCGM_FI_DEV_GPU_TEMP": "temp_c",
    DCGM_FB_USED: "mem_used_mib",
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": "clock_events",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": "clock_events",
}


def clock_event_names(mask: int | None) -> list[str] | None:
    """The reason names set in ``mask`` (``None`` stays unknown); unknown bits as hex."""
    if mask is None:
        return None
    names = [name for bit, name in CLOCK_EVENT_BITS.items() if mask & bit]
    if rest := mask & ~_KNOWN_BITS:
        names.append(f"0x{rest:x}")
    return names


def _device_line(gpu: int | str) -> dict[str, Any]:
    """A GPU telemetry dict with every field unknown (what a source cannot read stays None)."""
    return {
        "gpu": gpu,
        "util_pct": None,
        "power_w": None,
        "sm_clock_mhz": None,
        "mem_clock_mhz": None,
        "temp_c": None,
        "clock_events": None,
        "mem_used_mib": None,
    }


def _gpu_id(label: str) -> int | str:
    return int(label) if label.isdigit() else label


def _gpu_order(label: str) -> tuple[bool, int, str]:
    """GPU indexes in numeric order, then any UUID-only labels."""
    return (not label.isdigit(), int(label) if label.isdigit() else 0, label)


class GpuSourceError(Exception):
    """A GPU memory source could not be read; the message says which and why (one line)."""


@dataclass(frozen=True, slots=True)
class GpuMemoryReading:
    """Memory used per GPU at one instant. ``used_mib`` keys are GPU indexes as strings."""

    t: float
    used_mib: dict[str, float]
    source: str

    @property
    def total_mib(self) -> float:
        """Sum over the GPUs read (tensor-parallel servers span several)."""
        return float(sum(self.used_mib.values()))

    def as_values(self) -> dict[str, float]:
        """``{'specload:gpu_memory_used_mib{gpu="0"}': MiB}`` for a ``metrics.jsonl`` line."""
        return {f'{GPU_MEMORY_KEY}{{gpu="{gpu}"}}': mib for gpu, mib in self.used_mib.items()}


@dataclass(frozen=True, slots=True)
class GpuMemoryPeak:
    """The largest readings over a window (a step): total and per GPU, in MiB."""

    peak_total_mib: float
    peak_per_gpu_mib: dict[str, float]
    samples: int
    source: str


class GpuMemorySource(Protocol):
    """Anything that reads GPU memory now. ``describe`` is a short phrase for run notes."""

    describe: str

    def read(self) -> GpuMemoryReading: ...


def _keep(gpu: str, uuid: str | None, gpus: frozenset[str] | None) -> bool:
    return gpus is None or gpu in gpus or (uuid is not None and uuid in gpus)


class DcgmSource:
    """Scrapes a DCGM exporter's ``/metrics`` for ``DCGM_FI_DEV_FB_USED`` (MiB per GPU).

    ``gpus`` keeps only the GPUs whose ``gpu`` index or ``UUID`` label is listed, for a node
    whose other GPUs serve something else.
    """

    def __init__(
        self, url: str, *, gpus: Iterable[str] | None = None, timeout_s: float = 2.0
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(
                f"{url!r} is not an http(s) URL "
                "(expected e.g. http://gpu-node:9400/metrics, or 'nvml')",
                path="--gpu-metrics-url",
            )
        self.url = url
        self.describe = f"DCGM exporter {url}"
        self.kind = "dcgm"
        self.blocking = False  # urllib: cooperative under gevent
        self._gpus = frozenset(gpus) if gpus is not None else None
        self._timeout_s = timeout_s

    def read(self) -> GpuMemoryReading:
        used: dict[str, float] = {}
        for s in exporter_samples(self.url, self._timeout_s):
            if s.name != DCGM_FB_USED or not math.isfinite(s.value):
                continue
            gpu = s.labels.get("gpu") or s.labels.get("UUID") or str(len(used))
            if _keep(gpu, s.labels.get("UUID"), self._gpus):
                used[gpu] = used.get(gpu, 0.0) + float(s.value)
        if not used:
            raise GpuSourceError(
                f"{self.url}: no {DCGM_FB_USED} sample"
                + (" for the GPUs asked" if self._gpus else "")
            )
        return GpuMemoryReading(t=time.time(), used_mib=used, source="dcgm")

    def telemetry(self) -> list[dict[str, Any]]:
        """One telemetry dict per GPU from the exporter's gauges (``_DCGM_TELEMETRY``).

        The exporter refreshes its values every collection interval (``-c``, 30 s by default
        in dcgm-exporter): sampling faster repeats values unless it is started with ``-c 500``.
        """
        devices: dict[str, dict[str, Any]] = {}
        for s in exporter_samples(self.url, self._timeout_s):
            key = _DCGM_TELEMETRY.get(s.name)
            if key is None or not math.isfinite(s.value):
                continue
            gpu = s.labels.get("gpu") or s.labels.get("UUID") or "0"
            if not _keep(gpu, s.labels.get("UUID"), self._gpus):
                continue
            line = devices.setdefault(gpu, _device_line(_gpu_id(gpu)))
            value = float(s.value)
            line[key] = clock_event_names(int(value)) if key == "clock_events" else value
        if not devices:
            raise GpuSourceError(f"{self.url}: no DCGM GPU gauges (utilisation, clocks, power)")
        return [devices[g] for g in sorted(devices, key=_gpu_order)]


class NvmlSource:
    """Local GPUs through NVML (``pynvml`` from ``nvidia-ml-py``); bytes converted to MiB."""

    describe = "NVML (local GPUs)"
    kind = "nvml"
    #: NVML calls are C calls gevent cannot interleave: run them off the event loop.
    blocking = True

    def __init__(self, *, gpus: Iterable[str] | None = None) -> None:
        try:
            pynvml: Any = importlib.import_module("pynvml")  # optional: specload[gpu]
        except ImportError as exc:
            raise GpuSourceError(
                "NVML unavailable: nvidia-ml-py is not installed (pip install 'specload[gpu]')"
            ) from exc
        try:
            pynvml.nvmlInit()
            count = int(pynvml.nvmlDeviceGetCount())
        except pynvml.NVMLError as exc:
            raise GpuSourceError(f"NVML unavailable: {exc} (no NVIDIA driver here?)") from exc
        self._nvml: Any = pynvml
        wanted = frozenset(gpus) if gpus is not None else None
        self._handles: dict[str, Any] = {}
        for i in range(count):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            uuid = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
            if _keep(str(i), uuid, wanted):
                self._handles[str(i)] = handle
        if not self._handles:
            raise GpuSourceError(
                f"NVML: none of the {count} local GPUs matches {sorted(wanted or ())}"
            )

    def _used_bytes(self, handle: Any) -> float:
        """Used memory without the driver's reservation (v2 API), as nvidia-smi and DCGM
        ``FB_USED`` report it; the v1 API (older bindings) counts the reservation as used."""
        nvml = self._nvml
        v2 = getattr(nvml, "nvmlMemory_v2", None)
        if v2 is not None:
            try:
                return float(nvml.nvmlDeviceGetMemoryInfo(handle, version=v2).used)
            except (TypeError, nvml.NVMLError):
                pass  # driver or binding without v2: fall back
        return float(nvml.nvmlDeviceGetMemoryInfo(handle).used)

    def read(self) -> GpuMemoryReading:
        try:
            used = {gpu: self._used_bytes(h) / _MIB for gpu, h in self._handles.items()}
        except self._nvml.NVMLError as exc:
            raise GpuSourceError(f"NVML read failed: {exc}") from exc
        return GpuMemoryReading(t=time.time(), used_mib=used, source="nvml")

    def telemetry(self) -> list[dict[str, Any]]:
        """One telemetry dict per GPU; a field this GPU or driver does not support is None."""
        return [self._device_telemetry(int(gpu), h) for gpu, h in self._handles.items()]

    def _query(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except self._nvml.NVMLError:
            return None

    def _device_telemetry(self, gpu: int, h: Any) -> dict[str, Any]:
        nvml, q = self._nvml, self._query
        util = q(nvml.nvmlDeviceGetUtilizationRates, h)
        power_mw = q(nvml.nvmlDeviceGetPowerUsage, h)
        used = q(self._used_bytes, h)
        reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        mask = q(reasons, h) if reasons is not None else None
        return {
            **_device_line(gpu),
            "util_pct": float(util.gpu) if util is not None else None,
            "power_w": power_mw / 1000.0 if power_mw is not None else None,
            "sm_clock_mhz": q(nvml.nvmlDeviceGetClockInfo, h, getattr(nvml, "NVML_CLOCK_SM", 1)),
            "mem_clock_mhz": q(nvml.nvmlDeviceGetClockInfo, h, getattr(nvml, "NVML_CLOCK_MEM", 2)),
            "temp_c": q(nvml.nvmlDeviceGetTemperature, h, getattr(nvml, "NVML_TEMPERATURE_GPU", 0)),
            "clock_events": clock_event_names(int(mask)) if mask is not None else None,
            "mem_used_mib": used / _MIB if used is not None else None,
        }


#: ``nvidia-smi --query-gpu`` fields, in ``_device_line`` order (after the index).
_SMI_FIELDS = (
    ("utilization.gpu", "util_pct"),
    ("power.draw", "power_w"),
    ("clocks.sm", "sm_clock_mhz"),
    ("clocks.mem", "mem_clock_mhz"),
    ("temperature.gpu", "temp_c"),
    ("memory.used", "mem_used_mib"),
)
#: The active clock-event reasons field: renamed in driver 535; older drivers know the first.
_SMI_EVENT_FIELDS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")


def _smi_number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None  # "[N/A]", "[Not Supported]"
    return value if math.isfinite(value) else None


def parse_smi_csv(text: str, *, with_events: bool) -> list[dict[str, Any]]:
    """``nvidia-smi --query-gpu=index,<_SMI_FIELDS>[,<event field>] --format=csv,noheader,
    nounits`` output, one telemetry dict per GPU; unreadable values are None."""
    out: list[dict[str, Any]] = []
    for row in text.strip().splitlines():
        cells = [c.strip() for c in row.split(",")]
        if len(cells) < 1 + len(_SMI_FIELDS) + with_events or not cells[0].isdigit():
            continue
        line = _device_line(int(cells[0]))
        for (_, key), cell in zip(_SMI_FIELDS, cells[1:], strict=False):
            line[key] = _smi_number(cell)
        if with_events:
            try:
                line["clock_events"] = clock_event_names(int(cells[1 + len(_SMI_FIELDS)], 16))
            except ValueError:
                pass
        out.append(line)
    return out


class SmiSource:
    """Local GPUs through ``nvidia-smi --query-gpu`` (one subprocess per read), for a GPU host
    without ``nvidia-ml-py``. A subprocess is cooperative under gevent (patched ``subprocess``),
    so it never stalls the Locust loop, only costs ~0.1 s of its own per read."""

    describe = "nvidia-smi (local GPUs)"
    kind = "nvidia-smi"
    blocking = False

    def __init__(self, *, binary: str = "nvidia-smi", timeout_s: float = 5.0) -> None:
        path = shutil.which(binary)
        if path is None:
            raise GpuSourceError(f"{binary} is not on PATH")
        self._path, self._timeout_s = path, timeout_s
        self._event_field: str | None = None
        why = f"{binary}: no GPU listed"
        for field_name in (*_SMI_EVENT_FIELDS, None):  # the newest field this driver knows
            self._event_field = field_name
            try:
                if self.telemetry():
                    return
            except GpuSourceError as exc:
                why = str(exc)
        raise GpuSourceError(why)

    def telemetry(self) -> list[dict[str, Any]]:
        fields = ["index", *(f for f, _ in _SMI_FIELDS)]
        if self._event_field:
            fields.append(self._event_field)
        cmd = [self._path, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=self._timeout_s, check=False
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise GpuSourceError(f"nvidia-smi failed: {exc}") from exc
        if proc.returncode != 0:
            first = (proc.stderr or proc.stdout).strip().splitlines()[:1]
            raise GpuSourceError(f"nvidia-smi exited {proc.returncode}: {' '.join(first)}")
        return parse_smi_csv(proc.stdout, with_events=self._event_field is not None)


def server_on_this_host(gpu_metrics_url: str | None, target_url: str | None) -> bool:
    """Are this host's GPUs the server's? The target is this machine, or the user said so
    (``--gpu-metrics-url nvml``)."""
    return gpu_metrics_url == "nvml" or _is_local(target_url)


def _is_local(url: str | None) -> bool:
    """Does ``url`` point at this machine (so local GPUs are the server's GPUs)?"""
    if not url:
        return False
    host = (urlsplit(url).hostname or "").lower()
    if host in ("localhost", "127.0.0.1", "::1", "0.0.0.0") or host.startswith("127."):
        return True
    return host in {socket.gethostname().lower(), socket.getfqdn().lower()}


#: Why the server's GPUs are not read: they are not this host's and no exporter was named.
NOT_ON_THIS_HOST = (
    "the server is not on this host and no --gpu-metrics-url (DCGM exporter) was given"
)


def gpu_source_kind(gpu_metrics_url: str | None, target_url: str | None) -> str | None:
    """Where the server's GPUs are read, one rule for memory sampling and the host
    fingerprint: ``"dcgm"`` for an exporter URL, ``"nvml"`` when the server is on this host
    (or the user says ``nvml``), ``None`` when neither (see ``NOT_ON_THIS_HOST``)."""
    if gpu_metrics_url and gpu_metrics_url != "nvml":
        return "dcgm"
    if gpu_metrics_url is None and not _is_local(target_url):
        return None
    return "nvml"


def exporter_samples(url: str, timeout_s: float) -> list[Any]:
    """Every sample of a DCGM exporter's ``/metrics`` (prometheus_client ``Sample``s);
    ``GpuSourceError`` naming the URL when it is unreachable or not Prometheus text."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            text = bytes(resp.read()).decode("utf-8", errors="replace")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise GpuSourceError(f"{url}: unreachable ({exc})") from exc
    try:
        return [s for family in text_string_to_metric_families(text) for s in family.samples]
    except ValueError as exc:
        raise GpuSourceError(f"{url}: not Prometheus text ({exc})") from exc


def open_gpu_source(
    gpu_metrics_url: str | None,
    target_url: str | None = None,
    *,
    gpus: Iterable[str] | None = None,
) -> tuple[GpuMemorySource | None, str]:
    """The GPU memory source for a run, and a sentence for ``run.json`` notes.

    ``gpu_metrics_url``: an http(s) DCGM exporter URL, ``"nvml"`` to force NVML, or ``None``:
    NVML only when ``target_url`` is this machine. Returns ``(None, reason)`` when nothing can
    be sampled. A malformed URL is a ``ConfigError``; an unreachable exporter is not (it is
    stated, and the run goes on).
    """
    kind = gpu_source_kind(gpu_metrics_url, target_url)
    if kind == "dcgm" and gpu_metrics_url:
        return DcgmSource(
            gpu_metrics_url, gpus=gpus
        ), f"GPU memory from DCGM exporter {gpu_metrics_url}"
    if kind is None:
        return None, f"GPU memory not sampled: {NOT_ON_THIS_HOST}"
    try:
        return NvmlSource(gpus=gpus), "GPU memory from NVML (load generator on the GPU host)"
    except GpuSourceError as exc:
        return None, f"GPU memory not sampled: {exc}"


@dataclass
class GpuMemorySampler:
    """Samples a source and keeps the peak per window; never raises out of ``sample()``."""

    source: GpuMemorySource
    errors: int = 0
    last_error: str | None = None
    _peak_total: float = field(default=-1.0, repr=False)
    _peak_gpu: dict[str, float] = field(default_factory=dict, repr=False)
    _samples: int = field(default=0, repr=False)

    def sample(self) -> GpuMemoryReading | None:
        """Read once and fold into the current window's peak; ``None`` on failure."""
        try:
            reading = self.source.read()
        except GpuSourceError as exc:
            self.errors += 1
            self.last_error = str(exc)
            return None
        self._samples += 1
        self._peak_total = max(self._peak_total, reading.total_mib)
        for gpu, mib in reading.used_mib.items():
            self._peak_gpu[gpu] = max(self._peak_gpu.get(gpu, mib), mib)
        return reading

    def take_peak(self) -> GpuMemoryPeak | None:
        """Peak since the last call (``None`` if nothing was read), and start a new window."""
        if not self._samples:
            return None
        peak = GpuMemoryPeak(
            peak_total_mib=self._peak_total,
            peak_per_gpu_mib=dict(self._peak_gpu),
            samples=self._samples,
            source=self.source.describe,
        )
        self._peak_total, self._peak_gpu, self._samples = -1.0, {}, 0
        return peak


def peak_from_values(scrapes: Iterable[Mapping[str, float]]) -> float | None:
    """Peak total GPU memory (MiB) over ``metrics.jsonl`` value dicts; ``None`` if never sampled.

    Each scrape's ``specload:gpu_memory_used_mib{gpu=...}`` values are summed over GPUs, then
    the max over scrapes is taken: what analysis reports per step and condition.
    """
    best: float | None = None
    for values in scrapes:
        total = [v for k, v in values.items() if k.startswith(GPU_MEMORY_KEY)]
        if total:
            best = max(best if best is not None else -math.inf, float(sum(total)))
    return best

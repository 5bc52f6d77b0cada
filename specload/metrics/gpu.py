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
"""

from __future__ import annotations

import importlib
import math
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

from specload.errors import ConfigError

__all__ = [
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
    "exporter_samples",
    "gpu_source_kind",
    "open_gpu_source",
    "peak_from_values",
]

#: The DCGM exporter's framebuffer-used gauge (MiB).
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"
#: Name under which readings are merged into ``metrics.jsonl`` values (MiB, label ``gpu``).
GPU_MEMORY_KEY = "specload:gpu_memory_used_mib"

_MIB = 1024 * 1024


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


class NvmlSource:
    """Local GPUs through NVML (``pynvml`` from ``nvidia-ml-py``); bytes converted to MiB."""

    describe = "NVML (local GPUs)"

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

"""Where a number came from: the host fingerprint in run.json (``host``) and its differences.

Two starts of the same server on two hosts of the same kind gave speculative decoding a 20 %
win on one and nothing on the other (docs/gpu-validation.md): the speculative decode step is sensitive to
the host's CPU launch overhead in a way the baseline is not. So every run records what it ran
on, and ``host_differences`` names what differs between runs before anyone compares them
(facts, ``HostDifference``: ``report/compare_words.py`` words them).

``fingerprint(target_url, gpu_metrics_url)`` describes the machine specload (the Locust master)
runs on: CPU model and logical count, load average at the start (``load_avg_end`` is filled
when the run finishes: a busy load generator shows there), kernel, Python, hostname; and the
server's GPUs where they can be read: NVML when the server is on this host (or
``--gpu-metrics-url nvml``), else the labels and gauges of a DCGM exporter
(``--gpu-metrics-url URL``). ``gpu`` is ``None`` with ``gpu_unavailable`` saying why.
Nothing here raises: a fingerprint that cannot be taken is stated, never fatal.
"""

from __future__ import annotations

import importlib
import os
import platform
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from specload.metrics.gpu import (
    NOT_ON_THIS_HOST,
    GpuSourceError,
    exporter_samples,
    gpu_source_kind,
)

__all__ = ["DIFF_FIELDS", "HostDifference", "fingerprint", "host_differences", "load_avg"]

#: Seconds a DCGM exporter may take to answer.
DCGM_TIMEOUT_S = 2.0

#: DCGM gauge → device key (clocks in MHz, power limit in W).
_DCGM_VALUES = {
    "DCGM_FI_DEV_SM_CLOCK": "sm_clock_mhz",
    "DCGM_FI_DEV_MEM_CLOCK": "mem_clock_mhz",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": "power_limit_w",
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": "power_limit_w",
}
#: DCGM label → device key.
_DCGM_LABELS = {
    "modelName": "name",
    "DCGM_FI_DRIVER_VERSION": "driver_version",
    "driver_version": "driver_version",
    "UUID": "uuid",
    "Hostname": "hostname",
}


# --- the fingerprint -------------------------------------------------------------------
def load_avg() -> list[float] | None:
    """1, 5 and 15 minute load averages (None where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def cpu_model() -> str | None:
    """The CPU's marketing name (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Hardware", "Processor") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or None


def fingerprint(
    target_url: str | None = None, gpu_metrics_url: str | None = None
) -> dict[str, Any]:
    """run.json's ``host`` at the start of a run (``load_avg_end`` still None)."""
    gpu, why = gpu_info(target_url, gpu_metrics_url)
    return {
        "hostname": socket.gethostname() or None,
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "load_avg_start": load_avg(),
        "load_avg_end": None,
        "kernel": platform.release() or None,
        "python": platform.python_version(),
        "gpu": gpu,
        "gpu_unavailable": why,
    }


def gpu_info(
    target_url: str | None, gpu_metrics_url: str | None
) -> tuple[dict[str, Any] | None, str | None]:
    """The server's GPUs (``{"source", "name", "driver_version", "power_limit_w", "devices"}``)
    or ``(None, why)``; the same source rule as GPU memory sampling (``metrics/gpu.py``)."""
    kind = gpu_source_kind(gpu_metrics_url, target_url)
    if kind == "dcgm" and gpu_metrics_url:
        return _dcgm(gpu_metrics_url)
    if kind is None:
        return None, NOT_ON_THIS_HOST
    return _nvml()


def _summary(source: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    """Device list plus the fields runs are compared on (one value, or distinct ones joined)."""
    out: dict[str, Any] = {"source": source, "count": len(devices)}
    for key in ("name", "driver_version", "power_limit_w"):
        values = [d.get(key) for d in devices if d.get(key) is not None]
        distinct = list(dict.fromkeys(values))
        out[key] = (
            distinct[0]
            if len(distinct) == 1
            else " / ".join(map(str, distinct))
            if distinct
            else None
        )
    out["devices"] = devices
    return out


def _nvml() -> tuple[dict[str, Any] | None, str | None]:
    try:
        nvml: Any = importlib.import_module("pynvml")  # optional: specload[gpu]
    except ImportError:
        return None, "NVML unavailable: nvidia-ml-py is not installed (pip install 'specload[gpu]')"
    try:
        nvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 -- NVMLError and friends: no driver here
        return None, f"NVML unavailable: {exc} (no NVIDIA driver here?)"
    try:
        driver = _text(_try(nvml.nvmlSystemGetDriverVersion))
        count = int(nvml.nvmlDeviceGetCount())
        devices = [_nvml_device(nvml, i, driver) for i in range(count)]
    except Exception as exc:  # noqa: BLE001 -- a failing read is stated, not fatal
        return None, f"NVML read failed: {exc}"
    finally:
        _try(nvml.nvmlShutdown)
    if not devices:
        return None, "NVML sees no GPU on this host"
    return _summary("nvml", devices), None


def _nvml_device(nvml: Any, index: int, driver: str | None) -> dict[str, Any]:
    h = nvml.nvmlDeviceGetHandleByIndex(index)
    sm, mem = getattr(nvml, "NVML_CLOCK_SM", 1), getattr(nvml, "NVML_CLOCK_MEM", 2)
    limit_mw = _try(nvml.nvmlDeviceGetPowerManagementLimit, h)
    return {
        "index": str(index),
        "name": _text(_try(nvml.nvmlDeviceGetName, h)),
        "uuid": _text(_try(nvml.nvmlDeviceGetUUID, h)),
        "driver_version": driver,
        "sm_clock_mhz": _try(nvml.nvmlDeviceGetClockInfo, h, sm),
        "mem_clock_mhz": _try(nvml.nvmlDeviceGetClockInfo, h, mem),
        "sm_clock_max_mhz": _try(nvml.nvmlDeviceGetMaxClockInfo, h, sm),
        "mem_clock_max_mhz": _try(nvml.nvmlDeviceGetMaxClockInfo, h, mem),
        "power_limit_w": None if limit_mw is None else round(float(limit_mw) / 1000.0, 1),
    }


def _try(fn: Any, *args: Any) -> Any:
    """One NVML call; None when this GPU or binding does not support it."""
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 -- NVMLError_NotSupported and the like
        return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def _dcgm(url: str) -> tuple[dict[str, Any] | None, str | None]:
    try:
        samples = exporter_samples(url, DCGM_TIMEOUT_S)
    except GpuSourceError as exc:
        return None, f"DCGM exporter {exc}"
    devices: dict[str, dict[str, Any]] = {}
    for s in samples:
        gpu = s.labels.get("gpu") or s.labels.get("UUID")
        if gpu is None or not s.name.startswith("DCGM_FI_"):
            continue
        d = devices.setdefault(gpu, {"index": gpu})
        for label, key in _DCGM_LABELS.items():
            if s.labels.get(label):
                d.setdefault(key, s.labels[label])
        if s.name in _DCGM_VALUES:
            d.setdefault(_DCGM_VALUES[s.name], float(s.value))
    if not devices:
        return None, f"DCGM exporter {url} lists no GPU"
    return _summary(f"dcgm {url}", [devices[k] for k in sorted(devices)]), None


def finish(host: dict[str, Any] | None) -> None:
    """Fill ``load_avg_end`` in a fingerprint at the end of the run."""
    if host is not None:
        host["load_avg_end"] = load_avg()


# --- differences between runs ----------------------------------------------------------
#: (the field's name, where in run.json, what differs when it does: ``hosts`` or
#: ``server versions``).
DIFF_FIELDS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("hostname", ("host", "hostname"), "hosts"),
    ("cpu_model", ("host", "cpu_model"), "hosts"),
    ("cpu_count", ("host", "cpu_count"), "hosts"),
    ("kernel", ("host", "kernel"), "hosts"),
    ("gpu", ("host", "gpu", "name"), "hosts"),
    ("gpu driver", ("host", "gpu", "driver_version"), "hosts"),
    ("gpu power limit", ("host", "gpu", "power_limit_w"), "hosts"),
    ("server_version", ("target", "server_version"), "server versions"),
)


def _get(meta: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = meta
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _names(metas: Sequence[dict[str, Any]], names: Sequence[str] | None) -> list[str]:
    if names is not None:
        return list(names)
    labels = [str(m.get("label") or m.get("run_id") or f"run {i + 1}") for i, m in enumerate(metas)]
    if len(set(labels)) == len(labels):
        return labels
    return [str(m.get("run_id") or labels[i]) for i, m in enumerate(metas)]


@dataclass(frozen=True, slots=True)
class HostDifference:
    """One field (``DIFF_FIELDS``) in which runs differ: each value with the runs that had
    it, values in the order first seen."""

    #: the field's name ("hostname", "gpu driver", "server_version", ...)
    field: str
    #: what differs: "hosts" or "server versions"
    kind: str
    values: tuple[tuple[Any, tuple[str, ...]], ...]


def host_differences(
    metas: Sequence[dict[str, Any]], names: Sequence[str] | None = None
) -> list[HostDifference]:
    """Each field that differs between runs' run.json dicts (``metas``).

    ``names`` name the runs (default: labels, or run ids where labels repeat). A run without
    a value for a field (older run.json, no GPU readable) is left out of that field: missing
    is not a difference.
    """
    who = _names(metas, names)
    out: list[HostDifference] = []
    for label, path, kind in DIFF_FIELDS:
        groups: dict[Any, list[str]] = {}
        for name, meta in zip(who, metas, strict=True):
            value = _get(meta, path)
            if value is not None and value != "":
                groups.setdefault(value, []).append(name)
        if len(groups) > 1:
            out.append(HostDifference(label, kind, tuple((v, tuple(n)) for v, n in groups.items())))
    return out

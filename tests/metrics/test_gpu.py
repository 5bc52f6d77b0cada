"""GPU memory sources: a real HTTP server on loopback serving literal DCGM exporter text."""

from __future__ import annotations

from pathlib import Path

import pytest

from specload.core.errors import ConfigError
from specload.metrics.gpu import (
    DcgmSource,
    GpuMemorySampler,
    GpuSourceError,
    NvmlSource,
    open_gpu_source,
    peak_from_values,
)
from tests.conftest import DCGM_TEXT, FakeExporter

UUID_1 = "GPU-9a17e3c2-6b5d-44f0-a1e8-0d2c7b9f6e55"


def with_used(gpu0: int, gpu1: int) -> str:
    """The fixture with other framebuffer-used values (MiB)."""
    return DCGM_TEXT.replace("} 130493\n", f"}} {gpu0}\n").replace("} 130237\n", f"}} {gpu1}\n")


def test_dcgm_scrape_reads_framebuffer_used_per_gpu_in_mib(exporter: FakeExporter) -> None:
    reading = DcgmSource(exporter.url).read()
    assert reading.source == "dcgm"
    assert reading.used_mib == {"0": 130493.0, "1": 130237.0}
    assert reading.total_mib == 130493.0 + 130237.0
    assert exporter.requests == ["/metrics"]


def test_dcgm_scrape_keeps_only_the_gpus_asked_by_index_or_uuid(exporter: FakeExporter) -> None:
    assert DcgmSource(exporter.url, gpus=["0"]).read().used_mib == {"0": 130493.0}
    assert DcgmSource(exporter.url, gpus=[UUID_1]).read().used_mib == {"1": 130237.0}


def test_sampler_reports_the_peak_per_step_and_starts_over(exporter: FakeExporter) -> None:
    sampler = GpuMemorySampler(DcgmSource(exporter.url))
    for gpu0, gpu1 in [(1000, 2000), (5000, 1500), (3000, 2500)]:
        exporter.body = with_used(gpu0, gpu1)
        assert sampler.sample() is not None
    peak = sampler.take_peak()
    assert peak is not None
    assert peak.peak_total_mib == 6500.0  # 5000 + 1500: the largest simultaneous total
    assert peak.peak_per_gpu_mib == {"0": 5000.0, "1": 2500.0}
    assert peak.samples == 3
    assert "DCGM exporter" in peak.source
    assert sampler.take_peak() is None  # a new step with no samples yet
    exporter.body = with_used(700, 800)
    sampler.sample()
    second = sampler.take_peak()
    assert second is not None and second.peak_total_mib == 1500.0


def test_readings_merge_into_metrics_lines_and_peak_back_out(exporter: FakeExporter) -> None:
    sampler = GpuMemorySampler(DcgmSource(exporter.url))
    lines = []
    for gpu0, gpu1 in [(100, 200), (400, 300)]:
        exporter.body = with_used(gpu0, gpu1)
        reading = sampler.sample()
        assert reading is not None
        lines.append({"vllm:num_requests_running": 3.0, **reading.as_values()})
    assert 'specload:gpu_memory_used_mib{gpu="0"}' in lines[0]
    assert peak_from_values(lines) == 700.0
    assert peak_from_values([{"vllm:num_requests_running": 1.0}]) is None


def test_exporter_without_framebuffer_metric_is_stated_not_guessed(exporter: FakeExporter) -> None:
    exporter.body = (
        "\n".join(line for line in DCGM_TEXT.splitlines() if "FB_USED" not in line) + "\n"
    )
    with pytest.raises(GpuSourceError, match="no DCGM_FI_DEV_FB_USED"):
        DcgmSource(exporter.url).read()
    sampler = GpuMemorySampler(DcgmSource(exporter.url))
    assert sampler.sample() is None
    assert sampler.errors == 1 and "DCGM_FI_DEV_FB_USED" in (sampler.last_error or "")
    assert sampler.take_peak() is None


def test_garbage_from_the_exporter_is_an_error_not_a_crash(exporter: FakeExporter) -> None:
    exporter.body = "this is { not prometheus\n"
    sampler = GpuMemorySampler(DcgmSource(exporter.url))
    assert sampler.sample() is None
    assert sampler.errors == 1


def test_unreachable_exporter_does_not_break_sampling(exporter: FakeExporter) -> None:
    dead = exporter.url.replace("/metrics", "/nothing-here")
    sampler = GpuMemorySampler(DcgmSource(dead, timeout_s=1.0))
    assert sampler.sample() is None
    assert "unreachable" in (sampler.last_error or "")


def test_a_gpu_metrics_url_selects_dcgm(exporter: FakeExporter) -> None:
    source, note = open_gpu_source(exporter.url, "http://far-away-host:8000")
    assert isinstance(source, DcgmSource)
    assert exporter.url in note


def test_remote_server_without_exporter_url_is_not_sampled() -> None:
    source, note = open_gpu_source(None, "http://inference.example.net:8000")
    assert source is None
    assert note.startswith("GPU memory not sampled") and "--gpu-metrics-url" in note


def test_nvml_absence_is_stated_for_a_local_server() -> None:
    try:
        NvmlSource()
    except GpuSourceError:
        pass
    else:
        pytest.skip("this machine has a working NVML; the absent-source path cannot be shown")
    source, note = open_gpu_source(None, "http://127.0.0.1:8000")
    assert source is None
    assert note.startswith("GPU memory not sampled: NVML unavailable")


def test_malformed_gpu_metrics_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="--gpu-metrics-url"):
        open_gpu_source("gpu-node:9400", None)


REPO = Path(__file__).resolve().parent.parent.parent


def test_specload_run_records_gpu_memory_from_the_exporter_per_step(
    exporter: FakeExporter, sim, tmp_path: Path
) -> None:
    """End to end: real Locust run against the simulator, GPU memory from the fake exporter."""
    import json
    import subprocess
    import sys

    from specload.analysis.compare import compare_runs

    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "specload",
            "run",
            "--host",
            sim.url,
            "--label",
            "baseline",
            "--scenario",
            str(REPO / "scenarios" / "smoke.yaml"),
            "--out",
            str(out),
            "--gpu-metrics-url",
            exporter.url,
        ],
        capture_output=True,
        check=False,
        text=True,
        cwd=REPO,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    meta = json.loads((out / "run.json").read_text())
    assert any(f"GPU memory from DCGM exporter {exporter.url}" in n for n in meta["notes"])
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert lines and all(
        x["values"]['specload:gpu_memory_used_mib{gpu="0"}'] == 130493.0 for x in lines
    )
    assert len(exporter.requests) >= 3  # sampled at each step edge and on the interval
    steps = compare_runs([out], bootstrap=20).steps["baseline"]
    assert steps and all(
        s.server is not None and s.server.gpu_memory_mib_max == 130493.0 + 130237.0 for s in steps
    )


def test_specload_run_rejects_a_malformed_gpu_metrics_url_before_any_traffic(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "specload",
            "run",
            "--host",
            "http://127.0.0.1:9",
            "--label",
            "b",
            "--scenario",
            str(REPO / "scenarios" / "smoke.yaml"),
            "--out",
            str(tmp_path / "r"),
            "--gpu-metrics-url",
            "gpu-node:9400",
        ],
        capture_output=True,
        check=False,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "--gpu-metrics-url" in proc.stderr and "Traceback" not in proc.stderr

"""Host fingerprint (run.json ``host``) and the differences between runs' hosts.

This machine is read for real (CPU, load, kernel; NVML where installed); a DCGM exporter is a
real HTTP server on loopback serving the literal exporter text of ``tests/fixtures``.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path

from specload.metrics.host import HostDifference, fingerprint, host_differences
from specload.recorder import read_run
from tests.conftest import FakeExporter, free_port


def test_fingerprint_describes_this_machine() -> None:
    fp = fingerprint("http://127.0.0.1:8000", None)
    assert fp["hostname"] == socket.gethostname()
    assert fp["cpu_count"] == os.cpu_count() and fp["cpu_count"] >= 1
    assert isinstance(fp["cpu_model"], str) and fp["cpu_model"]
    assert fp["kernel"] == platform.release() and fp["python"] == platform.python_version()
    load = fp["load_avg_start"]
    assert len(load) == 3 and all(isinstance(x, float) and x >= 0 for x in load)
    assert fp["load_avg_end"] is None  # filled when a run ends
    if importlib.util.find_spec("pynvml") is None:  # this machine: no NVML, stated
        assert fp["gpu"] is None and "nvidia-ml-py is not installed" in fp["gpu_unavailable"]
    else:
        assert fp["gpu"] is not None or fp["gpu_unavailable"]


def test_a_remote_server_without_exporter_has_no_gpu_and_says_why() -> None:
    fp = fingerprint("http://gpu-node.example:8000", None)
    assert fp["gpu"] is None and "not on this host" in fp["gpu_unavailable"]


def test_gpu_from_a_dcgm_exporter_reads_its_labels_and_clocks(exporter: FakeExporter) -> None:
    gpu = fingerprint("http://gpu-node.example:8000", exporter.url)["gpu"]
    assert gpu["source"] == f"dcgm {exporter.url}" and gpu["count"] == 2
    assert gpu["name"] == "NVIDIA H200" and gpu["driver_version"] == "570.124.06"
    assert gpu["power_limit_w"] is None  # the exporter does not expose it: not guessed
    d0 = gpu["devices"][0]
    assert d0["index"] == "0" and d0["sm_clock_mhz"] == 1980 and d0["mem_clock_mhz"] == 2619
    assert d0["hostname"] == "gpu-node-7" and d0["uuid"].startswith("GPU-5c0fd0d4")


def test_an_unreachable_exporter_gives_no_gpu_and_the_reason() -> None:
    url = f"http://127.0.0.1:{free_port()}/metrics"
    fp = fingerprint("http://gpu-node.example:8000", url)
    assert fp["gpu"] is None and url in fp["gpu_unavailable"]


def _meta(
    label: str,
    hostname: str | None,
    version: str | None,
    gpu: str | None = "H200",
    cpus: int | None = 64,
) -> dict:
    host = {
        "hostname": hostname,
        "cpu_model": "Xeon",
        "cpu_count": cpus,
        "kernel": "6.8",
        "gpu": None
        if gpu is None
        else {"name": gpu, "driver_version": "570", "power_limit_w": 700.0},
    }
    return {"label": label, "host": host, "target": {"server_version": version}}


def test_host_differences_name_each_differing_field_and_its_runs() -> None:
    metas = [
        _meta("baseline-1", "gpu-a", "0.26.0"),
        _meta("spec-1", "gpu-a", "0.26.0"),
        _meta("baseline-2", "gpu-b", "0.27.0", cpus=None),
    ]
    assert host_differences(metas) == [
        HostDifference(
            "hostname", "hosts", (("gpu-a", ("baseline-1", "spec-1")), ("gpu-b", ("baseline-2",)))
        ),
        HostDifference(
            "server_version",
            "server versions",
            (("0.26.0", ("baseline-1", "spec-1")), ("0.27.0", ("baseline-2",))),
        ),
    ]  # cpu_count missing in baseline-2: not a difference


def test_missing_fields_are_not_differences_and_same_hosts_give_none() -> None:
    same = [_meta("a", "gpu-a", "0.26.0"), _meta("b", "gpu-a", "0.26.0")]
    assert host_differences(same) == []
    older = [
        _meta("a", "gpu-a", "0.26.0"),
        {"label": "b", "target": {}},
        _meta("c", None, None, gpu=None),
    ]
    assert host_differences(older) == []
    gpus = [_meta("a", "h", "1", gpu="H200"), _meta("b", "h", "1", gpu="H100")]
    assert host_differences(gpus) == [
        HostDifference("gpu", "hosts", (("H200", ("a",)), ("H100", ("b",))))
    ]


def test_repeated_labels_are_told_apart_by_run_id() -> None:
    metas = [
        {**_meta("baseline", "gpu-a", "1"), "run_id": "r1"},
        {**_meta("baseline", "gpu-b", "1"), "run_id": "r2"},
    ]
    assert host_differences(metas) == [
        HostDifference("hostname", "hosts", (("gpu-a", ("r1",)), ("gpu-b", ("r2",))))
    ]


def test_a_real_run_records_its_host_with_load_at_the_end(sim, tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "name: host\nmax_tokens: 8\nsteps: [4]\nstep_duration_s: 1\n"
        "warmup_s: 0\nmax_concurrency: 4\n"
        "prompts:\n  synthetic: {input_tokens: 16, count: 4}\n"
    )
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "specload",
            "run",
            "--host",
            sim.url,
            "--scenario",
            str(scenario),
            "--label",
            "h",
            "--out",
            "out",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    host = read_run(tmp_path / "out").meta.host
    assert host["hostname"] == socket.gethostname() and host["cpu_count"] == os.cpu_count()
    assert len(host["load_avg_start"]) == 3 and len(host["load_avg_end"]) == 3
    assert "gpu" in host and (host["gpu"] is not None or host["gpu_unavailable"])

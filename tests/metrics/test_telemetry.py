"""GPU and host telemetry (``metrics/telemetry.py``): procfs in-process and on a fake /proc
tree, GPU sources on this GPU-less machine (none, with the reason), a fake DCGM exporter on
loopback, a fake ``nvidia-smi`` on PATH, a fake ``pynvml``, and one ``specload run``."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from specload.analysis.inputs.telemetry import per_second, read_telemetry, step_telemetry
from specload.metrics import telemetry as tm
from specload.metrics.gpu import (
    NOT_ON_THIS_HOST,
    DcgmSource,
    GpuSourceError,
    NvmlSource,
    SmiSource,
    clock_event_names,
    parse_smi_csv,
)
from specload.metrics.telemetry import (
    HostSampler,
    TelemetrySampler,
    open_gpu_telemetry,
    open_host_sampler,
)
from specload.recorder import read_run
from tests.conftest import DCGM_TEXT, REPO, FakeExporter

HOST_KEYS = {"cpu_user_pct", "cpu_system_pct", "cpu_idle_pct", "cpu_iowait_pct", "cpu_steal_pct"}
#: Clock-event reasons for the fixture's two GPUs: 0x4 sw_power_cap | 0x1 gpu_idle, and none.
REASONS = (
    "# TYPE DCGM_FI_DEV_CLOCK_THROTTLE_REASONS gauge\n"
    'DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{gpu="0",UUID="GPU-a"} 5\n'
    'DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{gpu="1",UUID="GPU-b"} 0\n'
)


def _lines(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run_dir / "telemetry.jsonl").read_text().splitlines()]


def _burn_cpu(seconds: float) -> None:
    """Spend ``seconds`` of this process's CPU time (CPU time, not wall-clock time)."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        sum(i * i for i in range(1000))


# --- host: procfs ----------------------------------------------------------------------
@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="no procfs here")
def test_procfs_host_lines_are_sane_in_process() -> None:
    host = HostSampler()
    _burn_cpu(0.05)
    line = host.sample()
    assert HOST_KEYS <= set(line)
    shares = [line[k] for k in HOST_KEYS]
    assert all(v is not None and 0.0 <= v <= 100.0 for v in shares)
    assert sum(shares) == pytest.approx(100.0, abs=0.1)
    assert line["loadgen_cpu_pct"] > 0.0  # this process burnt CPU since the first reading
    assert line["loadgen_cores"] >= 1
    assert line["load1"] is not None and line["load1"] >= 0.0


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="no procfs here")
def test_the_load_generator_includes_its_child_processes() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        tree = tm._ProcTree(Path("/proc"), os.getpid())
        assert {os.getpid(), child.pid} <= set(tree.pids())

        class NoChildrenFiles(tm._ProcTree):  # a kernel without task/*/children
            def _children(self, pid: int) -> list[int] | None:
                return None

        assert child.pid in NoChildrenFiles(Path("/proc"), os.getpid()).pids()
    finally:
        child.kill()
        child.wait()


def _fake_proc(root: Path, cpu: list[int], ticks: dict[int, tuple[int, int]]) -> None:
    """A /proc with ``stat``, ``loadavg`` and ``pid -> (ppid, utime+stime)`` processes."""
    root.mkdir(exist_ok=True)
    (root / "stat").write_text("cpu  " + " ".join(map(str, cpu)) + " 0 0\ncpu0 1 2 3\n")
    (root / "loadavg").write_text("3.50 2.00 1.00 2/345 6789\n")
    for pid, (ppid, t) in ticks.items():
        d = root / str(pid)
        (d / "task" / str(pid)).mkdir(parents=True, exist_ok=True)
        fields = ["S", str(ppid), *["0"] * 9, str(t), "0", *["0"] * 30]
        (d / "stat").write_text(f"{pid} (my (odd) name) " + " ".join(fields) + "\n")
        kids = [str(c) for c, (pp, _) in ticks.items() if pp == pid]
        (d / "task" / str(pid) / "children").write_text(" ".join(kids) + (" " if kids else ""))


def test_host_shares_and_loadgen_cpu_from_a_fake_proc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proc = tmp_path / "proc"
    # user nice system idle iowait irq softirq steal
    _fake_proc(proc, [100, 0, 50, 800, 10, 0, 0, 40], {100: (1, 500), 101: (100, 200)})
    clock = iter([10.0, 12.0])
    monkeypatch.setattr(tm.time, "monotonic", lambda: next(clock))
    host = HostSampler(proc=proc, pid=100)
    # +1000 ticks: user 300, system 100, idle 400, iowait 100, steal 100; the tree +400
    # (pid 100 +100, pid 101 +200, and a new child 102 with 100 of its own)
    _fake_proc(
        proc,
        [400, 0, 150, 1200, 110, 0, 0, 140],
        {100: (1, 600), 101: (100, 400), 102: (100, 100), 999: (1, 10_000)},
    )
    line = host.sample()
    assert line["cpu_user_pct"] == 30.0 and line["cpu_system_pct"] == 10.0
    assert line["cpu_idle_pct"] == 40.0 and line["cpu_iowait_pct"] == 10.0
    assert line["cpu_steal_pct"] == 10.0
    assert line["load1"] == 3.5
    hz = os.sysconf("SC_CLK_TCK")
    assert line["loadgen_cpu_pct"] == pytest.approx(100.0 * 400 / hz / 2.0, abs=0.01)


def test_no_procfs_means_no_host_part(tmp_path: Path) -> None:
    sampler, why = open_host_sampler(tmp_path / "nothing")
    assert sampler is None and why and "procfs" in why


# --- GPU: absent here ------------------------------------------------------------------
def test_the_gpu_source_falls_back_to_none_with_a_reason(tmp_path: Path) -> None:
    if importlib.util.find_spec("pynvml") is not None or shutil.which("nvidia-smi"):
        pytest.skip("this machine has NVML or nvidia-smi; the absent-source path cannot be shown")
    source, why = open_gpu_telemetry(None, "http://127.0.0.1:8000")
    assert source is None
    assert why and "nvidia-ml-py" in why and "nvidia-smi" in why
    assert open_gpu_telemetry(None, "http://far.example.net:8000") == (None, NOT_ON_THIS_HOST)
    sampler = TelemetrySampler.open(tmp_path, None, "http://127.0.0.1:8000")
    summary = sampler.close()
    info = _lines(tmp_path)[0]
    assert info["source"] == "info" and info["gpu"] is None and info["gpu_why_none"] == why
    assert summary["gpu"] is None and summary["gpu_why_none"] == why


# --- GPU: DCGM exporter ----------------------------------------------------------------
def test_dcgm_telemetry_from_a_fake_exporter(exporter: FakeExporter, tmp_path: Path) -> None:
    exporter.body = DCGM_TEXT + REASONS
    source, why = open_gpu_telemetry(exporter.url, "http://gpu-node.example.net:8000")
    assert isinstance(source, DcgmSource) and why is None
    gpus = source.telemetry()
    assert [g["gpu"] for g in gpus] == [0, 1]
    assert gpus[0]["util_pct"] == 87.0 and gpus[1]["util_pct"] == 85.0
    assert gpus[0]["power_w"] == 312.481 and gpus[0]["sm_clock_mhz"] == 1980.0
    assert gpus[0]["mem_clock_mhz"] == 2619.0 and gpus[0]["temp_c"] == 41.0
    assert gpus[0]["mem_used_mib"] == 130493.0
    assert gpus[0]["clock_events"] == ["gpu_idle", "sw_power_cap"]
    assert gpus[1]["clock_events"] == []

    sampler = TelemetrySampler(tmp_path, (source, None), (None, "none"))
    sampler.sample()
    assert sampler.close() == {"gpu": "dcgm", "host": None, "interval_s": 0.5}
    lines = read_telemetry(tmp_path)
    assert [x["source"] for x in lines] == ["info", "gpu", "gpu"]
    (second,) = per_second(lines).values()
    assert second.gpu_util_pct == 86.0 and second.sm_clock_mhz == 1980.0
    assert second.power_w == pytest.approx(312.481 + 298.102)
    assert second.clock_events == ("sw_power_cap",)  # gpu_idle is not a slowdown


def test_an_exporter_without_gpu_gauges_is_an_error(exporter: FakeExporter) -> None:
    exporter.body = "# TYPE up gauge\nup 1\n"
    with pytest.raises(GpuSourceError, match="no DCGM GPU gauges"):
        DcgmSource(exporter.url).telemetry()


# --- GPU: nvidia-smi and NVML without a GPU --------------------------------------------
SMI_CSV = "0, 68, 310.52, 1980, 3201, 45, 81234, 0x0000000000000004\n1, [N/A], 300.00, 1755, 3201, 44, 81000, 0x0000000000000000\n"  # noqa: E501


def test_nvidia_smi_csv_is_parsed_with_unknowns_as_null() -> None:
    a, b = parse_smi_csv(SMI_CSV, with_events=True)
    assert a == {
        "gpu": 0,
        "util_pct": 68.0,
        "power_w": 310.52,
        "sm_clock_mhz": 1980.0,
        "mem_clock_mhz": 3201.0,
        "temp_c": 45.0,
        "clock_events": ["sw_power_cap"],
        "mem_used_mib": 81234.0,
    }
    assert b["util_pct"] is None and b["clock_events"] == []
    assert parse_smi_csv("No devices were found\n", with_events=False) == []


def test_a_fake_nvidia_smi_on_path_is_used_and_its_older_field_name_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An older driver knows only ``clocks_throttle_reasons.active``: the source finds it."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        f"#!{sys.executable}\nimport sys\n"
        "if 'clocks_event_reasons' in sys.argv[1]:\n"
        "    print('Field \"clocks_event_reasons.active\" is not a valid field to query.')\n"
        "    sys.exit(2)\n"
        f"print({SMI_CSV!r}, end='')\n"
    )
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    source = SmiSource()
    assert source.kind == "nvidia-smi"
    assert [g["clock_events"] for g in source.telemetry()] == [["sw_power_cap"], []]


class _FakeNvml(types.ModuleType):
    """Enough of ``pynvml`` for one GPU, as NVML answers on an H200 capped in power."""

    class NVMLError(Exception):
        pass

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self) -> None:
        super().__init__("pynvml")
        self.nvmlInit = lambda: None
        self.nvmlDeviceGetCount = lambda: 1
        self.nvmlDeviceGetHandleByIndex = lambda i: f"h{i}"
        self.nvmlDeviceGetUUID = lambda h: b"GPU-1"
        self.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=2 * 1024**3)
        self.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=68, memory=20)
        self.nvmlDeviceGetPowerUsage = lambda h: 310_500
        self.nvmlDeviceGetClockInfo = lambda h, kind: {1: 1755, 2: 3201}[kind]
        self.nvmlDeviceGetCurrentClocksEventReasons = lambda h: 0x4 | 0x40

    def nvmlDeviceGetTemperature(self, h: str, sensor: int) -> int:
        raise self.NVMLError("Not Supported")


def test_nvml_telemetry_decodes_clock_event_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _FakeNvml())
    (gpu,) = NvmlSource().telemetry()
    assert gpu == {
        "gpu": 0,
        "util_pct": 68.0,
        "power_w": 310.5,
        "sm_clock_mhz": 1755,
        "mem_clock_mhz": 3201,
        "temp_c": None,  # not supported: unknown, not a failure
        "clock_events": ["sw_power_cap", "hw_thermal_slowdown"],
        "mem_used_mib": 2048.0,
    }
    source, why = open_gpu_telemetry(None, "http://localhost:8000")
    assert isinstance(source, NvmlSource) and source.blocking and why is None
    assert clock_event_names(0x201) == ["gpu_idle", "0x200"]


# --- the sampler: never breaks a run ---------------------------------------------------
class _Gpu:
    """A GPU source that answers, or raises what it is given."""

    kind = "nvml"

    def __init__(self, fail: list[BaseException | None], *, blocking: bool = False) -> None:
        self.fail, self.blocking, self.reads = fail, blocking, 0

    def telemetry(self) -> list[dict[str, Any]]:
        self.reads += 1
        exc = self.fail.pop(0) if self.fail else None
        if exc is not None:
            raise exc
        return [{"gpu": 0, "util_pct": 50.0, "sm_clock_mhz": 1980.0}]


def _gpu_lines(run_dir: Path) -> int:
    return sum(1 for x in _lines(run_dir) if x["source"] == "gpu")


def test_a_failing_gpu_source_stops_once_and_the_host_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gpu = _Gpu([RuntimeError("driver gone")])
    sampler = TelemetrySampler(tmp_path, (gpu, None), open_host_sampler())
    for _ in range(3):
        sampler.sample()
    summary = sampler.close()
    assert gpu.reads == 1 and _gpu_lines(tmp_path) == 0
    assert summary["stopped"] == ["GPU telemetry stopped: RuntimeError: driver gone"]
    assert sum("driver gone" in r.getMessage() for r in caplog.records) == 1
    if Path("/proc/stat").exists():
        assert sum(1 for x in _lines(tmp_path) if x["source"] == "host") == 3


def test_gpu_read_errors_stop_the_source_only_when_they_persist(tmp_path: Path) -> None:
    err = GpuSourceError("exporter timed out")
    gpu = _Gpu([err, err, None, err, err, err])
    sampler = TelemetrySampler(tmp_path, (gpu, None), (None, None))
    for _ in range(8):
        sampler.sample()
    sampler.close()
    assert gpu.reads == 6 and _gpu_lines(tmp_path) == 1
    assert sampler.summary()["stopped"] == [
        "GPU telemetry stopped: GpuSourceError: exporter timed out"
    ]  # noqa: E501


def test_blocking_reads_go_through_offload_and_run_loops_until_closed(tmp_path: Path) -> None:
    offloaded: list[Callable[[], Any]] = []

    def offload(fn: Callable[[], Any]) -> Any:
        offloaded.append(fn)
        return fn()

    sampler = TelemetrySampler(
        tmp_path, (_Gpu([], blocking=True), None), (None, None), offload=offload
    )
    sleeps: list[float] = []

    def sleep(s: float) -> None:  # the loop's clock: closed during the fourth wait
        sleeps.append(s)
        if len(sleeps) == 4:
            sampler.close()

    sampler.run(sleep)
    assert len(offloaded) == 3 and _gpu_lines(tmp_path) == 3  # a round after each wait
    assert all(s >= 0.0 for s in sleeps)
    sampler.sample()  # after close: nothing, no error
    assert _gpu_lines(tmp_path) == 3


def test_the_telemetry_schema_accepts_the_summary(tmp_path: Path) -> None:
    from specload.recorder.run_json import validate_run_json

    sampler = TelemetrySampler(tmp_path, (_Gpu([RuntimeError("x")]), None), (None, "no procfs"))
    sampler.sample()
    meta = {"label": "a", "telemetry": sampler.close()}
    assert validate_run_json(meta, "run.json") is meta


# --- end to end ------------------------------------------------------------------------
@pytest.mark.slow
def test_specload_run_leaves_telemetry_per_second_and_per_step(
    exporter: FakeExporter, sim, tmp_path: Path
) -> None:
    """A real ``specload run`` against the simulator: an info line, host lines through the
    run, GPU lines from the fake exporter (NVML where this machine has a GPU), run.json's
    ``telemetry``, and every measured step summarised."""
    exporter.body = DCGM_TEXT + REASONS
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "specload", "run", "--host", sim.url, "--label", "base"]
    cmd += ["--scenario", str(REPO / "scenarios" / "smoke.yaml"), "--out", str(out)]
    cmd += ["--gpu-metrics-url", exporter.url]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = read_run(out)
    lines = run.telemetry()
    assert lines[0]["source"] == "info" and lines[0]["host"] == "procfs"
    assert lines[0]["gpu"] in ("dcgm", "nvml", "nvidia-smi")
    hosts = [x for x in lines if x["source"] == "host"]
    assert len(hosts) >= 4 and all(x["loadgen_cores"] >= 1 for x in hosts)
    assert any(x["source"] == "gpu" for x in lines)
    assert run.meta.telemetry["host"] == "procfs"
    assert run.meta.telemetry["gpu"] == lines[0]["gpu"]
    per_step = step_telemetry(lines, run.steps)
    assert set(per_step) == {s["index"] for s in run.steps}
    assert all(s.seconds >= 1 and s.host_busy_pct is not None for s in per_step.values())

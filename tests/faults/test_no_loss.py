"""Nothing lost, nothing exposed: the fault-matrix rows of records at the end of a run,
durable run files, a run directory in use, and figures that must not mislead.

Two rows are real distributed runs (``specload run --processes 2``) with one worker paused by
SIGSTOP: across the end of the run, and while the run is stopped with Ctrl-C. The others are
in-process: a power cut, two vLLM engines and a step of the wall clock cannot be made real on
a test box, so each checks the one code path that decides (its row says what was injected).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest

from specload.recorder import RunMeta, RunWriter, read_run
from specload.recorder.rundir import LOCK_NAME
from tests.client.rawserver import raw_server, sse_response
from tests.client.test_stream_client import DONE, chunk
from tests.conftest import free_port
from tests.faults.matrix import (
    Row,
    check_records,
    check_report,
    run_specload,
    start_run,
    wait_for_step,
    write_scenario,
)
from tests.faults.test_matrix import _workers_of
from tests.locust.runcheck import ground_truth

#: Locust's own line when a worker's heartbeats stop (``locust.runners``, INFO).
MISSING = "failed to send heartbeat, setting state to missing"
#: specload's master noting a worker gone (``ledger.mark_lost``): Locust's own line comes
#: first, and a worker resumed on it may be back before the master looks (a race on CI).
MARKED_LOST = "lost at"


def _wait_for_log(run_dir: Path, needle: str, timeout_s: float = 60) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        log = run_dir / "locust.log"
        if log.exists() and needle in log.read_text(errors="replace"):
            return
        time.sleep(0.05)
    raise TimeoutError(f"{needle!r} not in locust.log within {timeout_s} s")


@pytest.mark.slow
def test_worker_paused_across_the_end_of_the_run(
    sim_factory, tmp_path: Path, matrix_row: Row
) -> None:
    """SIGSTOP to one worker just before the last step ends; SIGCONT once the master has
    marked it missing, after the end. The master waits for its last batch and final counts:
    every request the server saw has its record, and the worker is not called lost."""
    row = matrix_row
    row.fault = "worker paused across the end of the run"
    row.injected = (
        "specload run --processes 2; SIGSTOP to one worker 0.3 s before the last step ends, "
        "SIGCONT once the master has marked it missing (after the end)"
    )
    sim = sim_factory("--profile", "tiny", "--ground-truth")
    scenario = write_scenario(tmp_path, steps="[4, 8]", duration=2.0)
    proc = start_run(sim.url, scenario, tmp_path, "--processes", "2")
    run_dir = tmp_path / "out"
    try:
        victim = _workers_of(proc, 2)[0]
        end = wait_for_step(run_dir, 1)["end"]
        time.sleep(max(0.0, end - 0.3 - time.time()))
        victim.suspend()
        try:
            _wait_for_log(run_dir, MARKED_LOST)
        finally:
            victim.resume()
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    row.exit_code = proc.returncode
    assert proc.returncode == 0, err.decode()[-2000:]
    truth = set(ground_truth(sim.url))
    check_records(row, run_dir, status="completed", allowed={"ok"}, server_ids=truth)
    meta = read_run(run_dir).meta
    assert meta.counts["unrecorded"] == 0 and meta.lost_workers == []
    assert any("came back with its final counts" in n for n in meta.notes), meta.notes
    row.note = (
        "marked missing after the end; the master waited for it (DRAIN_WAIT_S = 10 s) and "
        "took its last batch and final counts: every request the server saw has its record"
    )
    check_report(row, run_dir, tmp_path / "report")


@pytest.mark.slow
def test_ctrl_c_while_a_worker_is_paused(sim_factory, tmp_path: Path, matrix_row: Row) -> None:
    """Ctrl-C while a worker is paused (and already marked missing): the stop waits for
    every worker of the run, not only the connected ones; the worker comes back, cancels
    what it had in flight and hands in its records."""
    row = matrix_row
    row.fault = "Ctrl-C while a worker is paused"
    row.injected = (
        "specload run --processes 2; SIGSTOP to one worker 1 s into a step, SIGINT to "
        "`specload run` once it is marked missing, SIGCONT 1.5 s later"
    )
    sim = sim_factory("--profile", "tiny", "--ground-truth")
    scenario = write_scenario(tmp_path, steps="[8]", duration=30, timeout=20, max_tokens=160)
    proc = start_run(sim.url, scenario, tmp_path, "--processes", "2")
    run_dir = tmp_path / "out"
    try:
        victim = _workers_of(proc, 2)[0]
        start = wait_for_step(run_dir)["start"]
        time.sleep(max(0.0, start + 1.0 - time.time()))
        victim.suspend()
        try:
            _wait_for_log(run_dir, MISSING)
            proc.send_signal(signal.SIGINT)
            time.sleep(1.5)  # longer than the master once waited, and only for connected ones
        finally:
            victim.resume()
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    row.exit_code = proc.returncode
    assert proc.returncode == 130, err.decode()[-2000:]
    truth = set(ground_truth(sim.url))
    check_records(row, run_dir, status="interrupted", allowed={"ok", "cancelled"}, server_ids=truth)
    assert read_run(run_dir).meta.counts["unrecorded"] == 0
    row.note = "the paused worker's records, cancelled ones included, all reached the run"
    check_report(row, run_dir, tmp_path / "report")


def test_run_dir_in_use_by_another_run(tmp_path: Path, matrix_row: Row) -> None:
    """A second ``specload run`` with the ``--out`` of a run in progress (its writer holds the
    directory's lock) fails at once with one line naming the directory, exit 2, and leaves
    the first run's files alone."""
    row = matrix_row
    row.fault = "two runs given one --out"
    row.injected = f"another writer holds {LOCK_NAME} (flock) in the run directory"
    out = tmp_path / "out"
    out.mkdir()
    (out / "requests.jsonl").write_bytes(b'{"request_id": "first"}\n')
    scenario = write_scenario(tmp_path)
    with open(out / LOCK_NAME, "a+b") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        res = run_specload(
            "run", "--host", f"http://127.0.0.1:{free_port()}", "--scenario", str(scenario),
            "--label", "fault", "--out", str(out), "--skip-preflight", cwd=tmp_path,
        )  # fmt: skip
    row.exit_code = res.returncode
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    assert lines[0].startswith("specload run: error: out: in use"), lines  # from cwd
    assert (out / "requests.jsonl").read_bytes() == b'{"request_id": "first"}\n'
    assert not (out / "run.json").exists()
    said = lines[0].replace(str(out), "OUT")
    row.status, row.note = "refused", f"one line, `{said}`; nothing written"


def test_power_loss_while_run_json_is_rewritten(
    tmp_path: Path, matrix_row: Row, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every rewrite of run.json and steps.json in a run's life is write, fsync, rename,
    fsync of the directory: after a power cut the file is the old one or the new one, whole."""
    row = matrix_row
    row.fault = "power loss while run.json is rewritten"
    row.injected = "none possible here: every fsync and rename of a run's life recorded"
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync " + os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def replace(src: str | Path, dst: str | Path) -> None:
        events.append(f"rename {src} {dst}")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    w = RunWriter(tmp_path / "run", RunMeta(run_id="x", label="l"))
    w.begin_step({"index": 0, "repeat": 0, "target_qps": 2.0, "start": 0.0, "warmup_end": 1.0})
    w.end_step(0, 5.0)
    w.close("completed", 6.0)
    d = str(w.path)
    renames = [i for i, e in enumerate(events) if e.startswith("rename")]
    assert len(renames) >= 8
    for i in renames:
        src, dst = events[i].split()[1:]
        assert events[i - 1] == f"fsync {src}" and events[i + 1] == f"fsync {d}", events[
            i - 1 : i + 2
        ]
        assert dst in (f"{d}/run.json", f"{d}/steps.json")
    assert json.loads((w.path / "run.json").read_text())["status"] == "completed"
    row.status = "durable"
    row.note = f"{len(renames)} rewrites, each fsync(tmp) → rename → fsync(dir)"


def test_a_multi_turn_run_is_counted_by_its_conversation_starts(
    sim_factory, tmp_path: Path, matrix_row: Row
) -> None:
    """A 4-turn scenario at 3 conversations/s reads 3/s achieved, live and in compare (one
    definition), with its requests/s beside it, not ~4x its target."""
    row = matrix_row
    row.fault = "multi-turn load counted as load"
    row.injected = "conversation: {turns: 4, think_time_s: 0.05} at 3 conversation starts/s"
    (tmp_path / "chat.yaml").write_text(
        "name: chat4\nsteps: [3]\nstep_duration_s: 4\nwarmup_s: 0\narrival: constant\n"
        "max_tokens: 16\nmax_concurrency: 32\nrequest_timeout_s: 10\n"
        "conversation: {turns: 4, think_time_s: 0.05}\n"
        "prompts: {synthetic: {input_tokens: 32, count: 8}}\n"
    )
    sim = sim_factory("--profile", "tiny")
    res = run_specload(
        "run", "--host", sim.url, "--scenario", str(tmp_path / "chat.yaml"), "--label", "chat",
        "--out", "out", cwd=tmp_path,
    )  # fmt: skip
    row.exit_code = res.returncode
    assert res.returncode == 0, res.stderr[-2000:]
    found = re.search(r"achieved ([\d.]+) qps", res.stdout)
    assert found, res.stdout
    live = float(found.group(1))
    check_records(row, tmp_path / "out", status="completed", allowed={"ok"})
    report = check_report(row, tmp_path / "out", tmp_path / "report")
    (step,) = report["steps"]["chat"]
    assert step["achieved_qps"] == pytest.approx(3.0, rel=0.2)
    assert live == pytest.approx(step["achieved_qps"], rel=0.2)
    assert step["requests_per_s"] > 2 * step["achieved_qps"]
    assert not any("achieved only" in w for w in report["warnings"])
    row.note = (
        f"achieved {step['achieved_qps']:.2f}/s in compare, {live:.2f}/s live (target 3), "
        f"{step['requests_per_s']:.2f} requests/s beside it"
    )


def test_live_comparison_waits_for_queued_requests(matrix_row: Row) -> None:
    """Queueing at the end of a step: requests of the window still waiting to be sent keep
    the step open for the live comparison, though every request sent in it is back."""
    from specload.locust.live import LiveStats

    row = matrix_row
    row.fault = "live comparison settles a step early"
    row.injected = "5 measured arrivals queued, 2 sent inside the window, 3 after its end"
    live = LiveStats()
    live.begin_step(0, 0, 2.0, start=100.0, warmup_end=101.0, end=105.0)
    live.set_sent_in_window("w1", {0: 2})
    live.set_due("w1", {0: 5})
    for _ in range(2):
        live.add({"step": 0, "ok": True, "warmup": False, "tpot_s": 0.01})
    assert live.settled(now=107.0, grace_s=30) == set()
    for _ in range(3):
        live.add({"step": 0, "ok": True, "warmup": False, "tpot_s": 0.05})
    assert live.settled(now=107.0, grace_s=30) == {0}
    row.status, row.sent, row.recorded = "settled once all 5 were back", 5, 5
    row.note = "records and arrivals counted on one basis (step, measured, any turn)"


def test_kv_usage_of_two_engines(matrix_row: Row) -> None:
    """Two engines at 40 % and 60 % KV usage read 60 % live and in the report, not 100 %."""
    from specload.analysis.inputs.server import server_steps
    from specload.metrics.vllm import step_server_metrics

    row = matrix_row
    row.fault = "KV usage of two engines"
    row.injected = 'vllm:kv_cache_usage_perc{engine="0"} 0.4 and {engine="1"} 0.6'
    values = {
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"}': 0.4,
        'vllm:kv_cache_usage_perc{engine="1",model_name="m"}': 0.6,
    }
    metrics = [
        {"t": t, "step": 0, "phase": phase, "values": values}
        for t, phase in ((0.0, "start"), (5.0, "end"))
    ]
    steps = [{"index": 0, "repeat": 0, "target_qps": 1.0, "start": 0.0, "warmup_end": 0.0}]
    live = step_server_metrics([values, values]).kv_usage_max
    report = server_steps([(metrics, [{**steps[0], "end": 5.0}])])[1.0].kv_usage_max
    assert live == report == pytest.approx(0.6)
    row.status = "60 % live and in the report"
    row.note = "one definition (metrics.vllm.kv_usage): the max over engines"


def test_wall_clock_step_mid_request(matrix_row: Row, monkeypatch: pytest.MonkeyPatch) -> None:
    """``time.time`` jumps 1000 s back once the request is out: TTFT and TPOT come from the
    monotonic clock and stay those of the stream."""
    from specload.client import ChatRequest, ClientSettings, StreamClient

    row = matrix_row
    row.fault = "wall clock stepped mid-request"
    row.injected = "time.time() 1000 s back after the request was sent, before its first chunk"
    offset = [0.0]
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + offset[0])
    usage = {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}
    events = [chunk({"content": "a"}), chunk({"content": "b"}), chunk({"content": "c"}, "stop")]
    events += [chunk(None, usage=usage), DONE]
    with raw_server([0.1, *sse_response(events, gap_s=0.02)]) as srv:

        def step_the_clock() -> None:
            while not srv.requests:
                time.sleep(0.001)
            offset[0] = -1000.0

        threading.Thread(target=step_the_clock, daemon=True).start()
        client = StreamClient(srv.url, ClientSettings(timeout_s=10), kernel_stamps=False)
        rec = client.send(
            ChatRequest(model="m", messages=({"role": "user", "content": "x"},)),
            request_id="r", worker="w", step=0, repeat=0, target_qps=1.0, warmup=False,
            scheduled_at=real(),
        )  # fmt: skip
    assert offset[0] == -1000.0 and rec.ok
    assert rec.ttft_s is not None and 0.05 < rec.ttft_s < 10
    assert rec.tpot_s is not None and 0 < rec.tpot_s < 10
    row.status, row.sent, row.recorded = "ok", 1, 1
    row.kinds = {"ok": 1}
    row.note = (
        f"TTFT {rec.ttft_s * 1000:.0f} ms, TPOT {rec.tpot_s * 1000:.0f} ms (the stream's own)"
    )

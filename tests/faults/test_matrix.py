"""The fault matrix: a headless ``specload run`` against a misbehaving server process.

Each row: the run finishes (or stops cleanly on a signal), every request sent has exactly
one record with the right ``error.kind`` (held against what the server says it did, where
it can say), records already on disk survive, run.json says how the run ended (``degraded``,
exit 1, when more than 5 % of requests failed or a worker was lost), and ``specload
compare`` shows the error rate and kinds per step. Rows whose server fails on purpose run
with ``--skip-preflight``: the pre-flight would rightly refuse it before any load. Rows the simulator can play
use its fault switches; the rest use ``tests/faults/rawserver.py``.

Existing tests that prove narrower versions of some rows (kept, not repeated here): the
client against scripted sockets (``tests/client/test_stream_client.py``), the simulator's
switches (``tests/sim/test_faults.py``), SIGTERM to a separate Locust master
(``tests/locust/test_locust_e2e.py``), a worker lost in the web UI
(``tests/locust/test_webui_distributed.py``). A worker cut off from a separate master on
another network stack is a row of its own (``tests/faults/test_netns.py``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from specload.recorder import read_run
from specload.scenario import load_scenario
from specload.scenario.prompts import build_prompt_set
from specload.sim.tokenizer import chat_tokens
from tests.conftest import free_port, start_sim
from tests.faults.matrix import (
    Row,
    check_records,
    check_report,
    kind_of,
    run_specload,
    snapshot,
    start_run,
    survived,
    wait_for_step,
    write_scenario,
)
from tests.locust.runcheck import ground_truth


def run_row(row: Row, host: str, tmp: Path, scenario: Path, *extra: str) -> Path:
    res = run_specload(
        "run",
        "--host",
        host,
        "--scenario",
        str(scenario),
        "--label",
        "fault",
        "--out",
        "out",
        *extra,
        cwd=tmp,
    )
    row.exit_code = res.returncode
    assert "Traceback" not in res.stdout + res.stderr
    return tmp / "out"


def test_connection_refused(tmp_path: Path, matrix_row: Row) -> None:
    row = matrix_row
    row.fault, row.injected = "connection refused", "--host on a port nobody listens on"
    host = f"http://127.0.0.1:{free_port()}"
    refused = run_specload(
        "run",
        "--host",
        host,
        "--scenario",
        str(write_scenario(tmp_path)),
        "--label",
        "fault",
        "--out",
        "out",
        cwd=tmp_path,
    )
    assert refused.returncode == 2 and "Connection refused" in refused.stderr
    assert not (tmp_path / "out").exists()  # the pre-flight stopped it before any run dir
    run_dir = run_row(row, host, tmp_path, write_scenario(tmp_path), "--skip-preflight")
    assert row.exit_code == 1  # every request failed: degraded
    check_records(row, run_dir, status="degraded", allowed={"connect"}, server_ids=set())
    check_report(row, run_dir, tmp_path / "report")
    assert set(row.report_error_rates.values()) == {1.0}
    row.note = (
        "without --skip-preflight: refused by the pre-flight in under a second, exit 2, no run dir"
    )


SIM_ROWS = [
    (
        "HTTP 5xx",
        "sim --fault-error-rate 0.5 --fault-error-status 503",
        ["--fault-error-rate", "0.5", "--fault-error-status", "503"],
        "http",
        2.0,
    ),
    ("HTTP 429", "sim --fault-429-rate 0.5", ["--fault-429-rate", "0.5"], "http", 2.0),
    (
        "stall longer than the request timeout",
        "sim --fault-stall-after 2 --fault-stall-s 4 on half the streams; request_timeout_s 1",
        ["--fault-stall-after", "2", "--fault-stall-s", "4", "--fault-stream-rate", "0.5"],
        "timeout",
        1.0,
    ),
    (
        "connection dropped mid-stream",
        "sim --fault-drop-after 3 on half the streams",
        ["--fault-drop-after", "3", "--fault-stream-rate", "0.5"],
        "stream_broken",
        2.0,
    ),
    (
        "malformed SSE line",
        "sim --fault-malformed-after 3 on half the streams",
        ["--fault-malformed-after", "3", "--fault-stream-rate", "0.5"],
        "bad_payload",
        2.0,
    ),
    (
        "stream ends without [DONE] (after finish_reason)",
        "sim --fault-no-done",
        ["--fault-no-done"],
        "",
        2.0,
    ),
]


@pytest.mark.parametrize(
    ("fault", "injected", "flags", "kind", "timeout"),
    SIM_ROWS,
    ids=["5xx", "429", "stall", "drop", "malformed", "no_done"],
)
def test_simulator_fault(
    sim_factory,
    tmp_path: Path,
    matrix_row: Row,
    fault: str,
    injected: str,
    flags: list[str],
    kind: str,
    timeout: float,
) -> None:
    row = matrix_row
    row.fault, row.injected = fault, injected
    sim = sim_factory("--profile", "tiny", "--ground-truth", *flags)
    run_dir = run_row(
        row, sim.url, tmp_path, write_scenario(tmp_path, timeout=timeout), "--skip-preflight"
    )
    # a failing server is a result, not a crash: every record kept, the run degraded
    assert row.exit_code == (1 if kind else 0)
    truth = ground_truth(sim.url)
    allowed = {"ok", kind} if kind else {"ok"}
    status = "degraded" if kind else "completed"
    records = check_records(
        row,
        run_dir,
        status=status,
        allowed=allowed,
        server_ids=set(truth) if fault != "HTTP 5xx" else None,
    )
    if kind:
        assert row.kinds.get(kind), f"the fault never fired: {row.kinds}"
    if kind == "http":
        status = 503 if "5xx" in fault else 429
        assert {r["status"] for r in records if not r["ok"]} == {status}
        assert {r["request_id"] for r in records if r["ok"]} <= set(truth)
    else:  # the engine saw every request: the server-side view is complete
        assert {r["request_id"] for r in records} == set(truth)
    check_report(row, run_dir, tmp_path / "report")


RAW_ROWS = [
    (
        "very large chunk (1 MiB in one SSE line)",
        "rawserver large --size 1048576",
        "large",
        ["--size", str(1 << 20)],
    ),
    (
        "slow drip of bytes",
        (
            "rawserver drip: one byte per 0.5 ms (ok) or per 10 ms (past "
            "the 2 s timeout), alternately"
        ),
        "drip",
        [],
    ),
    ("stream ends without finish_reason or [DONE]", "rawserver nofinish", "nofinish", []),
]


@pytest.mark.parametrize(
    ("fault", "injected", "mode", "args"), RAW_ROWS, ids=[r[2] for r in RAW_ROWS]
)
def test_raw_server_fault(
    raw_factory,
    tmp_path: Path,
    matrix_row: Row,
    fault: str,
    injected: str,
    mode: str,
    args: list[str],
) -> None:
    row = matrix_row
    row.fault, row.injected = fault, injected
    raw = raw_factory(mode, *args)
    failing = mode != "large"  # the rest fail on purpose: no pre-flight for them
    run_dir = run_row(
        row, raw.url, tmp_path, write_scenario(tmp_path), *(["--skip-preflight"] if failing else [])
    )
    assert row.exit_code == (1 if failing else 0)
    expected = raw.expected()
    records = check_records(
        row,
        run_dir,
        status="degraded" if failing else "completed",
        allowed=set(expected.values()),
        server_ids=set(expected),
        expected=expected,
    )
    if mode == "large":
        assert {r["output_chars"] for r in records} == {(1 << 20) + 1}
        assert {r["content_chunks"] for r in records} == {2}
    if mode == "drip":
        assert set(row.kinds) == {"ok", "timeout"}
    check_report(row, run_dir, tmp_path / "report")


def test_server_killed_mid_run(sim_factory, tmp_path: Path, matrix_row: Row) -> None:
    row = matrix_row
    row.fault, row.injected = "server killed mid-run", "SIGKILL to the simulator 1 s into step 1"
    sim = sim_factory("--profile", "tiny", "--ground-truth")
    scenario = write_scenario(tmp_path, duration=1.5, max_tokens=64)
    proc = start_run(sim.url, scenario, tmp_path)
    run_dir = tmp_path / "out"
    try:
        start = wait_for_step(run_dir)["start"]
        time.sleep(max(0.0, start + 1.0 - time.time()))
        truth = ground_truth(sim.url)
        os.killpg(sim.proc.pid, signal.SIGKILL)
        sim.proc.wait(timeout=10)
        dead_at = time.time()
        before = snapshot(run_dir / "requests.jsonl")
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    row.exit_code = proc.returncode
    # a target down mid-run: every later request is an error, so never exit 0
    assert proc.returncode == 1 and "Traceback" not in err.decode(), err.decode()[-2000:]
    assert "run degraded" in err.decode().strip().splitlines()[-1]
    records = check_records(
        row,
        run_dir,
        status="degraded",
        allowed={"ok", "stream_broken", "connect"},
        server_ids=set(truth),
    )
    survived(before, run_dir)
    assert row.kinds.get("ok") and row.kinds.get("connect"), row.kinds
    after = [r for r in records if r["sent_at"] > dead_at]
    assert after and {kind_of(r) for r in after} == {"connect"}
    check_report(row, run_dir, tmp_path / "report")
    assert row.report_error_rates["8"] == 1.0  # the second step met a dead server


def _workers_of(
    run_proc: subprocess.Popen[bytes], n: int, timeout_s: float = 60
) -> list[psutil.Process]:
    """The ``--processes`` workers: children of the Locust master under ``specload run``."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        kids = psutil.Process(run_proc.pid).children()
        workers = [w for k in kids for w in k.children()]
        if len(workers) >= n:
            return workers
        time.sleep(0.1)
    raise TimeoutError("Locust's worker processes did not appear")


@pytest.mark.slow
def test_worker_killed_mid_run(sim_factory, tmp_path: Path, matrix_row: Row) -> None:
    row = matrix_row
    row.fault = "worker killed mid-run"
    row.injected = "specload run --processes 2; SIGKILL to one worker 1 s into step 1"
    sim = sim_factory("--profile", "tiny", "--ground-truth")
    scenario = write_scenario(tmp_path, steps="[4, 6, 8]", duration=2.0)
    proc = start_run(sim.url, scenario, tmp_path, "--processes", "2")
    run_dir = tmp_path / "out"
    try:
        workers = _workers_of(proc, 2)
        start = wait_for_step(run_dir)["start"]
        time.sleep(max(0.0, start + 1.0 - time.time()))
        before = snapshot(run_dir / "requests.jsonl")
        workers[0].kill()
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    row.exit_code = proc.returncode
    assert proc.returncode == 1, err.decode()[-2000:]  # a lost worker: degraded
    survived(before, run_dir)
    run = read_run(run_dir)
    meta = run.meta
    assert meta.status == "degraded" and len(meta.lost_workers) == 1, meta.notes
    # noticed mid-run, or, on a busy box whose heartbeats lag, only after the last step:
    # either way the run says which worker and is degraded
    said = meta.degraded[-1]
    worker = meta.lost_workers[0]["worker"]
    assert f"worker {worker} lost at" in said or f"worker {worker} lost after the last" in said
    assert any("lost" in w for w in run.warnings)
    lost = meta.lost_workers[0]
    records = list(run.record_dicts())
    ids = {r["request_id"] for r in records}
    assert len(ids) == len(records) and {kind_of(r) for r in records} == {"ok"}
    truth = set(ground_truth(sim.url))
    missing = truth - ids
    from specload.locust.load_process import worker_tag

    tag = f"-{worker_tag(lost['worker'])}-"
    assert all(tag in rid for rid in missing), "only the killed worker may lose records"
    survivor = {w: c for w, c in meta.counts["by_worker"].items() if w != lost["worker"]}
    for w, c in survivor.items():
        assert c["sent"] == c["recorded"] == sum(1 for r in records if r["worker"] == w)
    assert lost["recorded"] == sum(1 for r in records if r["worker"] == lost["worker"])
    row.status, row.sent, row.recorded = meta.status, len(truth), len(records)
    row.server_saw, row.lost, row.kinds = len(truth), len(missing), {"ok": len(records)}
    row.note = "run.json lost_workers and readers' warnings name the killed worker" + (
        "; the lost requests were in flight or not yet reported on it: no "
        "process was left to measure them"
        if missing
        else ""
    )
    check_report(row, run_dir, tmp_path / "report")


@pytest.mark.parametrize(
    ("sig", "processes"),
    [(signal.SIGINT, 0), (signal.SIGTERM, 0), (signal.SIGINT, 2)],
    ids=["SIGINT", "SIGTERM", "SIGINT-processes-2"],
)
def test_signal_to_headless_run(
    sim_factory, tmp_path: Path, matrix_row: Row, sig: int, processes: int
) -> None:
    row = matrix_row
    name = signal.Signals(sig).name
    more = ["--processes", str(processes)] if processes else []
    row.fault = f"{name} to a headless specload run" + (
        f" --processes {processes}" if processes else ""
    )
    row.injected = f"{name} to `specload run` 1.5 s into a step with ~6 requests in flight"
    sim = sim_factory("--profile", "tiny", "--ground-truth")
    scenario = write_scenario(tmp_path, steps="[8]", duration=20, timeout=20, max_tokens=160)
    proc = start_run(sim.url, scenario, tmp_path, *more)
    run_dir = tmp_path / "out"
    try:
        start = wait_for_step(run_dir)["start"]
        time.sleep(max(0.0, start + 1.5 - time.time()))
        before = snapshot(run_dir / "requests.jsonl")
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    row.exit_code = proc.returncode
    assert proc.returncode == 130, err.decode()[-2000:]
    assert "Traceback" not in err.decode()
    # nothing escaped inside Locust (a KeyboardInterrupt in a user once lost its record)
    assert "Traceback" not in (run_dir / "locust.log").read_text()
    survived(before, run_dir)
    check_records(
        row,
        run_dir,
        status="interrupted",
        allowed={"ok", "cancelled"},
        server_ids=set(ground_truth(sim.url)),
    )
    assert row.kinds.get("cancelled"), row.kinds  # in-flight requests end as one record each
    steps = json.loads((run_dir / "steps.json").read_text())
    assert steps[0]["end"] <= read_run(run_dir).meta.ended_at
    check_report(row, run_dir, tmp_path / "report")


def test_run_killed_without_cleanup_keeps_what_it_wrote(
    sim_factory, tmp_path: Path, matrix_row: Row
) -> None:
    """SIGKILL to ``specload run`` and its Locust: no handler runs. What was flushed (at
    each step end, and every second) survives and is readable; the run says it never ended."""
    row = matrix_row
    row.fault = "specload run and Locust SIGKILLed"
    row.injected = "SIGKILL to both processes 0.5 s into step 2 (no cleanup runs)"
    sim = sim_factory("--profile", "tiny", "--ground-truth")
    scenario = write_scenario(tmp_path, duration=1.5)
    proc = start_run(sim.url, scenario, tmp_path)
    run_dir = tmp_path / "out"
    try:
        start = wait_for_step(run_dir, index=1)["start"]
        time.sleep(max(0.0, start + 0.5 - time.time()))
        tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        before = snapshot(run_dir / "requests.jsonl")
        for p in tree:
            p.kill()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    row.exit_code = proc.returncode
    survived(before, run_dir)
    run = read_run(run_dir)
    assert run.meta.status == "running" and any("running" in w for w in run.warnings)
    records = list(run.record_dicts())
    ids = {r["request_id"] for r in records}
    assert len(ids) == len(records) and {kind_of(r) for r in records} == {"ok"}
    truth = set(ground_truth(sim.url))
    assert ids <= truth
    first = [r for r in records if r["step"] == 0]
    assert first and {r["request_id"] for r in first} == {
        rid for rid in truth if int(rid.rsplit("-", 1)[1]) <= len(first)
    }  # step 1 complete
    row.status, row.sent, row.recorded = "running (never ended)", len(truth), len(records)
    row.server_saw, row.lost, row.kinds = len(truth), len(truth - ids), {"ok": len(records)}
    row.note = (
        "received in the last second before the kill (the master flushes every "
        "second and at each step end); step 1 is complete on disk"
    )
    check_report(row, run_dir, tmp_path / "report")


def _sim_counts(url: str) -> dict[str, int]:
    with urllib.request.urlopen(url + "/debug/counts", timeout=10) as r:
        return dict(json.load(r))


def _one_build_calls(scenario: Path) -> int:
    """``/tokenize`` calls that building the scenario's prompt set once makes (no failures):
    the same deterministic fitting, counted here with the simulator's own tokenizer."""
    calls = 0

    def count(text: str) -> int:
        nonlocal calls
        calls += 1
        return len(chat_tokens([{"role": "user", "content": text}], True))

    build_prompt_set(load_scenario(scenario), count)
    return calls


@pytest.mark.slow
def test_tokenize_resets_every_third_connection(
    sim_factory, tmp_path: Path, matrix_row: Row
) -> None:
    row = matrix_row
    row.fault = "/tokenize resets every third connection"
    row.injected = "sim --fault-tokenize-reset-every 3; specload run --processes 2"
    sim = sim_factory("--profile", "tiny", "--ground-truth", "--fault-tokenize-reset-every", "3")
    scenario = write_scenario(tmp_path)
    run_dir = run_row(row, sim.url, tmp_path, scenario, "--processes", "2")
    assert row.exit_code == 0
    truth = ground_truth(sim.url)
    records = check_records(row, run_dir, status="completed", allowed={"ok"}, server_ids=set(truth))
    meta = read_run(run_dir).meta
    prompt_set = meta.prompt_set
    assert prompt_set["token_count_source"] == "tokenize" and prompt_set["exact"], prompt_set
    assert prompt_set["count"] == 8 and not prompt_set["warnings"]
    assert {r["prompt_tokens"] for r in records} == {16}  # exact, as the server charged them
    assert len(meta.counts["by_worker"]) == 2
    counts = _sim_counts(sim.url)
    assert counts["tokenize_resets"] >= 3, counts  # the preparation met resets
    # prepared once, on the master: the answered calls are one build plus the probe, not
    # one build per worker
    answered = counts["tokenize_requests"] - counts["tokenize_resets"]
    assert answered == _one_build_calls(scenario) + 1, counts
    row.note = (
        f"{counts['tokenize_resets']} of {counts['tokenize_requests']} /tokenize requests reset; "
        f"prompts built once on the master ({answered} answered calls, not one build per "
        "worker), exact counts (every record: 16 prompt tokens), sha256 in run.json"
    )
    check_report(row, run_dir, tmp_path / "report")


@pytest.mark.slow
def test_server_restarted_mid_run(sim_factory, tmp_path: Path, matrix_row: Row) -> None:
    row = matrix_row
    row.fault = "server restarted mid-run"
    row.injected = "SIGKILL to the simulator 0.5 s into step 2, a new one on the same port"
    sim = sim_factory("--profile", "tiny")
    scenario = write_scenario(tmp_path, steps="[4, 6, 8]", duration=2.5, max_tokens=64)
    proc = start_run(sim.url, scenario, tmp_path)
    run_dir = tmp_path / "out"
    second = None
    try:
        start = wait_for_step(run_dir, 1)["start"]
        time.sleep(max(0.0, start + 0.5 - time.time()))
        os.killpg(sim.proc.pid, signal.SIGKILL)
        sim.proc.wait(timeout=10)
        dead_at = time.time()
        second = start_sim("--profile", "tiny", log_dir=tmp_path, port=sim.port)
        back_at = time.time()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        if second is not None:
            second.stop()
    row.exit_code = proc.returncode
    assert proc.returncode == 1 and "Traceback" not in err.decode(), err.decode()[-2000:]
    records = check_records(
        row, run_dir, status="degraded", allowed={"ok", "stream_broken", "connect"}
    )
    assert row.kinds.get("connect") or row.kinds.get("stream_broken"), row.kinds
    assert any(r["ok"] and r["sent_at"] > back_at for r in records)  # the run went on
    assert all(not r["ok"] for r in records if dead_at < r["sent_at"] < back_at - 0.5)
    # the live line and the report both say which step straddles the restart
    assert "step 2 (6 qps): the server restarted during this step" in out.decode()
    report = check_report(row, run_dir, tmp_path / "report")
    notes = [n for n in report["notes"] if "restarted" in n]
    assert len(notes) == 1 and "the step at 6 req/s" in notes[0], report["notes"]
    md = (tmp_path / "report" / "report.md").read_text()
    assert "| 6 ↻ |" in md and "| 4 |" in md and "| 8 |" in md
    server = {s["target_qps"]: s["server"] for s in report["steps"]["fault"]}
    assert server[6.0]["restarts"] == 1 and server[6.0]["generation_tokens"] is None
    assert server[4.0]["restarts"] == 0 and server[4.0]["generation_tokens"] > 0
    assert server[8.0]["generation_tokens"] > 0  # counted again on the new server
    row.note = (
        "in-flight requests failed with their kind, the run went on once the server was back; "
        "the step that straddles the restart is marked (↻, a note) and its counters left out"
    )


@pytest.mark.parametrize(
    ("fault", "switch", "why"),
    [
        (
            "/metrics hangs (past the 3 s scrape timeout)",
            {"metrics_delay_s": 6},
            "no answer within 3 s",
        ),
        ("/metrics fails (HTTP 503)", {"metrics_status": 503}, "HTTP 503"),
    ],
    ids=["metrics-hang", "metrics-503"],
)
def test_metrics_endpoint_fails_mid_run(
    sim_factory, tmp_path: Path, matrix_row: Row, fault: str, switch: dict, why: str
) -> None:
    row = matrix_row
    row.fault = fault
    row.injected = f"POST /debug/faults {json.dumps(switch)} 0.5 s into step 1"
    sim = sim_factory("--profile", "tiny", "--ground-truth")
    scenario = write_scenario(tmp_path, duration=2.0)
    proc = start_run(sim.url, scenario, tmp_path)
    run_dir = tmp_path / "out"
    try:
        start = wait_for_step(run_dir)["start"]
        time.sleep(max(0.0, start + 0.5 - time.time()))
        req = urllib.request.Request(
            sim.url + "/debug/faults", data=json.dumps(switch).encode(), method="POST"
        )
        urllib.request.urlopen(req, timeout=10).close()
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    row.exit_code = proc.returncode
    # missing server figures are not failed requests: the run completes
    assert proc.returncode == 0, err.decode()[-2000:]
    truth = ground_truth(sim.url)
    records = check_records(row, run_dir, status="completed", allowed={"ok"}, server_ids=set(truth))
    # a hanging scrape never held arrivals back: no request waited near the 3 s the scrape
    # blocked for (it would, had the scrape blocked the process that paces and sends)
    assert max(r["queue_delay_s"] for r in records) < 1.0
    steps = json.loads((run_dir / "steps.json").read_text())
    assert all(any(why in n for n in s.get("server_notes", [])) for s in steps), steps
    report = check_report(row, run_dir, tmp_path / "report")
    gaps = [n for n in report["notes"] if "server figures for the step at" in n]
    assert any("4 req/s" in n and why in n for n in gaps) and any("8 req/s" in n for n in gaps)
    row.note = f"every step's server_notes (steps.json) and the report's notes say why: {why}"

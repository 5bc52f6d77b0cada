"""End to end through real Locust against the real simulator: local, --processes 2, and a
master with two separate worker processes (one of them killed mid-run).

Each test compares the run directory with the simulator's ground truth: one record per
request the server received, TTFT and TPOT agreeing with the server's emission times,
achieved QPS per step, warm-up flags, edge scrapes, and a run dir written once.
"""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from runcheck import (
    LOCUSTFILE,
    REPO,
    check_records_match_truth,
    check_steps,
    check_timing,
    ground_truth,
    locust_proc,
    master_and_workers,
    run_dirs_under,
    specload,
    write_scenario,
)

from specload.recorder import read_run
from tests.conftest import free_port, stop_process, wait_http


def _truth_sim(sim_factory):  # type: ignore[no-untyped-def]
    return sim_factory("--profile", "tiny", "--ground-truth")


def test_local_run_records_every_request_with_server_exact_timing(
    sim_factory, tmp_path: Path
) -> None:
    sim = _truth_sim(sim_factory)
    scenario = write_scenario(tmp_path)
    res = specload(
        "run",
        "--host",
        sim.url,
        "--scenario",
        str(scenario),
        "--label",
        "base",
        "--out",
        "out/base",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr + res.stdout
    lines = [x for x in res.stdout.splitlines() if x.startswith("step ")]
    assert len(lines) == 2 and "target 4 qps" in lines[0] and "p50 TPOT" in lines[0]
    run_dir = tmp_path / "out" / "base"
    assert run_dirs_under(tmp_path) == [run_dir]  # the one run dir; nothing else written
    truth = ground_truth(sim.url)
    records = check_records_match_truth(run_dir, truth)
    ttft, tpot = check_timing(records, truth)
    print(f"local: {len(records)} records, median TTFT error {ttft * 1e3:.3f} ms, TPOT {tpot:.3%}")
    check_steps(run_dir, records, [4.0, 8.0])
    meta = read_run(run_dir).meta
    assert meta.label == "base" and meta.workers == ["local"]
    assert meta.target["server_version"] and meta.target["models"]
    assert meta.token_count_source == "tokenize"


@pytest.mark.slow
def test_processes_2_splits_each_step_and_master_alone_writes(sim_factory, tmp_path: Path) -> None:
    sim = _truth_sim(sim_factory)
    scenario = write_scenario(tmp_path)
    res = specload(
        "run",
        "--host",
        sim.url,
        "--scenario",
        str(scenario),
        "--label",
        "p2",
        "--out",
        "out/p2",
        "--processes",
        "2",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr + res.stdout
    run_dir = tmp_path / "out" / "p2"
    assert run_dirs_under(tmp_path) == [run_dir]
    truth = ground_truth(sim.url)
    records = check_records_match_truth(run_dir, truth)
    check_timing(records, truth)
    check_steps(run_dir, records, [4.0, 8.0])
    meta = read_run(run_dir).meta
    by_worker = meta.counts["by_worker"]
    assert len(by_worker) == 2 and sorted(meta.workers) == sorted(by_worker)
    for w, c in by_worker.items():  # each worker carried about half of every step
        assert c["sent"] == c["recorded"] == sum(1 for r in records if r["worker"] == w)
        assert c["sent"] >= 0.4 * len(records)


@pytest.mark.slow
def test_master_with_two_worker_processes_records_every_request(
    sim_factory, tmp_path: Path
) -> None:
    sim = _truth_sim(sim_factory)
    scenario = write_scenario(tmp_path)
    for i in range(2):
        (tmp_path / f"w{i}").mkdir()
    run_dir = tmp_path / "out" / "mw"
    master, workers = master_and_workers(sim.url, tmp_path, scenario, run_dir)
    try:
        assert master.wait(timeout=90) == 0, (tmp_path / "master.log").read_text()[-3000:]
        for w in workers:
            w.wait(timeout=30)
    finally:
        for p in (master, *workers):
            stop_process(p)
    assert run_dirs_under(tmp_path) == [run_dir]  # workers (own cwd) wrote nothing
    truth = ground_truth(sim.url)
    records = check_records_match_truth(run_dir, truth)
    check_timing(records, truth)
    check_steps(run_dir, records, [4.0, 8.0])
    assert len(read_run(run_dir).meta.counts["by_worker"]) == 2
    # Locust's own rows: TTFT/TPOT/E2E per step, bucketed below a millisecond in the workers
    rows = json.loads((tmp_path / "stats.json").read_text())
    assert {(r["method"], r["name"]) for r in rows} == {
        (m, f"chat @ {q} qps") for m in ("TTFT", "TPOT", "E2E") for q in (4, 8)
    }
    tpot_keys = [float(k) for r in rows if r["method"] == "TPOT" for k in r["response_times"]]
    assert any(k != int(k) for k in tpot_keys), tpot_keys


def _first_step(run_dir: Path, log: Path, timeout_s: float = 60.0) -> dict:
    """The first step of a distributed run, once the master has written it."""
    deadline = time.time() + timeout_s
    steps = run_dir / "steps.json"
    while not steps.exists() or not json.loads(steps.read_text()):
        assert time.time() < deadline, log.read_text()[-3000:]
        time.sleep(0.1)
    return json.loads(steps.read_text())[0]


def test_bad_scenario_gives_one_line_and_exit_2_in_locust_too(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsteps: [1, fast]\n")
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "locust",
            "-f",
            str(LOCUSTFILE),
            "--headless",
            "--host",
            "http://127.0.0.1:9",
            "--scenario",
            str(bad),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert res.returncode == 2
    errors = [x for x in (res.stderr + res.stdout).splitlines() if x.startswith("specload: error:")]
    assert len(errors) == 1 and "error: bad.yaml: steps[1]" in errors[0]  # as typed, from cwd
    assert "Traceback" not in res.stderr + res.stdout
    assert not (tmp_path / "runs").exists()


def test_web_ui_form_offers_specload_options_but_never_the_api_key(tmp_path: Path) -> None:
    """Locust prints ``--help`` before importing a locustfile, so plugin options reach users
    through the web UI's form (and ``specload run --help``): check the real page."""
    port = free_port()
    proc = locust_proc(
        "--web-host",
        "127.0.0.1",
        "--web-port",
        str(port),
        "--host",
        "http://127.0.0.1:9",
        "--scenario",
        "scenarios/smoke.yaml",
        "--api-key",
        "sk-never-shown-123",
        cwd=REPO,
        log=tmp_path / "ui.log",
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/", proc=proc)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as r:
            page = r.read().decode()
    finally:
        stop_process(proc)
    for opt in (
        "scenario",
        "label",
        "run_dir",
        "store_text",
        "speculative_config",
        "prefix_caching",
        "server_cmd",
        "max_error_rate",
        "skip_preflight",
    ):
        assert f'"{opt}"' in page, opt
    assert "sk-never-shown-123" not in page and '"api_key"' not in page
    assert "sk-never-shown-123" not in (tmp_path / "ui.log").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM])
def test_stopping_the_master_cancels_in_flight_and_keeps_every_record(
    sim_factory, tmp_path: Path, sig: int
) -> None:
    """SIGTERM (SIGINT behaves the same) mid-step: workers cancel in-flight requests, each
    gets a ``cancelled`` record, and run.json's counts match the records."""
    sim = _truth_sim(sim_factory)
    scenario = tmp_path / "long.yaml"  # ~0.8 s requests at 8 qps: several always in flight
    scenario.write_text(
        "name: long\nmax_tokens: 256\nsteps: [8]\nstep_duration_s: 30\nwarmup_s: 1\n"
        "arrival: constant\nmax_concurrency: 32\nrequest_timeout_s: 20\n"
        "prompts:\n  synthetic: {input_tokens: 64, count: 20}\n"
    )
    for i in range(2):
        (tmp_path / f"w{i}").mkdir()
    run_dir = tmp_path / "out" / "mw"
    master, workers = master_and_workers(sim.url, tmp_path, scenario, run_dir)
    try:
        start = _first_step(run_dir, tmp_path / "master.log")["start"]
        time.sleep(max(0.0, start + 4 - time.time()))
        master.send_signal(sig)
        master.wait(timeout=30)
        for w in workers:
            w.wait(timeout=30)
    finally:
        for p in (master, *workers):
            stop_process(p)
    run = read_run(run_dir)
    records = list(run.record_dicts())
    assert run.meta.status == "interrupted"
    assert run.meta.counts["sent"] == run.meta.counts["recorded"] == len(records) > 0
    kinds = [r["error"]["kind"] for r in records if r["error"]]
    assert kinds and set(kinds) == {"cancelled"}
    ids = {r["request_id"] for r in records}
    assert len(ids) == len(records) and set(ground_truth(sim.url)) <= ids


def test_failing_server_still_gives_one_record_per_request(sim_factory, tmp_path: Path) -> None:
    sim = sim_factory(
        "--profile",
        "tiny",
        "--ground-truth",
        "--fault-error-rate",
        "0.3",
        "--fault-error-status",
        "500",
    )
    scenario = write_scenario(tmp_path)
    res = specload(
        "run",
        "--host",
        sim.url,
        "--scenario",
        str(scenario),
        "--label",
        "faulty",
        "--out",
        "out",
        "--skip-preflight",
        cwd=tmp_path,
    )
    # a failing server is a result, not a crash: every record kept, the run degraded (exit 1)
    assert res.returncode == 1, res.stderr + res.stdout
    run = read_run(tmp_path / "out")
    assert run.meta.status == "degraded" and run.meta.degraded
    records = list(run.record_dicts())
    ids = [r["request_id"] for r in records]
    assert len(ids) == len(set(ids)) == run.meta.counts["sent"] == run.meta.counts["recorded"]
    failed = [r for r in records if not r["ok"]]
    assert failed and len(failed) < len(records)
    assert {r["error"]["kind"] for r in failed} == {"http"} and {r["status"] for r in failed} == {
        500
    }
    truth = ground_truth(sim.url)
    assert {r["request_id"] for r in records if r["ok"]} <= set(truth)
    steps = [x for x in res.stdout.splitlines() if x.startswith("step ")]
    assert len(steps) == 2 and any("errors 0/" not in x for x in steps)  # the progress shows them


@pytest.mark.slow
def test_worker_joining_mid_run_takes_a_share_without_changing_the_rate(
    sim_factory, tmp_path: Path
) -> None:
    sim = _truth_sim(sim_factory)
    scenario = write_scenario(tmp_path, steps="[6, 6, 6, 6]", duration=3)
    for i in range(2):
        (tmp_path / f"w{i}").mkdir()
    run_dir = tmp_path / "out" / "mw"
    port = free_port()
    master = locust_proc(
        "--master",
        "--headless",
        "--expect-workers",
        "1",
        "--enable-rebalancing",
        "--master-bind-host",
        "127.0.0.1",
        "--master-bind-port",
        str(port),
        "--host",
        sim.url,
        "--scenario",
        str(scenario),
        "--run-dir",
        str(run_dir),
        "--exit-code-on-error",
        "0",
        cwd=tmp_path,
        log=tmp_path / "master.log",
    )
    worker_args = ("--worker", "--master-host", "127.0.0.1", "--master-port", str(port))
    workers = [locust_proc(*worker_args, cwd=tmp_path / "w0", log=tmp_path / "worker0.log")]
    try:
        _first_step(run_dir, tmp_path / "master.log")
        time.sleep(1)
        workers.append(locust_proc(*worker_args, cwd=tmp_path / "w1", log=tmp_path / "worker1.log"))
        deadline = time.time() + 60
        while "2 workers connected" not in (tmp_path / "master.log").read_text():
            assert time.time() < deadline, (tmp_path / "master.log").read_text()[-3000:]
            time.sleep(0.1)
        joined_at = time.time()
        assert master.wait(timeout=90) == 0, (tmp_path / "master.log").read_text()[-3000:]
        for w in workers:
            w.wait(timeout=30)
    finally:
        for p in (master, *workers):
            stop_process(p)
    truth = ground_truth(sim.url)
    records = check_records_match_truth(run_dir, truth)
    # Once in a full suite on two cores, the first worker sent nothing for 2.4 s as the
    # newcomer joined (its users' arrivals queued, then went late); the step's line said so.
    # The rate and the share are this test's claim; a late step must be said, not be absent.
    check_steps(run_dir, records, [6.0] * 4, said_in=(tmp_path / "master.log").read_text())
    run = read_run(run_dir)
    assert any(n.startswith("re-split") for n in run.meta.notes), run.meta.notes
    later = [s["index"] for s in run.steps if s["start"] > joined_at + 2]
    assert later, "the newcomer joined too late in the run to check it"
    for step in later:  # both workers share every step that starts after the join
        assert len({r["worker"] for r in records if r["step"] == step}) == 2


def test_arrivals_stay_on_schedule_when_users_run_out_and_queue_delay_shows_it(
    sim, tmp_path: Path
) -> None:
    """Open loop: one user, ~0.2 s responses, 8 arrivals/s. Arrivals keep their schedule
    (1/8 s apart) whatever the responses do; each waits for the user, and says so."""
    scenario = tmp_path / "overload.yaml"
    scenario.write_text(
        "name: overload\nmax_tokens: 64\nsteps: [8]\nstep_duration_s: 2\nwarmup_s: 0\n"
        "arrival: constant\nmax_concurrency: 1\nrequest_timeout_s: 20\n"
        "prompts:\n  synthetic: {input_tokens: 32, count: 10}\n"
    )
    res = specload(
        "run",
        "--host",
        sim.url,
        "--scenario",
        str(scenario),
        "--label",
        "o",
        "--out",
        "out",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr + res.stdout
    records = sorted(read_run(tmp_path / "out").record_dicts(), key=lambda r: r["scheduled_at"])
    assert len(records) == 16  # every arrival of the step was sent, late or not
    gaps = [b["scheduled_at"] - a["scheduled_at"] for a, b in itertools.pairwise(records)]
    assert max(abs(g - 0.125) for g in gaps) < 1e-6
    for r in records:
        assert r["queue_delay_s"] == pytest.approx(r["sent_at"] - r["scheduled_at"], abs=1e-6)
    sends = [r["sent_at"] for r in records]
    assert sends == sorted(sends) and all(
        b["sent_at"] >= a["done_at"] - 0.005 for a, b in itertools.pairwise(records)
    )  # one user
    assert records[-1]["queue_delay_s"] > 1.0  # the backlog grew and is on record

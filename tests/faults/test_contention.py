"""Distributed runs on a busy box: two CPU hogs beside the load processes, six runs in a row.

On a 2-core machine with two CPU-bound processes running, ``specload run --processes 2``
used to fail two runs out of three: every worker built its own prompt set from ``/tokenize``
and one reset aborted it. Now the master prepares the prompts once, with retries; this holds
it on the worst box we have: six runs back to back, alternating ``--processes 2`` and a
Locust master with two worker processes, each with every request the server saw recorded
exactly once and no request recorded that the server did not see.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from specload.recorder import read_run
from tests.conftest import stop_process
from tests.faults.matrix import Row, run_specload, write_scenario
from tests.locust.runcheck import ground_truth, master_and_workers

#: six, not ten: the bug failed two runs in three (six in a row pass by chance 1 in 729), and
#: the hogs' two busy cores slow every test beside this one for as long as it runs
RUNS = 6
HOG = "while True: pass"


@pytest.fixture
def cpu_hogs() -> Iterator[list[subprocess.Popen[bytes]]]:
    hogs = [subprocess.Popen([sys.executable, "-c", HOG], start_new_session=True) for _ in range(2)]
    yield hogs
    for h in hogs:
        stop_process(h)


def _processes_2(sim_url: str, tmp: Path, scenario: Path) -> Path:
    res = run_specload(
        "run",
        "--host",
        sim_url,
        "--scenario",
        str(scenario),
        "--label",
        "busy",
        "--out",
        "out",
        "--processes",
        "2",
        cwd=tmp,
    )
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
    return tmp / "out"


def _master_2_workers(sim_url: str, tmp: Path, scenario: Path) -> Path:
    for i in range(2):
        (tmp / f"w{i}").mkdir()
    run_dir = tmp / "out"
    master, workers = master_and_workers(sim_url, tmp, scenario, run_dir)
    try:
        code = master.wait(timeout=120)
        for w in workers:
            w.wait(timeout=30)
    finally:
        for p in (master, *workers):
            stop_process(p)
    assert code == 0, (tmp / "master.log").read_text()[-3000:]
    return run_dir


@pytest.mark.slow
def test_six_distributed_runs_in_a_row_beside_two_cpu_hogs(
    sim_factory, tmp_path: Path, cpu_hogs: list, matrix_row: Row
) -> None:
    row = matrix_row
    row.fault = f"two CPU hogs on a 2-core box, {RUNS} distributed runs in a row"
    row.injected = (
        "2 × `python -c 'while True: pass'`; runs alternate --processes 2 and a master + 2 workers"
    )
    sim = sim_factory("--profile", "tiny", "--ground-truth", "--ground-truth-max", "100000")
    seen: set[str] = set()
    sent = recorded = 0
    for i in range(RUNS):
        tmp = tmp_path / f"run{i}"
        tmp.mkdir()
        scenario = write_scenario(tmp, steps="[6]", duration=0.7)
        run_dir = (_processes_2 if i % 2 == 0 else _master_2_workers)(sim.url, tmp, scenario)
        assert all(h.poll() is None for h in cpu_hogs), "a hog stopped: no contention"
        run = read_run(run_dir)
        meta = run.meta
        assert meta.status == "completed", (i, meta.notes)
        assert len(meta.counts["by_worker"]) == 2, (i, meta.counts)
        records = list(run.record_dicts())
        ids = [r["request_id"] for r in records]
        truth = set(ground_truth(sim.url)) - seen
        seen |= truth
        assert len(ids) == len(set(ids)), f"run {i}: a request has two records"
        assert set(ids) == truth, f"run {i}: records and the server's requests differ"
        assert meta.counts["sent"] == meta.counts["recorded"] == len(records) > 0
        assert meta.prompt_set["token_count_source"] == "tokenize"
        sent, recorded = sent + len(truth), recorded + len(records)
    row.exit_code, row.status, row.sent, row.recorded = 0, "completed", sent, recorded
    row.server_saw, row.lost, row.kinds = sent, 0, {"ok": recorded}
    row.note = f"{RUNS} of {RUNS} runs completed, each request recorded once"

"""The error budget: a run that fails more requests than ``--max-error-rate`` allows (in a step
or overall), or loses a worker, ends ``degraded`` with its reasons, every record kept, exit 1
(``specload run``, headless Locust, ``specload sweep``); progress lines are printed once.

Faults come from the simulator's switches (``--fault-error-rate``); runs that meet them go
with ``--skip-preflight`` (the pre-flight would, rightly, refuse such a server).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from specload.locust.live import StepTally, budget_reasons
from specload.recorder import read_run
from tests.conftest import REPO

SCENARIO = """\
name: budget
max_tokens: 8
steps: [4, 8]
step_duration_s: 1.5
warmup_s: 0.5
arrival: constant
max_concurrency: 8
metrics_interval_s: 1
request_timeout_s: 10
prompts:
  synthetic: {input_tokens: 16, count: 8}
"""
LOCUSTFILE = REPO / "locustfiles" / "chat.py"
PROGRESS = re.compile(
    r"step \d/2 \(repeat 0\): target \d+ qps, achieved [\d.]+ qps, "
    r"p50 TPOT [\d.-]+ ms, errors (\d+)/(\d+) finished \((\d+) sent\)"
    r"(; fell behind: .+)?"  # said when a busy machine sends late (seen on two cores)
)


def _scenario(tmp: Path) -> Path:
    p = tmp / "s.yaml"
    p.write_text(SCENARIO)
    return p


def _specload(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specload", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _tally(index: int, qps: float, records: int, errors: int, repeat: int = 0) -> StepTally:
    t = StepTally(
        index,
        repeat,
        qps,
        start=100.0 + 10 * index,
        warmup_end=101.0 + 10 * index,
        end=110.0 + 10 * index,
    )
    t.records, t.errors = records, errors
    return t


def test_budget_reasons_name_each_step_the_whole_run_and_lost_workers() -> None:
    steps = {0: _tally(0, 4, 20, 1), 1: _tally(1, 8, 60, 12), 2: _tally(2, 8, 40, 2, repeat=1)}
    lost = [{"worker": "abc123", "at": 115.0, "sent": 3, "recorded": 3}]
    reasons = budget_reasons(steps, lost, 0.05)
    assert reasons == [
        "errors 15/120 (12.5 %) over the whole run exceed --max-error-rate 5 %",
        "errors 12/60 (20 %) at 8 req/s (step 2, repeat 0) exceed --max-error-rate 5 %",
        "worker abc123 lost at 8 req/s",
    ]  # step 1 (5 %) and step 3 (5 %) are at the budget, not over it
    assert budget_reasons(steps, [], 0.2) == []


def test_run_over_budget_is_degraded_keeps_every_record_and_says_why_last(
    sim_factory, tmp_path: Path
) -> None:
    sim = sim_factory(
        "--profile", "tiny", "--fault-error-rate", "0.5", "--fault-error-status", "503"
    )
    res = _specload(
        "run",
        "--host",
        sim.url,
        "--scenario",
        str(_scenario(tmp_path)),
        "--label",
        "b",
        "--out",
        "out",
        "--skip-preflight",
        cwd=tmp_path,
    )
    assert res.returncode == 1, res.stdout + res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("specload run: run degraded") and "exceed --max-error-rate 5 %" in last
    run = read_run(tmp_path / "out")
    meta = run.meta
    records = list(run.record_dicts())
    assert meta.status == "degraded" and meta.max_error_rate == 0.05
    assert meta.degraded and all("exceed --max-error-rate 5 %" in r for r in meta.degraded)
    assert meta.counts["sent"] == meta.counts["recorded"] == len(records)
    failed = sum(1 for r in records if not r["ok"])
    assert f"errors {failed}/{len(records)} " in meta.degraded[0]  # the whole run, first
    assert any("run degraded: errors" in w for w in run.warnings)
    lines = [m for x in res.stdout.splitlines() if (m := PROGRESS.fullmatch(x))]
    assert len(lines) == 2, res.stdout
    assert all(int(m[1]) <= int(m[2]) <= int(m[3]) for m in lines)


def test_a_generous_budget_keeps_the_same_faults_completed(sim_factory, tmp_path: Path) -> None:
    sim = sim_factory(
        "--profile", "tiny", "--fault-error-rate", "0.2", "--fault-error-status", "503"
    )
    res = _specload(
        "run",
        "--host",
        sim.url,
        "--scenario",
        str(_scenario(tmp_path)),
        "--label",
        "b",
        "--out",
        "out",
        "--skip-preflight",
        "--max-error-rate",
        "0.9",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    meta = read_run(tmp_path / "out").meta
    assert meta.status == "completed" and meta.degraded == []
    assert meta.max_error_rate == 0.9
    assert any(not r["ok"] for r in read_run(tmp_path / "out").record_dicts())


def test_bad_max_error_rate_is_one_line_exit_2(tmp_path: Path) -> None:
    res = _specload(
        "run",
        "--host",
        "http://127.0.0.1:9",
        "--scenario",
        str(_scenario(tmp_path)),
        "--label",
        "b",
        "--out",
        "out",
        "--max-error-rate",
        "5",
        cwd=tmp_path,
    )
    assert res.returncode == 2 and "--max-error-rate" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_headless_locust_exits_1_on_a_degraded_run_and_prints_each_step_once(
    sim_factory, tmp_path: Path
) -> None:
    sim = sim_factory("--profile", "tiny", "--fault-error-rate", "1", "--fault-error-status", "500")
    run_dir = tmp_path / "runs" / "h"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "locust",
            "-f",
            str(LOCUSTFILE),
            "--headless",
            "--host",
            sim.url,
            "--scenario",
            str(_scenario(tmp_path)),
            "--run-dir",
            str(run_dir),
            "--skip-preflight",
            "--exit-code-on-error",
            "0",
        ],  # so exit 1 can only be the error budget's
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    out = res.stdout + res.stderr
    assert res.returncode == 1, out[-3000:]
    assert read_run(run_dir).meta.status == "degraded"
    for n in (1, 2):
        assert sum(f"step {n}/2 (repeat 0)" in x for x in out.splitlines()) == 1, out[-3000:]
    assert sum("run degraded:" in x and "records in" in x for x in out.splitlines()) == 1


def test_sweep_goes_on_after_a_degraded_run_compares_and_names_it_last(tmp_path: Path) -> None:
    py = shlex.quote(sys.executable)
    sim = f"{py} -m specload sim --host 127.0.0.1 --port {{port}} --profile tiny"
    out_dir = tmp_path / "sweep"
    res = _specload(
        "sweep",
        "--server-cmd",
        sim,
        "--condition",
        "faulty=--fault-error-rate 0.5",
        "--condition",
        "baseline=",
        "--scenario",
        str(_scenario(tmp_path)),
        "--out",
        str(out_dir),
        "--skip-preflight",
        cwd=REPO,
    )
    assert res.returncode == 1, res.stdout + res.stderr
    faulty = json.loads((out_dir / "faulty" / "run.json").read_text())
    baseline = json.loads((out_dir / "baseline" / "run.json").read_text())
    assert faulty["status"] == "degraded" and baseline["status"] == "completed"
    assert (out_dir / "report" / "report.json").is_file()  # compared all the same
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("specload sweep: faulty degraded") and "exceed" in last

"""Checks shared by the end-to-end Locust tests: a run dir against the simulator's truth.

Every check reads what a user would read (the run directory) and what the simulator says
really happened (``/debug/requests``), never the code under test.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from specload.protocol.preflight import PREFLIGHT_ID_PREFIX
from specload.recorder import read_run
from tests.conftest import free_port

REPO = Path(__file__).resolve().parents[2]
LOCUSTFILE = REPO / "locustfiles" / "chat.py"

#: Constant arrivals make the schedule's count per step exact (target x window, to one at the
#: edge), a statement about pacing and splitting, not about Poisson noise in a 3-second
#: window. 64 output tokens give TPOT 63 gaps to spread a busy box's delays over.
SCENARIO = """\
name: e2e
max_tokens: 64
steps: {steps}
step_duration_s: {duration}
warmup_s: 1
arrival: constant
max_concurrency: 16
metrics_interval_s: 1
request_timeout_s: 20
prompts:
  synthetic: {{input_tokens: 64, count: 20}}
"""


def write_scenario(tmp: Path, steps: str = "[4, 8]", duration: float = 3) -> Path:
    p = tmp / "e2e.yaml"
    p.write_text(SCENARIO.format(steps=steps, duration=duration))
    return p


def specload(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specload", *args],
        cwd=cwd,
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ground_truth(url: str) -> dict[str, dict[str, Any]]:
    """The requests the server saw, without the pre-flight's own (``specload.protocol.preflight``):
    that one is the check before the run, not part of it."""
    with urllib.request.urlopen(url + "/debug/requests", timeout=10) as r:
        return {
            g["request_id"]: g
            for g in json.load(r)
            if not g["request_id"].startswith(PREFLIGHT_ID_PREFIX)
        }


def check_records_match_truth(
    run_dir: Path, truth: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """One record per request the server saw, and nothing else; all succeeded."""
    run = read_run(run_dir)
    records = list(run.record_dicts())
    ids = [r["request_id"] for r in records]
    assert len(ids) == len(set(ids)), "duplicate records"
    assert set(ids) == set(truth), (
        f"records without a server request: {sorted(set(ids) - set(truth))[:5]}, "
        f"server requests without a record: {sorted(set(truth) - set(ids))[:5]}"
    )
    assert all(r["ok"] for r in records), [r["error"] for r in records if not r["ok"]][:3]
    meta = run.meta
    assert meta.status == "completed", meta.notes
    assert meta.counts["sent"] == meta.counts["recorded"] == len(records)
    assert run.warnings == []
    return records


#: Seconds of scheduling delay a busy box may add between the server writing a token and the
#: client reading it (or the pacer's due time and the send). The bounds below are causal
#: facts plus this margin, never an accuracy target: the accuracy on a quiet machine is
#: measured by ``benchmarks/client_fidelity.py`` (TTFT/TPOT error against the same truth).
BUSY_S = 0.25
#: Clock reads of two processes on one host: the same clock, read a little apart.
CLOCK_EPS_S = 0.001


def check_timing(
    records: list[dict[str, Any]], truth: dict[str, dict[str, Any]]
) -> tuple[float, float]:
    """Each record against the server's own emission times (``/debug/requests``); returns
    the median |TTFT error| (s) and median relative TPOT error, for the log.

    The client sends before the server receives and reads the first token after the server
    wrote it, so its TTFT is not shorter than the server's (a role-only chunk or a header
    taken for the first token would be): in the median, and in each record but for the
    delay a busy box may put on the server's own stamp; it is longer by scheduling delays
    only (median under ``BUSY_S``). TPOT spans the same tokens on both sides: it may differ by the delays at its
    two ends, spread over ``output_tokens - 1`` gaps. Clock offsets between hosts cancel out:
    only differences of one side's clock are compared."""
    ttft_err, tpot_rel, tpot_abs = [], [], []
    for r in records:
        g = truth[r["request_id"]]
        assert r["output_tokens"] == g["output_tokens"], (r["request_id"], r, g)
        server_ttft = g["first_token_at"] - g["arrived_at"]
        # one record: the server stamps a token around writing it, and a busy box may delay
        # that stamp too; never by more than the margin
        assert r["ttft_s"] >= server_ttft - BUSY_S, (r["request_id"], r["ttft_s"], g)
        ttft_err.append(r["ttft_s"] - server_ttft)
        gaps = g["output_tokens"] - 1
        gt_tpot = (g["last_token_at"] - g["first_token_at"]) / gaps
        tpot_abs.append(abs(r["tpot_s"] - gt_tpot) * gaps)
        tpot_rel.append(abs(r["tpot_s"] - gt_tpot) / gt_tpot)
    ttft, tpot = statistics.median(ttft_err), statistics.median(tpot_rel)
    # as a whole, never early: a role-only chunk or a header taken for the first token
    # would make most records so
    assert ttft >= -CLOCK_EPS_S, f"median TTFT {ttft * 1e3:.1f} ms shorter than the server's"
    assert ttft <= BUSY_S, f"median TTFT excess {ttft * 1e3:.1f} ms > {BUSY_S * 1e3:.0f} ms"
    assert statistics.median(tpot_abs) <= BUSY_S, f"median TPOT error {tpot:.2%}"
    return ttft, tpot


def check_steps(
    run_dir: Path, records: list[dict[str, Any]], targets: list[float], said_in: str | None = None
) -> None:
    """Per step: the pacer's schedule holds the target rate exactly (constant arrivals), every
    request went out at or after its due time and late by scheduling delays only; warm-up
    flagged by schedule; the edge scrapes at the step's edges.

    ``said_in`` (the master's terminal output): a run whose sending may stall for reasons the
    test does not control (a worker joining on a busy box) may send a step late, but then that
    step's line must say it fell behind; lateness is never silent."""
    run = read_run(run_dir)
    assert [s["target_qps"] for s in run.steps] == targets
    for s in run.steps:
        mine = [r for r in records if r["step"] == s["index"]]
        assert mine and all(r["target_qps"] == s["target_qps"] for r in mine)
        for r in mine:
            assert r["warmup"] == (r["scheduled_at"] < s["warmup_end"]), r["request_id"]
            assert s["start"] <= r["scheduled_at"] < s["end"]
            assert r["sent_at"] >= r["scheduled_at"] - CLOCK_EPS_S, r["request_id"]
        assert any(r["warmup"] for r in mine) and not all(r["warmup"] for r in mine)
        # constant arrivals: the schedule holds target x window requests, to one at the edge
        window = s["end"] - s["warmup_end"]
        scheduled = sum(1 for r in mine if not r["warmup"])
        assert abs(scheduled - s["target_qps"] * window) <= 1, (s, scheduled)
        late = statistics.median(r["sent_at"] - r["scheduled_at"] for r in mine)
        if said_in is None:
            assert late <= BUSY_S, (s, late)
        elif late > BUSY_S:
            line = f"step {s['index'] + 1}/{len(run.steps)} "
            said = [ln for ln in said_in.splitlines() if line in ln and "fell behind" in ln]
            assert said, (s, late, said_in[-3000:])
        edges = {
            m["phase"]: m
            for m in run.metrics
            if m["step"] == s["index"] and m["phase"] != "interval"
        }
        assert set(edges) == {"start", "end"}, f"step {s['index']} lacks an edge scrape"
        # each edge scrape in its step's first or last second (a 3-s step tells them apart)
        assert abs(edges["start"]["t"] - s["start"]) < 4 * BUSY_S, (s, edges["start"]["t"])
        assert abs(edges["end"]["t"] - s["end"]) < 4 * BUSY_S, (s, edges["end"]["t"])
        assert edges["end"]["values"], "the simulator exposes /metrics: values expected"


def run_dirs_under(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob("run.json"))


def locust_proc(*args: str, cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    """``locust -f locustfiles/chat.py ARGS`` in its own session, output to ``log``."""
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), *args]
    return subprocess.Popen(
        cmd, cwd=cwd, stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True
    )


def master_and_workers(
    sim_url: str, tmp_path: Path, scenario: Path, run_dir: Path, n: int = 2
) -> tuple[subprocess.Popen[bytes], list[subprocess.Popen[bytes]]]:
    """A headless Locust master on 127.0.0.1 expecting ``n`` workers, and the workers
    (each in ``tmp_path/w{i}``, which must exist), logging to files under ``tmp_path``."""
    port = free_port()
    master = locust_proc(
        "--master",
        "--headless",
        "--expect-workers",
        str(n),
        "--master-bind-host",
        "127.0.0.1",
        "--master-bind-port",
        str(port),
        "--host",
        sim_url,
        "--scenario",
        str(scenario),
        "--label",
        "mw",
        "--run-dir",
        str(run_dir),
        "--exit-code-on-error",
        "0",
        "--json-file",
        str(tmp_path / "stats"),
        cwd=tmp_path,
        log=tmp_path / "master.log",
    )
    workers = [
        locust_proc(
            "--worker",
            "--master-host",
            "127.0.0.1",
            "--master-port",
            str(port),
            cwd=tmp_path / f"w{i}",
            log=tmp_path / f"worker{i}.log",
        )
        for i in range(n)
    ]
    return master, workers

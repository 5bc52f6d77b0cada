"""Locust's own views count each request once: the Aggregated row, RPS and failure ratio are
the ``E2E`` row's, while ``TTFT`` and ``TPOT`` stay as rows of their own.

Read through what a Locust user reads: ``--csv`` stats and history and the ``--html``
report of real headless Locust runs against the simulator (local and ``--processes 2``),
compared with the run directory's records.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from runcheck import LOCUSTFILE, write_scenario

from specload.core.records import ErrorInfo, RequestRecord
from specload.locust.events import fire_request_events
from specload.recorder import read_run


def _record(ok: bool, n: int) -> RequestRecord:
    t = 1000.0 + n
    if not ok:
        return RequestRecord(
            request_id=f"r{n}",
            worker="local",
            step=0,
            target_qps=4.0,
            warmup=False,
            scheduled_at=t,
            sent_at=t,
            done_at=t + 0.05,
            status=500,
            error=ErrorInfo("http", "500"),
        )
    return RequestRecord(
        request_id=f"r{n}",
        worker="local",
        step=0,
        target_qps=4.0,
        warmup=False,
        scheduled_at=t,
        sent_at=t,
        first_token_at=t + 0.01,
        done_at=t + 0.1,
        ttft_s=0.01,
        tpot_s=0.003,
        e2e_s=0.1,
        prompt_tokens=64,
        output_tokens=31,
        status=200,
        ok=True,
    )


def test_each_record_is_one_request_in_locusts_totals_failed_ones_one_failure() -> None:
    from locust.env import Environment

    env = Environment()
    env.create_local_runner()
    for n, ok in enumerate((True, True, False)):
        fire_request_events(env, "chat @ 4 qps", _record(ok, n))
    stats = env.stats
    assert (stats.total.num_requests, stats.total.num_failures) == (3, 1)
    rows = {m: stats.entries[("chat @ 4 qps", m)] for m in ("TTFT", "TPOT", "E2E")}
    assert {m: (e.num_requests, e.num_failures) for m, e in rows.items()} == {
        "TTFT": (2, 0),
        "TPOT": (2, 0),
        "E2E": (3, 1),
    }
    assert rows["TPOT"].max_response_time == pytest.approx(3.0)  # milliseconds
    assert [e.occurrences for e in stats.errors.values()] == [1]


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _run_locust(sim_url: str, tmp_path: Path, *extra: str) -> tuple[Path, Path]:
    """A headless run with ``--csv``/``--html``; returns (csv prefix, run dir)."""
    scenario = write_scenario(tmp_path, steps="[4, 8]", duration=2)
    run_dir, prefix = tmp_path / "run", tmp_path / "X"
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(LOCUSTFILE),
        "--headless",
        "--host",
        sim_url,
        "--scenario",
        str(scenario),
        "--label",
        "csv",
        "--run-dir",
        str(run_dir),
        "--csv",
        str(prefix),
        "--csv-full-history",
        "--html",
        str(tmp_path / "report.html"),
        "--exit-code-on-error",
        "0",
        *extra,
    ]
    res = subprocess.run(
        cmd,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        start_new_session=True,
    )
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    return prefix, run_dir


def _check_stats_csv(prefix: Path, records: list[dict[str, Any]]) -> None:
    """Aggregated = records sent; E2E rows = records per step; TTFT/TPOT rows = successes."""
    rows = _csv_rows(Path(f"{prefix}_stats.csv"))
    agg = next(r for r in rows if r["Name"] == "Aggregated")
    failed = sum(1 for r in records if not r["ok"])
    assert (int(agg["Request Count"]), int(agg["Failure Count"])) == (len(records), failed)
    per_step = Counter(f"chat @ {r['target_qps']:g} qps" for r in records)
    ok_step = Counter(f"chat @ {r['target_qps']:g} qps" for r in records if r["ok"])
    counts = {(r["Type"], r["Name"]): int(r["Request Count"]) for r in rows if r["Type"]}
    expected = {("E2E", n): c for n, c in per_step.items()}
    expected |= {(m, n): c for m in ("TTFT", "TPOT") for n, c in ok_step.items()}
    assert counts == expected


def _check_history_csv(prefix: Path, sent: int) -> None:
    """Every history sample: Aggregated = the sum of the E2E rows (counts and RPS)."""
    by_t: dict[str, dict[tuple[str, str], dict[str, str]]] = defaultdict(dict)
    for r in _csv_rows(Path(f"{prefix}_stats_history.csv")):
        by_t[r["Timestamp"]][(r["Type"], r["Name"])] = r
    busy = 0
    for rows in by_t.values():
        agg = rows[("", "Aggregated")]
        e2e = [r for (m, _), r in rows.items() if m == "E2E"]
        total = int(agg["Total Request Count"])
        assert total == sum(int(r["Total Request Count"]) for r in e2e) <= sent
        rps = sum(float(r["Requests/s"]) for r in e2e)
        assert float(agg["Requests/s"]) == pytest.approx(rps, abs=0.35)
        busy += rps > 0
    assert busy, "no history sample with requests: the RPS check checked nothing"


def _check_html(path: Path, sent: int) -> None:
    """Locust's ``--html`` report carries the same Aggregated count."""
    page = path.read_text()
    start = page.index("window.templateArgs = ") + len("window.templateArgs = ")
    stats = json.JSONDecoder().raw_decode(page, start)[0]["requests_statistics"]
    agg = next(r for r in stats if r["name"] == "Aggregated")
    assert agg["num_requests"] == sent
    assert {r["method"] for r in stats if r["name"] != "Aggregated"} == {"TTFT", "TPOT", "E2E"}


def _check_run(prefix: Path, run_dir: Path, tmp_path: Path) -> None:
    run = read_run(run_dir)
    records = list(run.record_dicts())
    sent = run.meta.counts["sent"]
    assert sent == len(records) > 0
    _check_stats_csv(prefix, records)
    _check_history_csv(prefix, sent)
    _check_html(tmp_path / "report.html", sent)


def test_locust_csv_counts_each_request_once_locally(sim, tmp_path: Path) -> None:
    prefix, run_dir = _run_locust(sim.url, tmp_path)
    _check_run(prefix, run_dir, tmp_path)


@pytest.mark.slow
def test_locust_csv_counts_each_request_once_with_processes_2(sim, tmp_path: Path) -> None:
    """Workers send TTFT/TPOT entries and the E2E-only total in their reports to the master."""
    prefix, run_dir = _run_locust(sim.url, tmp_path, "--processes", "2")
    _check_run(prefix, run_dir, tmp_path)
    assert len(read_run(run_dir).meta.counts["by_worker"]) == 2

"""Checks every fault-matrix row makes: one record per request sent, the right error kinds,
records that survive, run.json's status, and error rates per step in the compare report.

A row's figures (what the run did, records lost) go into ``Row`` and, through the
``matrix_row`` fixture, into the results file that ``scripts/reliability_table.py`` turns
into ``docs/reliability.md``.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from specload.cli.main import main
from specload.protocol.preflight import PREFLIGHT_ID_PREFIX
from specload.recorder import read_run
from tests.conftest import REPO

#: Two steps at different loads (compare pools steps by target QPS), no warm-up so every
#: record counts in the report, and a short request timeout for the stall rows.
SCENARIO = """\
name: fault
max_tokens: {max_tokens}
steps: {steps}
step_duration_s: {duration}
warmup_s: 0
arrival: constant
max_concurrency: 16
metrics_interval_s: 1
request_timeout_s: {timeout}
prompts:
  synthetic: {{input_tokens: 16, count: 8}}
"""


def write_scenario(
    tmp: Path,
    *,
    steps: str = "[4, 8]",
    duration: float = 1.0,
    timeout: float = 2.0,
    max_tokens: int = 16,
) -> Path:
    p = tmp / "fault.yaml"
    p.write_text(
        SCENARIO.format(steps=steps, duration=duration, timeout=timeout, max_tokens=max_tokens)
    )
    return p


def specload_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "specload", *args]


def start_run(host: str, scenario: Path, cwd: Path, *extra: str) -> subprocess.Popen[bytes]:
    """A headless ``specload run`` (label ``fault``, into ``cwd/out``) left running, so a
    test can inject its fault mid-run; stdout and stderr are kept for its checks."""
    cmd = specload_cmd(
        "run", "--host", host, "--scenario", str(scenario), "--label", "fault", "--out", "out",
        *extra,
    )  # fmt: skip
    return subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def run_specload(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        specload_cmd(*args), cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )


def wait_for_step(run_dir: Path, index: int = 0, timeout_s: float = 60) -> dict[str, Any]:
    """The step entry once steps.json lists step ``index`` (the run is under way)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        with contextlib.suppress(OSError, ValueError):
            steps = json.loads((run_dir / "steps.json").read_text())
            if len(steps) > index:
                return steps[index]
        time.sleep(0.05)
    raise TimeoutError(f"{run_dir}: step {index} did not start within {timeout_s} s")


@dataclass
class Row:
    """One line of the reliability table (filled in by a test)."""

    fault: str
    injected: str = ""
    exit_code: int | None = None
    status: str = ""
    sent: int = 0
    recorded: int = 0
    server_saw: int | None = None
    lost: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    report_error_rates: dict[str, float] = field(default_factory=dict)
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def kind_of(record: dict[str, Any]) -> str:
    return "ok" if record["ok"] else record["error"]["kind"]


def check_records(
    row: Row,
    run_dir: Path,
    *,
    status: str,
    allowed: set[str],
    server_ids: set[str] | None = None,
    expected: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Every request sent has exactly one record, with a kind from ``allowed`` (and, where
    the server said per request what it did, exactly that kind); run.json's counts agree."""
    run = read_run(run_dir)
    records = list(run.record_dicts())
    ids = [r["request_id"] for r in records]
    assert len(ids) == len(set(ids)), "a request has two records"
    meta = run.meta
    assert meta.status == status, (meta.status, meta.notes)
    assert meta.ended_at is not None
    counts = meta.counts
    assert counts["sent"] == counts["recorded"] == len(records) > 0, counts
    for r in records:
        assert r["ok"] == (r["error"] is None)
    kinds = Counter(kind_of(r) for r in records)
    assert set(kinds) <= allowed, kinds
    if server_ids is not None:  # every request the server saw has its record
        missing = server_ids - set(ids)
        assert not missing, f"{len(missing)} requests the server saw have no record"
    if expected is not None:
        got = {r["request_id"]: kind_of(r) for r in records}
        assert got == expected, {k: (got.get(k), v) for k, v in expected.items() if got.get(k) != v}
    row.status, row.sent, row.recorded = meta.status, counts["sent"], len(records)
    row.server_saw = None if server_ids is None else len(server_ids)
    row.lost = counts["sent"] - len(records)
    row.kinds = dict(sorted(kinds.items()))
    return records


def check_report(row: Row, run_dir: Path, out: Path) -> dict[str, Any]:
    """``specload compare`` on the run: per step, the error rate and kinds of the records."""
    buf_out, buf_err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buf_out), contextlib.redirect_stderr(buf_err):
        code = main(
            [
                "compare",
                str(run_dir),
                "--out",
                str(out),
                "--no-html",
                "--bootstrap",
                "100",
                "--quiet",
            ]
        )
    assert code == 0, buf_err.getvalue()
    report = json.loads((out / "report.json").read_text())
    label = read_run(run_dir).meta.label
    by_qps: dict[float, list[dict[str, Any]]] = {}
    for r in read_run(run_dir).record_dicts():
        if not r["warmup"]:
            by_qps.setdefault(float(r["target_qps"]), []).append(r)
    steps = {float(s["target_qps"]): s for s in report["steps"][label]}
    assert set(steps) == set(by_qps), (sorted(steps), sorted(by_qps))
    for qps, recs in by_qps.items():
        failed = Counter(kind_of(r) for r in recs if not r["ok"])
        s = steps[qps]
        assert s["n"] == len(recs)
        assert abs(s["error_rate"] - sum(failed.values()) / len(recs)) < 1e-9, (qps, s)
        assert s["error_kinds"] == dict(failed), (qps, s["error_kinds"], failed)
        row.report_error_rates[f"{qps:g}"] = s["error_rate"]
    md = (out / "report.md").read_text()
    header = next(line for line in md.splitlines() if line.startswith("| QPS |"))
    assert "| errors |" in header and "| error kinds |" in header, header
    return report


def snapshot(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def survived(before: bytes, run_dir: Path) -> None:
    """Records on disk at the moment of the fault are still there, byte for byte."""
    after = (run_dir / "requests.jsonl").read_bytes()
    complete = before[: before.rfind(b"\n") + 1]
    assert after.startswith(complete), "records written before the fault were changed"


@dataclass
class RawProc:
    """A running ``tests/faults/rawserver.py`` process and its request log."""

    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def lines(self, tag: str) -> list[list[str]]:
        return [
            x.split(" ")[1:] for x in self.log.read_text().splitlines() if x.startswith(tag + " ")
        ]

    def expected(self) -> dict[str, str]:
        """``{X-Request-Id: expected outcome}`` for every chat request of the run it received
        (the pre-flight's request, before the run, left out)."""
        return {
            rid: expect
            for rid, expect in self.lines("REQ")
            if not rid.startswith(PREFLIGHT_ID_PREFIX)
        }

    def auth_digests(self) -> set[str]:
        """sha256[:16] of each Authorization header it received."""
        return {digest for _rid, digest in self.lines("AUTH")}


def start_raw(mode: str, *args: str, log_dir: Path) -> RawProc:
    """Start ``python -m tests.faults.rawserver MODE ARGS``; stop it with ``stop_process``."""
    log = log_dir / f"raw-{mode}-{time.monotonic_ns()}.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.faults.rawserver", mode, *args],
            cwd=REPO,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.time() + 20
    while not log.read_text().startswith("port "):
        assert proc.poll() is None and time.time() < deadline, log.read_text()
        time.sleep(0.02)
    port = int(log.read_text().split()[1])
    return RawProc(url=f"http://127.0.0.1:{port}", proc=proc, log=log)

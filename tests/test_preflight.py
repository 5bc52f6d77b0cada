"""Pre-flight: a target that cannot serve the run fails before any load, with one line, exit 2,
and no run directory; ``--skip-preflight`` goes without the check.

Real servers on loopback: the simulator (wrong model via ``--served-model-name``, HTTP 500 on
every chat via its fault switch), the raw server of ``tests/faults`` (no ``/v1/models``, a
stream without usage), a port nobody listens on, a socket that never answers.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from specload.core.errors import ConfigError
from specload.core.procgroup import group_alive
from specload.protocol.preflight import PREFLIGHT_ID_PREFIX, PreflightError, preflight
from tests.conftest import REPO, free_port, stop_process, wait_http
from tests.faults.matrix import start_raw

SCENARIO = """\
name: preflight
{model}max_tokens: 8
steps: [4]
step_duration_s: 1
warmup_s: 0
max_concurrency: 4
request_timeout_s: 10
prompts:
  synthetic: {{input_tokens: 16, count: 4}}
"""
LOCUSTFILE = REPO / "locustfiles" / "chat.py"


def _scenario(tmp: Path, model: str | None = None) -> Path:
    p = tmp / "s.yaml"
    p.write_text(SCENARIO.format(model=f"model: {model}\n" if model else ""))
    return p


def _run(
    tmp: Path, host: str, *extra: str, out: str = "out", model: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "specload",
            "run",
            "--host",
            host,
            "--scenario",
            str(_scenario(tmp, model)),
            "--label",
            "p",
            "--out",
            out,
            *extra,
        ],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _one_line(res: subprocess.CompletedProcess[str]) -> str:
    """Exit 2, nothing on stdout, exactly one line on stderr, no traceback."""
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def _nothing_written(tmp: Path) -> None:
    """No directory at all in the test's folder (only the scenario and server logs)."""
    assert not [p for p in tmp.iterdir() if p.is_dir()], list(tmp.iterdir())


def test_closed_port_fails_at_once_naming_the_url_and_leaves_no_run_dir(tmp_path: Path) -> None:
    port = free_port()
    line = _one_line(_run(tmp_path, f"http://127.0.0.1:{port}", out="runs/a/b"))
    assert f"http://127.0.0.1:{port}/v1/models" in line and "refused" in line.lower()
    _nothing_written(tmp_path)  # runs/a/b was made to test it is writable, then removed


def test_v1_in_the_host_is_refused_with_the_fix(sim, tmp_path: Path) -> None:
    line = _one_line(_run(tmp_path, sim.url + "/v1/"))
    assert "drop /v1" in line and f"(use {sim.url})" in line
    _nothing_written(tmp_path)


def test_wrong_model_names_the_served_ones(sim_factory, tmp_path: Path) -> None:
    sim = sim_factory("--profile", "tiny", "--served-model-name", "served-a")
    line = _one_line(_run(tmp_path, sim.url, model="wanted-b"))
    assert "'wanted-b'" in line and "served-a" in line
    _nothing_written(tmp_path)


def test_http_500_on_chat_shows_status_and_body_but_never_the_key(
    sim_factory, tmp_path: Path
) -> None:
    sim = sim_factory("--profile", "tiny", "--fault-error-rate", "1", "--fault-error-status", "500")
    key = "sk-PREFLIGHTKEY-91c2"
    res = _run(tmp_path, sim.url, "--api-key", key)
    line = _one_line(res)
    assert "/v1/chat/completions answered HTTP 500" in line and "Internal error" in line
    assert key not in res.stderr + res.stdout
    _nothing_written(tmp_path)


def test_skip_preflight_runs_against_a_failing_server(sim_factory, tmp_path: Path) -> None:
    sim = sim_factory("--profile", "tiny", "--fault-error-rate", "1", "--fault-error-status", "500")
    res = _run(tmp_path, sim.url, "--skip-preflight")
    assert res.returncode == 1, res.stderr  # the run happened: every request failed
    meta = json.loads((tmp_path / "out" / "run.json").read_text())
    assert meta["status"] == "degraded" and meta["counts"]["recorded"] > 0


def test_a_healthy_target_passes_and_its_check_is_a_tagged_request(sim_factory) -> None:
    sim = sim_factory("--profile", "tiny", "--ground-truth")
    result = preflight(sim.url, model=None, api_key=None)
    assert result.model == "specload-sim" and result.models == ["specload-sim"]
    assert result.usage["completion_tokens"] >= 1
    with urllib.request.urlopen(sim.url + "/debug/requests", timeout=10) as r:
        ids = [g["request_id"] for g in json.load(r)]
    assert len(ids) == 1 and ids[0].startswith(PREFLIGHT_ID_PREFIX)


@pytest.fixture
def raw_text(tmp_path: Path) -> Iterator:
    raw = start_raw("text", log_dir=tmp_path)
    yield raw
    stop_process(raw.proc)


def test_server_without_models_endpoint_is_checked_by_its_stream_with_the_key(raw_text) -> None:
    """No /v1/models (404): the model check is skipped; the stream is still checked, and the
    key goes as a bearer token."""
    result = preflight(raw_text.url, model="anything", api_key="sk-raw-1")
    assert result.models is None and result.model == "anything"
    digest = hashlib.sha256(b"Bearer sk-raw-1").hexdigest()[:16]
    assert raw_text.auth_digests() == {digest}


def test_stream_without_usage_or_finish_fails(tmp_path: Path) -> None:
    raw = start_raw("nofinish", log_dir=tmp_path)  # content chunks, no finish, no usage
    try:
        with pytest.raises(PreflightError, match="no usage object") as err:
            preflight(raw.url, model=None, api_key=None)
    finally:
        stop_process(raw.proc)
    assert err.value.exit_code == 2


def test_a_server_that_never_answers_fails_within_the_budget() -> None:
    with socket.socket() as listener:  # accepts connections (backlog) but never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        with pytest.raises(PreflightError, match=url):
            preflight(url, model=None, api_key=None, budget_s=0.5)


def test_v1_path_is_a_config_error_in_process() -> None:
    with pytest.raises(ConfigError, match="drop /v1"):
        preflight("http://127.0.0.1:9/v1", model=None, api_key=None)


# --- the Locust plugin ---------------------------------------------------------------------
def test_headless_locust_against_a_closed_port_exits_2_with_one_line(tmp_path: Path) -> None:
    port = free_port()
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "locust",
            "-f",
            str(LOCUSTFILE),
            "--headless",
            "--host",
            f"http://127.0.0.1:{port}",
            "--scenario",
            str(_scenario(tmp_path)),
            "--run-dir",
            str(tmp_path / "runs" / "x"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    out = res.stdout + res.stderr
    assert res.returncode == 2, out[-3000:]
    errors = [x for x in out.splitlines() if x.startswith("specload: error:")]
    assert len(errors) == 1 and f"127.0.0.1:{port}" in errors[0], errors
    assert "Traceback" not in out
    _nothing_written(tmp_path)


def test_web_ui_start_against_a_closed_port_logs_it_and_starts_no_run(tmp_path: Path) -> None:
    web, port = free_port(), free_port()
    log = tmp_path / "ui.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "locust",
                "-f",
                str(LOCUSTFILE),
                "--web-host",
                "127.0.0.1",
                "--web-port",
                str(web),
                "--host",
                f"http://127.0.0.1:{port}",
                "--scenario",
                str(_scenario(tmp_path)),
                "--run-dir",
                str(tmp_path / "runs" / "x"),
            ],
            cwd=tmp_path,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        ui = f"http://127.0.0.1:{web}"
        wait_http(ui + "/", proc=proc)
        with urllib.request.urlopen(ui + "/", timeout=10) as r:
            assert '"skip_preflight"' in r.read().decode()  # the option is in the form
        form = urllib.parse.urlencode({"host": f"http://127.0.0.1:{port}"}).encode()
        with urllib.request.urlopen(ui + "/swarm", data=form, timeout=30) as r:
            assert json.load(r)["success"]
        _wait_for_text(log, "pre-flight: cannot reach", proc)
    finally:
        stop_process(proc)
    assert f"127.0.0.1:{port}/v1/models" in log.read_text()
    assert not (tmp_path / "runs").exists()


def _wait_for_text(
    log: Path, text: str, proc: subprocess.Popen[bytes], timeout_s: float = 60.0
) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in log.read_text(errors="replace"):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.1)


# --- sweep ---------------------------------------------------------------------------------
def _sweep(tmp: Path, *args: str, model: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "specload",
            "sweep",
            *args,
            "--scenario",
            str(_scenario(tmp, model)),
            "--out",
            str(tmp / "sw"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_sweep_url_at_a_closed_port_or_with_v1_exits_2_and_leaves_no_run_dir(
    tmp_path: Path,
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    for bad, says in ((url, "cannot reach"), (url + "/v1", "drop /v1")):
        res = _sweep(tmp_path, "--url", bad, "--label", "x")
        assert res.returncode == 2 and says in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
        assert not (tmp_path / "sw" / "x").exists()


def test_sweep_checks_each_server_once_healthy_and_stops_it_on_failure(tmp_path: Path) -> None:
    sim = (
        f"{shlex.quote(sys.executable)} -m specload sim --host 127.0.0.1 --port {{port}} "
        "--profile tiny"
    )
    res = _sweep(
        tmp_path, "--server-cmd", sim, "--condition", "a=", "--condition", "b=", model="not-served"
    )
    assert res.returncode == 2, res.stdout + res.stderr
    assert "'not-served' is not served" in res.stderr and "specload-sim" in res.stderr
    log = (tmp_path / "sw" / "a" / "server.log").read_text()
    pgid = int(re.search(r"server pid (\d+)", log)[1])
    assert not group_alive(pgid)  # the server was stopped (its zombie may await PID 1)
    assert not (tmp_path / "sw" / "a" / "run.json").exists()
    assert not (tmp_path / "sw" / "b").exists()  # nothing after a failed pre-flight

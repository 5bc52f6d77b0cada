"""Server lifecycle: real processes started, health-checked, reset and stopped by group.

The healthy path uses the real simulator (``python -m specload sim``). The failure paths use
small real processes with one behaviour each (exits at once, never listens, ignores SIGTERM,
lacks /reset_prefix_cache), because the simulator has none of those behaviours.
"""

from __future__ import annotations

import os
import shlex
import sys
import textwrap
import time
from pathlib import Path

import pytest

from specload.core.errors import ConfigError, TargetError
from specload.protocol.target import (
    ExternalTarget,
    ManagedServer,
    build_server_cmd,
    log_tail,
    reset_prefix_cache,
)
from tests.conftest import free_port

PY = shlex.quote(sys.executable)
SIM_CMD = f"{PY} -m specload sim --host 127.0.0.1 --port {{port}} --profile tiny"

#: A minimal HTTP server: /health is 200, everything else 404; with ``--orphan FILE`` it
#: forks a child that ignores SIGTERM and writes its pid to FILE.
STUB = textwrap.dedent(
    """
    import http.server, os, signal, sys, time
    port = int(sys.argv[1])
    if len(sys.argv) > 3 and sys.argv[2] == "--orphan":
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            while True:
                time.sleep(1)
        open(sys.argv[3], "w").write(str(pid))
    class H(http.server.BaseHTTPRequestHandler):
        def _answer(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()
        do_GET = do_POST = _answer
        def log_message(self, *a):
            pass
    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is not running.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def _stub_cmd(tmp_path: Path, *args: str) -> str:
    script = tmp_path / "stub_server.py"
    script.write_text(STUB)
    return f"{PY} {shlex.quote(str(script))} {{port}} " + " ".join(shlex.quote(a) for a in args)


def test_command_line_substitutes_port_and_quotes_json_flags() -> None:
    flags = ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4}']
    line = build_server_cmd("vllm serve m --port {port}", flags, 8123)
    assert shlex.split(line) == ["vllm", "serve", "m", "--port", "8123", *flags]


def test_command_without_port_placeholder_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--server-cmd.*\{port\}"):
        ManagedServer("vllm serve m", [], 8000, tmp_path / "server.log")


def test_simulator_starts_healthy_resets_cache_and_stops_by_group(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    server = ManagedServer(SIM_CMD, ["--enable-prefix-caching"], free_port(), log)
    with server:
        assert server.pid is not None and _alive(server.pid)
        assert reset_prefix_cache(server.url) is True
        assert f"--port {server.port}" in server.command_line
        assert server.command_line.endswith("--enable-prefix-caching")
        pid = server.pid
    assert not _alive(pid)
    assert log.read_text().startswith(f"$ {server.command_line}\n")
    server.stop()  # idempotent


def test_server_that_exits_at_start_raises_with_its_log_tail(tmp_path: Path) -> None:
    cmd = f"{PY} -c 'import sys; print(\"cannot load model weights\"); sys.exit(3)' {{port}}"
    server = ManagedServer(cmd, [], free_port(), tmp_path / "server.log", health_timeout_s=30)
    with pytest.raises(TargetError) as err:
        server.start()
    msg = str(err.value)
    assert "exited with code 3" in msg
    assert "cannot load model weights" in msg
    assert str(tmp_path / "server.log") in msg
    assert server.pid is not None and not _alive(server.pid)


def test_server_never_healthy_times_out_and_its_group_is_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    # A shell that starts a sleeping child and never listens on the port.
    cmd = f"{PY} -c 'import time; time.sleep(60)' {{port}} & echo $! > {pidfile}; wait"
    waited: list[float] = []
    server = ManagedServer(
        cmd, [], free_port(), tmp_path / "server.log", health_timeout_s=1.0,
        on_waiting=waited.append, waiting_note_every_s=0.3,
    )  # fmt: skip
    with pytest.raises(TargetError, match=r"did not answer .*/health within 1 s"):
        server.start()
    assert waited and waited == sorted(waited), "the wait is reported while it lasts"
    child = int(pidfile.read_text())
    assert not _alive(child)
    assert server.pid is not None and not _alive(server.pid)


def test_stop_kills_a_child_that_ignores_sigterm(tmp_path: Path) -> None:
    pidfile = tmp_path / "orphan.pid"
    server = ManagedServer(
        _stub_cmd(tmp_path, "--orphan", str(pidfile)),
        [],
        free_port(),
        tmp_path / "s.log",
        stop_timeout_s=0.5,
    )
    server.start()
    orphan = int(pidfile.read_text())
    assert _alive(orphan)
    server.stop()
    deadline = time.monotonic() + 5
    while _alive(orphan) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(orphan)


def test_reset_on_a_server_without_the_endpoint_is_skipped(tmp_path: Path) -> None:
    with ManagedServer(_stub_cmd(tmp_path), [], free_port(), tmp_path / "s.log") as server:
        assert reset_prefix_cache(server.url) is False


def test_external_target_checks_reachability_and_never_stops_the_server(sim) -> None:
    target = ExternalTarget(sim.url + "/")
    target.start()
    target.stop()
    assert target.url == sim.url and target.command_line is None
    assert sim.proc.poll() is None
    with pytest.raises(TargetError, match="cannot reach"):
        ExternalTarget(f"http://127.0.0.1:{free_port()}").start()


def test_log_tail_keeps_the_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert log_tail(log, lines=3) == "line 97\nline 98\nline 99"
    assert log_tail(tmp_path / "missing.log") == ""

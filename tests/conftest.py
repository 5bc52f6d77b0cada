"""Shared test helpers: real servers on 127.0.0.1 with ports chosen at run time.

Every process a fixture starts is stopped by its PID (process group) when the test ends.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import settings

import specload.core.ports

REPO = Path(__file__).resolve().parent.parent
__all__ = ["REPO", "examples", "free_port", "start_sim", "stop_process", "wait_http"]

#: Hypothesis: each property test states its full example count (``examples(n)``); a run
#: draws a quarter of it (at least 10) unless ``HYPOTHESIS_PROFILE=nightly`` asks for all of
#: it. The tests derandomize, so a bounded run draws the same examples every time.
HYPOTHESIS_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "bounded")
settings.register_profile("bounded", deadline=None)
settings.register_profile("nightly", deadline=None, max_examples=400)
settings.load_profile(HYPOTHESIS_PROFILE)


def _port_slice() -> range:
    """Ports this test process picks from: below the kernel's ephemeral range (no outgoing
    connection ever takes one), a slice of its own per pytest-xdist worker (no neighbour
    picks the same). Empty where the ephemeral range leaves no room below it."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return range(0)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    width = (low - 12000) // 16
    start = 12000 + (index % 16) * width
    return range(start, start + width) if width >= 200 else range(0)


_PORTS = _port_slice()
_next_port = 0


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now, for a server a test starts: from this
    process's own slice (``_port_slice``), taken in turn so a port just given up is not
    handed out again soon; the kernel's pick where there is no slice."""
    global _next_port
    for _ in range(len(_PORTS)):
        port = _PORTS[_next_port % len(_PORTS)]
        _next_port += 1
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    return specload.core.ports.free_port()


def _poll_xdist_queue(config: pytest.Config) -> None:
    """Let a pytest-xdist worker wait for its next test without a gevent LoopExit.

    Locust monkey-patches ``threading`` when a test imports it; from then on the worker's
    wait for more tests (``TestQueue.get``: an ``Event.wait`` on the main thread, which xdist's
    I/O thread sets) allocates a gevent lock that a real thread cannot wake, and gevent ends
    the worker ("This operation would block forever"). Polling the queue with ``time.sleep``
    (gevent's after the patch, real before) waits the same way on both sides of it. The
    queue's class is found on the worker's plugin, as xdist runs its worker code as a
    source string, not as the importable ``xdist.remote``."""
    for plugin in config.pluginmanager.get_plugins():
        queue = getattr(plugin, "torun", None)
        if queue is None or not hasattr(queue, "lock"):
            continue

        def get(self: object) -> object:
            while True:
                with self.lock() as items:  # type: ignore[attr-defined]
                    if items:
                        return items.popleft()
                time.sleep(0.01)

        type(queue).get = get


def examples(nightly: int) -> int:
    """Hypothesis examples for a property test whose full count is ``nightly``."""
    return nightly if HYPOTHESIS_PROFILE == "nightly" else max(10, nightly // 4)


def pytest_configure(config: pytest.Config) -> None:
    """Tests interrupt the processes they start with SIGINT, as a Ctrl-C would. A shell
    without job control starts a background job (``make test &``) with SIGINT ignored, and
    an ignored signal stays ignored in every child, so those tests would see no Ctrl-C at
    all: give SIGINT back its usual meaning here, for this process and all it starts."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    _poll_xdist_queue(config)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``make test`` (``--dist loadscope``): tests that share a wide-scoped fixture stay on
    one worker, every other test is spread on its own (``tests/scheduling.py``)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from tests.scheduling import SharedFixtureScheduling

    return SharedFixtureScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Hand out the longest work first (the real-vLLM group, then modules with a test marked
    slow) so that no xdist worker starts it last. Whole modules move, so a serial run keeps
    each module's fixtures set up once."""

    order: dict[str, tuple[int, int]] = {}  # module -> (its most urgent rank, first seen)
    for item in items:
        module = item.nodeid.split("::")[0]
        marks = {m.name for m in item.iter_markers()}
        rank = 0 if "vllm" in marks else 1 if "slow" in marks else 2
        first = order.get(module, (rank, len(order)))
        order[module] = (min(rank, first[0]), first[1])
    items.sort(key=lambda i: order[i.nodeid.split("::")[0]])


def wait_http(url: str, timeout_s: float = 20.0, proc: subprocess.Popen | None = None) -> None:
    """Poll ``url`` until it answers 200, or fail with the process's exit status."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer within {timeout_s} s")


def specload_run(
    host: str, scenario: Path, label: str, out: Path, *extra: str, timeout_s: float = 120.0
) -> Path:
    """``specload run`` as a user types it (a child process); the run dir, or a failure with
    what the command printed."""
    cmd = [sys.executable, "-m", "specload", "run", "--host", host, "--scenario", str(scenario)]
    cmd += ["--label", label, "--out", str(out), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    assert proc.returncode == 0, f"specload run exited {proc.returncode}: {proc.stderr[-2000:]}"
    return out


def stop_process(proc: subprocess.Popen, timeout_s: float = 10.0) -> None:
    """SIGTERM the process group we started, then SIGKILL if it lingers."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=timeout_s)


@dataclass
class SimServer:
    """A running ``specload sim`` subprocess."""

    url: str
    port: int
    proc: subprocess.Popen
    log: Path

    def stop(self) -> None:
        stop_process(self.proc)


def start_sim(*args: str, log_dir: Path, port: int | None = None) -> SimServer:
    """Start ``python -m specload sim`` on a free port with extra CLI ``args``; wait for /health."""
    port = port or free_port()
    log = log_dir / f"sim-{port}.log"
    cmd = [
        sys.executable,
        "-m",
        "specload",
        "sim",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *args,
    ]
    fh = open(log, "wb")  # noqa: SIM115 - the server writes to it for the test's lifetime
    proc = subprocess.Popen(
        cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/health", proc=proc)
    except Exception:  # noqa: BLE001 - any start failure: stop it and show its log
        stop_process(proc)
        raise RuntimeError(
            f"sim failed to start: {log.read_text(errors='replace')[-2000:]}"
        ) from None
    return SimServer(url=url, port=port, proc=proc, log=log)


@pytest.fixture
def sim_factory(tmp_path: Path) -> Iterator:
    """Start any number of simulators in a test; all are stopped at teardown."""
    started: list[SimServer] = []

    def factory(*args: str) -> SimServer:
        s = start_sim(*args, log_dir=tmp_path)
        started.append(s)
        return s

    yield factory
    for s in started:
        s.stop()


@pytest.fixture
def sim(sim_factory) -> SimServer:
    """One simulator with the small fast test profile."""
    return sim_factory("--profile", "tiny")


#: A real DCGM exporter's /metrics text (two H200s), served by the ``exporter`` fixture.
DCGM_TEXT = (REPO / "tests" / "fixtures" / "metrics" / "dcgm_exporter.prom").read_text()


@dataclass
class FakeExporter:
    """A DCGM exporter stand-in: serves ``body`` at ``/metrics`` (changeable between reads)."""

    url: str
    body: str = DCGM_TEXT
    requests: list[str] = field(default_factory=list)


@pytest.fixture
def exporter() -> Iterator[FakeExporter]:
    state = FakeExporter(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.requests.append(self.path)
            if self.path != "/metrics":
                self.send_error(404)
                return
            data = state.body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

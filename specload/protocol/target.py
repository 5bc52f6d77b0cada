"""Server lifecycle for ``specload sweep``: one server process per measured condition.

A sweep compares conditions that differ only in server flags, so each condition gets a fresh
server: started from the user's command line (``{port}`` substituted) in its own process
group, logged to a file in the run dir, declared ready when ``GET /health`` answers 200, its
prefix cache reset, and stopped by signalling the whole group (SIGTERM, then SIGKILL), so
engine worker processes that vLLM forks do not outlive the sweep.

A server that exits at start or never becomes healthy raises ``TargetError`` with the last
lines of its log: the user's first question is always "what did the server say?".

``ExternalTarget`` is a server someone else manages (``--url``): start and stop do nothing.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from specload.core.errors import ConfigError, TargetError
from specload.core.procgroup import stop_group
from specload.protocol.preflight import PreflightError, os_reason

__all__ = [
    "PORT_PLACEHOLDER",
    "REPLICATE_PLACEHOLDER",
    "ExternalTarget",
    "ManagedServer",
    "Target",
    "build_server_cmd",
    "log_tail",
    "reset_prefix_cache",
]

#: What the user writes in ``--server-cmd`` where the port goes.
PORT_PLACEHOLDER = "{port}"
#: ... and where the replicate number (1, 2, ...) goes, e.g. a per-start seed.
REPLICATE_PLACEHOLDER = "{replicate}"

#: How often /health is polled while a server starts (seconds).
_POLL_S = 0.2


class Target(Protocol):
    """What a sweep needs from a server: a URL, start, stop, and the command line it ran."""

    @property
    def url(self) -> str: ...

    @property
    def command_line(self) -> str | None: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


def build_server_cmd(
    template: str, extra_flags: Sequence[str], port: int, replicate: int = 1
) -> str:
    """The exact shell command line for one condition: template + quoted extra flags.

    ``{port}`` and ``{replicate}`` are replaced by plain text substitution (not
    ``str.format``), because server commands carry JSON with braces, e.g.
    ``--speculative-config '{"method": "ngram"}'``.
    """
    flags = shlex.join(list(extra_flags))
    line = f"{template} {flags}" if flags else template
    return line.replace(PORT_PLACEHOLDER, str(port)).replace(REPLICATE_PLACEHOLDER, str(replicate))


def log_tail(path: Path, lines: int = 20, max_chars: int = 4000) -> str:
    """The last ``lines`` lines of a log file (empty string if there is none)."""
    try:
        data = path.read_bytes()[-max_chars * 4 :]
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    tail = "\n".join(text.rstrip("\n").splitlines()[-lines:])
    return tail[-max_chars:]


def _request(url: str, method: str = "GET", timeout_s: float = 2.0) -> int:
    """HTTP status of one request; raises ``OSError`` when the server cannot be reached."""
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def reset_prefix_cache(url: str, timeout_s: float = 30.0) -> bool:
    """``POST /reset_prefix_cache`` so one condition's cache does not help the next.

    Returns False when the server has no such endpoint (404/405: real vLLM exposes it only
    with ``VLLM_SERVER_DEV_MODE=1``), True when the cache was reset. Any other failure is a
    ``TargetError``: a server that cannot reset would make prefix numbers meaningless.
    """
    try:
        status = _request(url.rstrip("/") + "/reset_prefix_cache", "POST", timeout_s)
    except OSError as exc:
        raise TargetError(f"{url}/reset_prefix_cache: {exc}") from exc
    if status in (404, 405):
        return False
    if status >= 400:
        raise TargetError(f"{url}/reset_prefix_cache answered HTTP {status}")
    return True


@dataclass
class ExternalTarget:
    """A server someone else manages (``--url``): nothing to start or stop."""

    base_url: str

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/")

    @property
    def command_line(self) -> str | None:
        return None

    def start(self) -> None:
        """Check only that the server is there, so a typo fails before any load (exit 2, as
        the pre-flight's refused port: nothing ran)."""
        try:
            _request(self.url + "/health")
        except OSError as exc:
            raise PreflightError(
                f"cannot reach {self.url}/health: {os_reason(exc)} (is the server up?)"
            ) from None

    def stop(self) -> None:
        return None


@dataclass
class ManagedServer:
    """A server process this sweep starts and stops; ``command_line`` is what it ran.

    ``health_timeout_s`` bounds the wait for ``/health`` (vLLM loads weights and compiles
    graphs first, so minutes are normal); ``stop_timeout_s`` is the grace period between
    SIGTERM and SIGKILL.
    """

    template: str
    extra_flags: Sequence[str]
    port: int
    log_path: Path
    host: str = "127.0.0.1"
    health_timeout_s: float = 600.0
    stop_timeout_s: float = 20.0
    env: dict[str, str] | None = None
    #: which server start of its condition this is (``{replicate}`` in the template)
    replicate: int = 1
    #: Called with the seconds waited so far, every ``waiting_note_every_s`` while the server
    #: starts (a vLLM start takes minutes; silence looks like a hang).
    on_waiting: Callable[[float], None] | None = None
    waiting_note_every_s: float = 15.0
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False)
    _log: IO[bytes] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if PORT_PLACEHOLDER not in self.template:
            raise ConfigError(
                f"has no {PORT_PLACEHOLDER} placeholder (expected e.g. "
                f"'vllm serve MODEL --port {PORT_PLACEHOLDER}')",
                path="--server-cmd",
            )

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def command_line(self) -> str:
        return build_server_cmd(self.template, self.extra_flags, self.port, self.replicate)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def exit_code(self) -> int | None:
        """The server's exit status if it has exited (crashed mid-run), else None."""
        return self.proc.poll() if self.proc else None

    def start(self) -> None:
        """Start the command in a new process group and wait until ``/health`` answers 200."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed by stop()
        self._log.write(f"$ {self.command_line}\n".encode())
        self._log.flush()
        env = {**os.environ, **(self.env or {})}
        self.proc = subprocess.Popen(
            self.command_line,
            shell=True,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
        # The group id is the shell's pid; tests and users find the server by it.
        pid = self.proc.pid
        self._log.write(f"[specload] server pid {pid} (process group {pid})\n".encode())
        self._log.flush()
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise

    def _wait_healthy(self) -> None:
        assert self.proc is not None
        started = time.monotonic()
        deadline = started + self.health_timeout_s
        next_note = started + self.waiting_note_every_s
        while True:
            code = self.proc.poll()
            if code is not None:
                what = f"server exited with code {code} before {self.url}/health answered"
                raise TargetError(self._failure(what))
            try:
                if _request(self.url + "/health", timeout_s=2.0) == 200:
                    return
            except OSError:
                pass
            if time.monotonic() >= deadline:
                what = f"server did not answer {self.url}/health within {self.health_timeout_s:g} s"
                raise TargetError(self._failure(what))
            if self.on_waiting is not None and time.monotonic() >= next_note:
                self.on_waiting(time.monotonic() - started)
                next_note += self.waiting_note_every_s
            time.sleep(_POLL_S)

    def _failure(self, what: str) -> str:
        if self._log:
            self._log.flush()
        tail = log_tail(self.log_path)
        return (
            f"{what}\n  command: {self.command_line}\n  log: {self.log_path}\n"
            f"  last lines of the log:\n{_indent(tail)}"
        )

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL what is left after the grace period; idempotent."""
        if self.proc is not None:
            stop_group(self.proc, ((signal.SIGTERM, self.stop_timeout_s),))
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> ManagedServer:  # noqa: PYI034 - not subclassed
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines()) or "    (log is empty)"

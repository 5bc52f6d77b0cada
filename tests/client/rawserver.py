"""A tiny scripted HTTP server on 127.0.0.1 for client edge cases the simulator cannot fake.

Each connection reads one request (head + Content-Length body), stores it in ``requests``,
then plays ``script``: a list of ``bytes`` to send and ``float`` seconds to sleep, and closes
the connection. Runs in an OS thread with the standard library's own sockets and sleep, also
after a test has let Locust monkey-patch them: the server keeps answering while the client's
whole process is blocked, which is what the receive-stamp tests are about.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from gevent.monkey import get_original

_os_socket = get_original("socket", "socket")
_os_sleep = get_original("time", "sleep")
_os_thread = get_original("_thread", "start_new_thread")

Script = list[bytes | float]


def sse_response(
    events: list[bytes], *, status: str = "200 OK", chunked: bool = True, gap_s: float = 0.0
) -> Script:
    """A script that sends ``events`` (already SSE-formatted) as a streamed response."""
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: text/event-stream\r\n"
        + ("Transfer-Encoding: chunked\r\n" if chunked else "Connection: close\r\n")
        + "\r\n"
    ).encode()
    out: Script = [head]
    for ev in events:
        out.append(b"%x\r\n%s\r\n" % (len(ev), ev) if chunked else ev)
        if gap_s:
            out.append(gap_s)
    if chunked:
        out.append(b"0\r\n\r\n")
    return out


def json_response(status: str, body: bytes) -> Script:
    return [
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: "
        f"{len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    ]


@dataclass
class RawServer:
    port: int
    script: Script
    requests: list[tuple[bytes, bytes]] = field(default_factory=list)  # (head, body)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _read_request(conn: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data, b""
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    while len(body) < length:
        body += conn.recv(65536)
    return head, body


@dataclass
class _Flags:
    """Stop and done, shared with the OS thread (plain flags: no lock of either world)."""

    stop: bool = False
    done: bool = False


def _pause(flags: _Flags, seconds: float) -> bool:
    """Sleep ``seconds`` in small steps; True when told to stop meanwhile."""
    end = seconds
    while end > 0 and not flags.stop:
        _os_sleep(min(end, 0.05))
        end -= 0.05
    return flags.stop


def _serve(listener: socket.socket, server: RawServer, flags: _Flags) -> None:
    try:
        while not flags.stop:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                server.requests.append(_read_request(conn))
                try:
                    for step in server.script:
                        if isinstance(step, float):
                            if _pause(flags, step):
                                return
                        else:
                            conn.sendall(step)
                except OSError:
                    pass
    finally:
        flags.done = True


@contextmanager
def raw_server(script: Script) -> Iterator[RawServer]:
    """Serve ``script`` to every connection until the block ends."""
    listener = _os_socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    server = RawServer(port=listener.getsockname()[1], script=script)
    flags = _Flags()
    _os_thread(_serve, (listener, server, flags))
    try:
        yield server
    finally:
        flags.stop = True
        for _ in range(100):  # the accept timeout or a pause step ends within 0.2 s
            if flags.done:
                break
            _os_sleep(0.05)
        listener.close()

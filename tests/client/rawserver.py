"""A tiny scripted HTTP server on 127.0.0.1 for client edge cases the simulator cannot fake.

Each connection reads one request (head + Content-Length body), stores it in ``requests``,
then plays ``script``: a list of ``bytes`` to send and ``float`` seconds to sleep, and closes
the connection. Runs in OS threads (the client under test uses gevent sockets, unpatched).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

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


def _serve(listener: socket.socket, server: RawServer, stop: threading.Event) -> None:
    while not stop.is_set():
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
                        if stop.wait(step):
                            return
                    else:
                        conn.sendall(step)
            except OSError:
                pass


@contextmanager
def raw_server(script: Script) -> Iterator[RawServer]:
    """Serve ``script`` to every connection until the block ends."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    server = RawServer(port=listener.getsockname()[1], script=script)
    stop = threading.Event()

    t = threading.Thread(target=_serve, args=(listener, server, stop), daemon=True)
    t.start()
    try:
        yield server
    finally:
        stop.set()
        listener.close()
        t.join(timeout=5)

"""A misbehaving OpenAI-style server as a real process, for faults the simulator cannot make.

    python -m tests.faults.rawserver MODE [--size BYTES] [--gap S] [--text TEXT]

Plain sockets and one OS thread per connection, so nothing in the HTTP stack tidies the
bytes up. It prints ``port N`` once listening, then one line ``REQ <X-Request-Id> <expect>``
per chat request *before* answering it (and ``AUTH <id> <sha256[:16] of the Authorization
header>`` when there is one): ``expect`` is the outcome the client must record
(``ok`` or an error kind), so a test can hold every record against what the server did.
Any other path gets a 404 (no /metrics, /tokenize or /v1/models: a bare server).

Modes (every response closes its connection):
- ``large``: one content chunk of ``--size`` bytes in a single SSE line → ok.
- ``drip``: a normal stream written one byte at a time, paced from the response's start;
  odd requests ``--gap`` s per byte (within the client's timeout → ok), even ones
  ``--slow-gap`` (past it → timeout).
- ``nofinish``: content chunks, then a clean end of the body without ``finish_reason`` or
  ``[DONE]`` → stream_broken.
- ``text``: a normal stream whose content is ``--text`` (privacy scans) → ok.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import socket
import sys
import threading
import time

__all__ = ["chunk", "main"]

DONE = b"data: [DONE]\n\n"


def chunk(delta: dict | None = None, finish: str | None = None, usage: dict | None = None) -> bytes:
    """One ``chat.completion.chunk`` SSE event."""
    obj: dict = {
        "id": "raw",
        "object": "chat.completion.chunk",
        "model": "raw",
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        obj["usage"] = usage
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _usage(n: int) -> dict:
    return {"prompt_tokens": 8, "completion_tokens": n, "total_tokens": 8 + n}


def _stream(pieces: list[str]) -> bytes:
    out = [chunk({"role": "assistant", "content": ""})]
    out += [
        chunk({"content": p}, finish="length" if i == len(pieces) - 1 else None)
        for i, p in enumerate(pieces)
    ]
    return b"".join([*out, chunk(None, usage=_usage(len(pieces))), DONE])


HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)


def _chunked(body: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(body), body)


def _read_request(conn: socket.socket) -> tuple[str, str, str, str]:
    """(method, path, X-Request-Id, Authorization) of one request; its body is dropped."""
    data = b""
    while b"\r\n\r\n" not in data:
        got = conn.recv(65536)
        if not got:
            return "", "", "", ""
        data += got
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    method, path = (lines[0].split(" ") + ["", ""])[:2]
    fields = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    length = int(fields.get("content-length", "0") or 0)
    while len(body) < length:
        got = conn.recv(65536)
        if not got:
            break
        body += got
    return method, path, fields.get("x-request-id", "-"), fields.get("authorization", "")


class Server:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.count = itertools.count(1)
        self.lock = threading.Lock()

    def log(self, line: str) -> None:
        with self.lock:
            print(line, flush=True)

    def handle(self, conn: socket.socket) -> None:
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            method, path, rid, auth = _read_request(conn)
            if not (method == "POST" and path.endswith("/chat/completions")):
                body = b'{"error": {"message": "not here"}}'
                conn.sendall(
                    b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
                )
                return
            n = next(self.count)
            if auth:  # a digest, so the key itself is in no file (tests/test_privacy.py)
                self.log(f"AUTH {rid} {hashlib.sha256(auth.encode()).hexdigest()[:16]}")
            try:
                getattr(self, "mode_" + self.args.mode)(conn, rid, n)
            except OSError:
                pass  # the client gave up (a timeout): nothing left to say

    def mode_large(self, conn: socket.socket, rid: str, n: int) -> None:
        self.log(f"REQ {rid} ok")
        conn.sendall(HEAD + _chunked(_stream(["x" * self.args.size, "."])) + b"0\r\n\r\n")

    def mode_drip(self, conn: socket.socket, rid: str, n: int) -> None:
        slow = n % 2 == 0
        self.log(f"REQ {rid} {'timeout' if slow else 'ok'}")
        data = HEAD + _chunked(_stream(["a", "b", "c"])) + b"0\r\n\r\n"
        gap = self.args.slow_gap if slow else self.args.gap
        # paced against the start, not byte by byte: on a busy box each sleep overshoots,
        # and 907 overshoots added up once pushed an "ok" drip past the client's timeout
        start = time.monotonic()
        for i in range(len(data)):
            conn.sendall(data[i : i + 1])
            time.sleep(max(0.0, start + (i + 1) * gap - time.monotonic()))

    def mode_nofinish(self, conn: socket.socket, rid: str, n: int) -> None:
        self.log(f"REQ {rid} stream_broken")
        body = b"".join(chunk({"content": c}) for c in "abc")
        conn.sendall(HEAD + _chunked(body) + b"0\r\n\r\n")

    def mode_text(self, conn: socket.socket, rid: str, n: int) -> None:
        self.log(f"REQ {rid} ok")
        words = self.args.text.split(" ")
        pieces = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
        conn.sendall(HEAD + _chunked(_stream(pieces)) + b"0\r\n\r\n")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="rawserver")
    p.add_argument("mode", choices=["large", "drip", "nofinish", "text"])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--size", type=int, default=1 << 20)
    p.add_argument("--gap", type=float, default=0.0005)
    p.add_argument("--slow-gap", type=float, default=0.01)
    p.add_argument("--text", default="hello from the raw server")
    args = p.parse_args(argv)
    server = Server(args)
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.port))
    listener.listen(128)
    print(f"port {listener.getsockname()[1]}", flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=server.handle, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())

"""Where the engine's output goes for HTTP requests: SSE straight onto the socket, or a buffer.

``StreamSink.push`` runs inside the engine step, so it writes the pre-framed HTTP chunk to the
transport synchronously (no per-token task switch, no per-token dict): this is the hot path
that lets one process stream tens of thousands of tokens per second. Stream faults (stall,
drop, malformed line, no ``[DONE]``) are applied here, per request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from specload.sim.faults import Faults
from specload.sim.groundtruth import TruthRecord
from specload.sim.protocol import ChunkFormat, usage_dict
from specload.sim.request import Request

__all__ = ["BufferSink", "StreamSink"]

_DONE = b"data: [DONE]\n\n"
_MALFORMED = b'data: {"id": "malformed", "choices": [\n\n'


class BufferSink:
    """Collects the whole output for a non-streamed response."""

    __slots__ = ("done", "finish", "parts")

    def __init__(self, done: asyncio.Future[bool]) -> None:
        self.parts: list[str] = []
        self.finish = ""
        self.done = done

    def push(self, req: Request, text: str, n_tokens: int, finish: str | None, now: float) -> None:
        self.parts.append(text)
        if finish is not None:
            self.finish = finish
            if not self.done.done():
                self.done.set_result(True)


class StreamSink:
    """Writes one request's SSE chunks (chunked transfer framing) as the engine emits them."""

    __slots__ = (
        "cached",
        "closed",
        "done",
        "faults",
        "fmt",
        "head",
        "include_usage",
        "malformed_sent",
        "on_gone",
        "pending",
        "sent",
        "stalled",
        "transport",
        "truth",
    )

    def __init__(
        self,
        transport: asyncio.Transport,
        fmt: ChunkFormat,
        include_usage: bool,
        cached: bool,
        truth: TruthRecord | None,
        done: asyncio.Future[bool],
        faults: Faults | None,
        on_gone: Callable[[], Any],
    ) -> None:
        self.transport, self.fmt, self.include_usage = transport, fmt, include_usage
        self.cached, self.truth, self.done, self.faults = cached, truth, done, faults
        self.on_gone = on_gone
        self.sent = 0
        #: written just before the first frame: vLLM sends the role-only chat chunk when the
        #: engine yields its first output (after prefill and any queueing), not on arrival.
        self.head = b""
        self.pending: list[tuple[bytes, int, str | None]] | None = None
        self.malformed_sent = False
        self.stalled = False
        self.closed = False

    def write(self, data: bytes) -> None:
        """One HTTP/1.1 chunk; marks the stream gone if the client closed it."""
        if self.closed:
            return
        t = self.transport
        if t.is_closing():
            self._gone()
            return
        t.write(b"%x\r\n%b\r\n" % (len(data), data))

    def _gone(self) -> None:
        self.closed = True
        if not self.done.done():
            self.done.set_result(False)
        asyncio.get_running_loop().call_soon(self.on_gone)

    def push(self, req: Request, text: str, n_tokens: int, finish: str | None, now: float) -> None:
        if self.closed:
            return
        if self.head:
            self.write(self.head)
            self.head = b""
        fmt = self.fmt
        if finish is None:
            frame = fmt.content(text)
        else:
            frame = fmt.final(text, finish, req.stop_reason)
            if self.include_usage:
                cached = req.cached_tokens if self.cached else None
                frame += fmt.usage(usage_dict(len(req.prompt), req.generated, cached))
            if self.faults is None or not self.faults.no_done:
                frame += _DONE
        self.sent += n_tokens
        if self.faults is not None and self._fault(frame, finish):
            return
        self._out(frame, n_tokens, finish)

    def _out(self, frame: bytes, n_tokens: int, finish: str | None) -> None:
        if self.pending is not None:
            self.pending.append((frame, n_tokens, finish))
            return
        self.write(frame)
        if self.truth is not None:
            self.truth.chunk_times.append(self.truth.now())
            self.truth.chunk_tokens.append(n_tokens)
        if finish is not None and not self.done.done():
            self.done.set_result(True)

    def _fault(self, frame: bytes, finish: str | None) -> bool:
        """Apply stream faults; True when the frame was consumed (dropped connection)."""
        f = self.faults
        assert f is not None
        if f.drop_after_tokens is not None and self.sent > f.drop_after_tokens:
            self.transport.close()
            self._gone()
            return True
        if (
            f.malformed_after_tokens is not None
            and not self.malformed_sent
            and self.sent > f.malformed_after_tokens
        ):
            self.malformed_sent = True
            self.write(_MALFORMED)
        if (
            f.stall_after_tokens is not None
            and not self.stalled
            and self.sent > f.stall_after_tokens
            and f.stall_s > 0
        ):
            self.stalled = True
            self.pending = []
            asyncio.get_running_loop().call_later(f.stall_s, self._flush)
        return False

    def _flush(self) -> None:
        """End of a stall: write everything held back, in order."""
        pending, self.pending = self.pending or [], None
        for frame, n_tokens, finish in pending:
            self._out(frame, n_tokens, finish)

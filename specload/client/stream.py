"""The default client: one streaming chat completion over geventhttpclient → one record.

``StreamClient(base_url, ClientSettings(...)).send(req, *, request_id, worker, step, repeat,
target_qps, warmup, scheduled_at) -> RequestRecord``.

Why not Locust's ``FastHttpSession.iter_lines``: it fills a 1024-byte buffer before yielding,
which holds a small SSE chunk back until later chunks arrive (~3 inter-token gaps added to
TTFT). Here the response is read with ``readline`` — it returns as soon as one line is in —
each line is stamped before any parsing — with the kernel's receive time of the packet that
completed it (``rxstamp``: immune to the load generator's own CPU lag; ``stamp_source`` says
"kernel"), or the time ``readline`` returned where the kernel cannot stamp ("user") — and
chunks are parsed with orjson. Everything is gevent-cooperative (geventhttpclient sockets), so one
process streams hundreds of responses at once.

``send`` never raises for server or network problems: every failure becomes a record with
``ok=False`` and ``error.kind`` one of ``connect`` (refused, DNS, connect timeout),
``timeout`` (``timeout_s`` over the whole request), ``http`` (status != 200),
``stream_broken`` (connection lost before the stream ended), ``bad_payload`` (a line that
is not an OpenAI chunk) or ``cancelled``. The one exception to "never raises" is the
greenlet being killed (Locust stopping users): ``send`` then raises ``RequestCancelled``, a
``GreenletExit`` carrying the ``cancelled`` record in ``.record``, so the caller can record
it and the greenlet still dies as gevent expects.

``ClientSettings`` (``attempt.py``) says what the pool's size and the key are for.
"""

from __future__ import annotations

import socket
from typing import Any

import gevent
import orjson
from geventhttpclient import HTTPClient
from geventhttpclient.response import (
    HTTPConnectionClosed,
    HTTPParseError,
    HTTPSocketPoolResponse,
)
from geventhttpclient.url import URL

from specload.client.assemble import RecordBuilder
from specload.client.attempt import (
    DEFAULTS,
    AttemptClient,
    ClientSettings,
    Exchange,
    RequestCancelled,
    api_root,
)
from specload.client.request import ChatRequest
from specload.client.rxstamp import RX, stamp_pool
from specload.client.sse import SSEDecoder
from specload.client.timing import CLOCK
from specload.core.records import ErrorInfo

__all__ = ["ChatRequest", "RequestCancelled", "StreamClient"]

_MAX_ERROR_BODY = 2048
#: Bytes per socket read (geventhttpclient's default is 4096). About one vLLM chunk: when the
#: reader has fallen behind, a backlog is read in small pieces, each with its own kernel
#: arrival stamp, instead of many chunks sharing the stamp of the last one.
_READ_BLOCK = 512
_DRAIN_S = 1.0  # longest wait for the end of a body after [DONE] (seconds)


class _Failure(Exception):
    """A classified failure on the way out of the read loop."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.info = ErrorInfo(kind=kind, detail=detail)


class StreamClient(AttemptClient):
    """Streams chat completions from one server; safe to share between greenlets."""

    def __init__(
        self,
        base_url: str,
        settings: ClientSettings = DEFAULTS,
        *,
        connect_timeout_s: float = 10.0,
        kernel_stamps: bool = True,
    ) -> None:
        super().__init__(base_url, settings)
        url = URL(api_root(self.base_url) + "/")
        self._path = url.path + "chat/completions"
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        headers.update(settings.extra_headers or {})
        if settings.api_key:
            headers["Authorization"] = f"Bearer {settings.api_key}"
        self._http = HTTPClient.from_url(
            url,
            concurrency=settings.concurrency,
            connection_timeout=min(connect_timeout_s, self.timeout_s),
            # No per-read timeout: the whole-request deadline (gevent.Timeout in send) bounds
            # every read, so a slow first byte is a "timeout", never a "connect" error. A
            # socket timeout would also make gevent allocate, start and cancel a Timeout on
            # every read that waits (each chunk of a stream): ~5 % of a load process's CPU
            # at 128 req/s; with None it uses a shared no-op timer.
            network_timeout=None,
            headers=headers,
            block_size=_READ_BLOCK,
        )
        pool = getattr(self._http, "_connection_pool", None)
        _no_yield_alive_check(pool)
        #: "kernel" when chunk times are the kernel's receive stamps, else "user" (rxstamp)
        self.stamp_source = "kernel" if kernel_stamps and stamp_pool(pool) else "user"

    def close(self) -> None:
        """Close pooled connections."""
        self._http.close()

    def _exchange_for(self, req: ChatRequest, request_id: str) -> Exchange:
        body = orjson.dumps(req.body())
        headers = {"X-Request-Id": request_id}

        def exchange(b: RecordBuilder) -> None:
            RX.last_rx_at = RX.last_rx_mono = None  # only this request's reads stamp its chunks
            self._exchange(body, headers, b, req.stream)

        return exchange, None

    def _classify(self, exc: Exception, b: RecordBuilder) -> ErrorInfo:
        """A classified ``_Failure`` as it is; anything else by the HTTP layer's rules."""
        return exc.info if isinstance(exc, _Failure) else _classify(exc)

    def _exchange(
        self, body: bytes, headers: dict[str, str], b: RecordBuilder, stream: bool
    ) -> None:
        try:
            resp = self._http.request("POST", self._path, body=body, headers=headers)
        except (ConnectionError, socket.gaierror, TimeoutError) as exc:
            raise _Failure("connect", _short(exc)) from None
        except HTTPConnectionClosed as exc:
            raise _Failure("stream_broken", f"closed before the response: {_short(exc)}") from None
        try:
            b.status = resp.status_code
            if b.status != 200:
                raise _Failure("http", _http_detail(resp))
            ctype = str(resp.get("content-type") or "")
            if stream and not ctype.startswith("application/json"):
                _read_stream(resp, b, self.stamp_source == "kernel")
            else:
                _read_whole(resp, b)
        finally:
            resp.release()  # closes the connection unless the message was read completely


def _read_stream(resp: HTTPSocketPoolResponse, b: RecordBuilder, kernel: bool) -> None:
    """Read SSE lines until ``[DONE]``; stamp each non-blank line before parsing anything.

    An event's time is that of its (last) ``data:`` line; its JSON is parsed when the blank
    line that ends it arrives (they come in the same packet from vLLM).
    """
    decoder = SSEDecoder()
    readline = resp.readline
    feed = decoder.feed_line_data
    now = _kernel_clock if kernel else CLOCK.now
    loads = orjson.loads
    on_chunk = b.on_chunk
    sent = b.timing.sent_at  # no answer arrives before its request: a floor for the stamps
    t = 0.0
    while True:
        try:
            line = readline(b"\n")
        except (HTTPParseError, ConnectionError, OSError) as exc:
            raise _Failure("stream_broken", f"connection lost mid-stream: {_short(exc)}") from None
        if len(line) > 2:
            t = max(now(), sent)
            feed(line)
            continue
        if not line:
            if b.finish_reason is not None:  # ended cleanly, only the [DONE] sentinel missing
                return
            raise _Failure("stream_broken", "stream ended before finish_reason or [DONE]")
        data = feed(line)
        if data is None:
            continue
        if data == b"[DONE]":
            b.saw_done = True
            b.done_at = t
            _drain(resp)
            return
        try:
            on_chunk(loads(data), t)
        except (orjson.JSONDecodeError, ValueError, TypeError, AttributeError) as exc:
            raise _Failure("bad_payload", f"unparseable chunk: {_short(exc)}") from None


def _no_yield_alive_check(pool: Any) -> None:
    """Make the pool's idle-connection check not yield to other greenlets.

    geventhttpclient checks a pooled socket with ``select.select(..., 0)``; under gevent's
    monkey-patching (always, under Locust) that select ends in ``sleep(0)``, which puts the
    request behind every other runnable greenlet *after* ``sent_at`` was taken: measured
    15–40 ms of fake TTFT at 256 streams. The same check with the unpatched select is
    instantaneous.
    """
    if pool is None or not hasattr(pool, "_is_socket_alive"):
        return
    from gevent import monkey

    plain_select = monkey.get_original("select", "select")

    def is_alive(sock: Any) -> bool:
        if sock is None:
            return False
        try:
            if sock.fileno() < 0:
                return False
            readable, _, _ = plain_select([sock], [], [], 0.0)
            return not readable  # an idle keep-alive socket has nothing to read
        except (OSError, ValueError):
            return False

    pool._is_socket_alive = is_alive


def _kernel_clock() -> float:
    """Kernel arrival time of the data this greenlet's last read returned, on the monotonic
    clock (``rxstamp.realtime_to_monotonic``); now if none."""
    t: float | None = getattr(RX, "last_rx_mono", None)
    return t if t is not None else CLOCK.now()


def _drain(resp: HTTPSocketPoolResponse) -> None:
    """Read the body's end (the chunked terminator right after ``[DONE]``) so the connection
    goes back to the pool: without it every request would open a new connection, and the
    connect would count in the next request's TTFT. Anything unexpected: drop the socket."""
    if resp.message_complete:
        return
    try:
        with gevent.Timeout(_DRAIN_S):
            while resp.readline(b"\n"):
                pass
    except (gevent.Timeout, HTTPParseError, OSError):
        pass  # release() closes a connection whose message did not complete


def _read_whole(resp: HTTPSocketPoolResponse, b: RecordBuilder) -> None:
    """A whole JSON completion (``stream: false``, or a server that ignored ``stream``):
    it arrives at once, so TTFT = E2E."""
    try:
        data = resp.read()
    except (HTTPParseError, ConnectionError, OSError) as exc:
        raise _Failure("stream_broken", f"connection lost: {_short(exc)}") from None
    t = CLOCK.now()
    try:
        b.on_chunk(orjson.loads(data), t)
    except (orjson.JSONDecodeError, ValueError, TypeError, AttributeError) as exc:
        raise _Failure("bad_payload", f"unparseable response: {_short(exc)}") from None
    b.done_at = t


def _http_detail(resp: HTTPSocketPoolResponse) -> str:
    """``HTTP 503: <server message>`` (truncated; the body may be large or not JSON)."""
    try:
        raw = resp.read(_MAX_ERROR_BODY)
    except Exception:  # noqa: BLE001 - the status is the information that matters
        raw = b""
    msg = ""
    try:
        obj: Any = orjson.loads(raw)
        err = obj.get("error", obj) if isinstance(obj, dict) else obj
        msg = err.get("message", "") if isinstance(err, dict) else str(err)
    except orjson.JSONDecodeError:
        msg = raw[:160].decode("utf-8", "replace")
    return f"HTTP {resp.status_code}" + (f": {msg[:160]}" if msg else "")


def _short(exc: BaseException) -> str:
    text = str(exc) or exc.__class__.__name__
    return f"{exc.__class__.__name__}: {text}"[:200]


def _classify(exc: Exception) -> ErrorInfo:
    """Map an unexpected exception from the HTTP layer to an error kind."""
    if isinstance(exc, TimeoutError):
        return ErrorInfo("timeout", _short(exc))
    if isinstance(exc, (ConnectionError, HTTPParseError)):
        return ErrorInfo("stream_broken", _short(exc))
    if isinstance(exc, OSError):
        return ErrorInfo("connect", _short(exc))
    return ErrorInfo("bad_payload", _short(exc))

"""Kernel receive stamps: a chunk's time is when it arrived, not when a busy client read it."""

from __future__ import annotations

import socket
import time

import gevent
import pytest
from gevent import socket as gsocket
from gevent.monkey import get_original

from specload.client import ChatRequest, ClientSettings, StreamClient
from specload.client.rxstamp import StampedSocket, supported
from specload.core.records import RequestRecord
from tests.client.rawserver import raw_server, sse_response
from tests.client.test_stream_client import DONE, chunk

#: Seconds the whole process is blocked while the answer arrives.
BLOCKED_S = 0.5
blocking_sleep = get_original("time", "sleep")

pytestmark = pytest.mark.skipif(not supported(), reason="needs SO_TIMESTAMPNS (Linux)")


def test_stamp_is_arrival_time_not_read_time() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    client = StampedSocket(gsocket.create_connection(listener.getsockname()))
    conn, _ = listener.accept()
    try:
        # The kernel turns receive stamping on lazily (a deferred static key) when a socket
        # first asks for it: a packet that races that switch carries no stamp. One exchange
        # and a pause first, so the measured packet is stamped (as every later one in a run).
        conn.sendall(b"w")
        assert client.recv(1) == b"w"
        time.sleep(0.1)
        sent = time.time()
        conn.sendall(b"hello")
        time.sleep(0.3)  # the data waits in the kernel while we are "busy"
        read_at = time.time()
        assert client.recv(100) == b"hello"
        assert client.last_rx_at is not None
        assert sent - 0.01 <= client.last_rx_at < read_at  # stamped on arrival, before the read
    finally:
        conn.close()
        client.close()
        listener.close()


def answer_while_blocked(kernel_stamps: bool) -> tuple[RequestRecord, float, str]:
    """The answer arrives 50 ms after the request, while the client process is blocked for
    0.5 s: the record, the time the process could read again, and the stamp source."""
    events = [chunk({"content": "a"}), chunk({"content": "b"}, "stop"), DONE]
    with raw_server([0.05, *sse_response(events)]) as srv:  # answers 50 ms after the request
        client = StreamClient(srv.url, ClientSettings(timeout_s=10), kernel_stamps=kernel_stamps)
        req = ChatRequest(model="m", messages=({"role": "user", "content": "x"},))
        g = gevent.spawn(
            client.send,
            req,
            request_id="r",
            worker="w",
            step=0,
            repeat=0,
            target_qps=1.0,
            warmup=False,
            scheduled_at=time.time(),
        )
        while not srv.requests:  # let the greenlet connect and send
            gevent.sleep(0.001)
        # the answer arrives while the whole process is blocked (no CPU for the greenlet): the
        # unpatched sleep, as a test before this one may have let Locust patch ``time``
        blocking_sleep(BLOCKED_S)
        readable_at = time.time()
        rec = g.get(timeout=10)
    assert rec.ok and rec.ttft_s is not None and rec.first_token_at is not None
    return rec, readable_at, client.stamp_source


# Orderings, not durations: what each stamp source promises is *when* the first token is
# stamped relative to the client being able to read it (timing figures: benchmarks/). A
# record's unix stamps go through the request's wall/monotonic anchor, which a busy box can
# skew by milliseconds against ``time.time()``: each side is judged against the middle of
# the blocked time, which the two sources fall on opposite sides of by ``BLOCKED_S / 2``.


def test_kernel_stamps_keep_client_lag_out_of_ttft() -> None:
    rec, readable_at, source = answer_while_blocked(kernel_stamps=True)
    assert source == "kernel"
    # stamped on arrival, while the client was blocked
    assert rec.first_token_at < readable_at - BLOCKED_S / 2


def test_user_stamps_include_client_lag() -> None:
    rec, readable_at, source = answer_while_blocked(kernel_stamps=False)
    assert source == "user"
    assert rec.first_token_at >= readable_at - BLOCKED_S / 2  # stamped when the client read it

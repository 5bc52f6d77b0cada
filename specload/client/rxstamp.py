"""Kernel receive timestamps: when a chunk reached the machine, not when we got to read it.

A load generator shares its CPU with its own pacer, recorder and hundreds of streams; on a
busy machine its read loop can run milliseconds behind the socket. Stamping a chunk when
user space reads it would add that lag to TTFT and ITL — the load generator measuring itself.
On Linux, ``SO_TIMESTAMPNS`` makes the kernel attach the arrival time (``CLOCK_REALTIME``,
nanoseconds) of the received data to every ``recvmsg``; ``StampedSocket`` wraps a socket so
that its ``recv`` keeps that time in ``last_rx_at`` and in the greenlet-local
``RX.last_rx_at``, and the same instant on the monotonic clock, which every duration uses
(``client/timing.py``), in ``RX.last_rx_mono`` (``realtime_to_monotonic``: converted at the
read, by how long ago the wall clock says it was, so a wall-clock step before the request
does not move it). The streaming client stamps each line with the arrival time of the read
that completed it.

Limits: the stamp is that of the *last* packet a read returned, so chunks that piled up
and were read together share the latest arrival time (never earlier than the truth, still
no later than a user-space stamp). Plain TCP only: TLS sockets and systems without
``SO_TIMESTAMPNS`` keep user-space stamps (``supported()`` says which).
"""

from __future__ import annotations

import socket
import struct
import sys
import time
from typing import Any

from gevent.local import local

__all__ = ["RX", "StampedSocket", "realtime_to_monotonic", "stamp_pool", "supported"]

#: Greenlet-local: ``RX.last_rx_at`` is the kernel arrival time of the data that the current
#: greenlet's last read returned. A greenlet reads one response at a time, so this is the
#: stamp of the line it just read — even when the response object has already released its
#: socket (a response read completely together with its headers).
RX = local()

_SO_TIMESTAMPNS = getattr(
    socket, "SO_TIMESTAMPNS", 35 if sys.platform.startswith("linux") else None
)
_TS = struct.Struct("@qq")  # struct timespec: seconds, nanoseconds
_CMSG_SPACE = socket.CMSG_SPACE(_TS.size) if hasattr(socket, "CMSG_SPACE") else 0


def realtime_to_monotonic(t_wall: float) -> float:
    """A ``CLOCK_REALTIME`` time that has just passed (a kernel receive stamp) on the
    monotonic clock: monotonic now minus its age by the wall clock read now. Only a wall-clock
    step between the packet's arrival and this read can skew it; it is never in the future."""
    wall, mono = time.time(), time.monotonic()
    return mono - max(0.0, wall - t_wall)


def supported() -> bool:
    """True where kernel receive timestamps can be asked for (Linux, ``recvmsg``)."""
    return _SO_TIMESTAMPNS is not None and bool(_CMSG_SPACE) and hasattr(socket.socket, "recvmsg")


class StampedSocket:
    """A socket whose ``recv`` records the kernel arrival time in ``last_rx_at`` (unix s).

    Everything else is delegated to the wrapped socket, so a connection pool can hold,
    check (``fileno``), reuse and close it like the socket itself.
    """

    __slots__ = ("_sock", "last_rx_at")

    def __init__(self, sock: Any) -> None:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        self._sock = sock
        self.last_rx_at: float | None = None

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data, ancdata, _, _ = self._sock.recvmsg(bufsize, _CMSG_SPACE, flags)
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(payload) >= _TS.size:
                sec, nsec = _TS.unpack_from(payload)
                self.last_rx_at = RX.last_rx_at = sec + nsec * 1e-9
                RX.last_rx_mono = realtime_to_monotonic(self.last_rx_at)
        return bytes(data)

    def fileno(self) -> int:
        return int(self._sock.fileno())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def stamp_pool(pool: Any) -> bool:
    """Make ``pool`` (a geventhttpclient ``ConnectionPool``) create ``StampedSocket``s.

    Returns False, changing nothing, where stamps are unsupported or the pool is not the
    plain-TCP kind this knows.
    """
    create = getattr(pool, "_create_socket", None)
    if not supported() or create is None or type(pool).__name__ != "ConnectionPool":
        return False

    def create_stamped() -> Any:
        sock = create()
        try:
            return StampedSocket(sock)
        except OSError:
            return sock

    pool._create_socket = create_stamped
    return True

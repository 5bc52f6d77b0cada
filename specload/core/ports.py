"""``free_port()``: a TCP port free on 127.0.0.1 right now.

One definition for everything that picks a port at run time: the local Locust master of
``specload run``, each server of ``specload sweep``, the tests and the benchmarks. The port is
free when the socket closes; whoever binds it next wins, so callers bind soon after.
"""

from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the kernel's pick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])

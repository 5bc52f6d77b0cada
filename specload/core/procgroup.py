"""Stopping a child's process group: one escalation for the servers and the runs we start.

A child started with ``start_new_session`` leads its own group (its pid is the group id).
Its own children (vLLM's engine core, Locust's ``--processes`` workers) may outlive it, so
the group counts as stopped once the leader is reaped *and* no member is left; stopping the
leader alone would leave GPU memory held and load processes running. Each rung of the ladder
signals the whole group and waits up to its grace; the last rung is SIGKILL. Reaping the
leader before returning keeps its pid (the group id) from being reused while we signal it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence

__all__ = ["INTERRUPT_LADDER", "Rung", "group_alive", "stop_group"]

#: A signal and how long (s) the group gets to empty after it.
Rung = tuple[signal.Signals, float]

#: The signals an interrupted run climbs, gentlest first: SIGINT lets Locust stop the run and
#: gather its workers' last records; SIGTERM, then SIGKILL, for a run that does not stop.
#: ``specload run`` climbs one per signal its user sends; a sweep on a timer (``stop_group``).
INTERRUPT_LADDER: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)

#: SIGKILL's own grace: the kernel needs a moment to tear the group down.
KILL_GRACE_S = 5.0


def group_alive(pgid: int) -> bool:
    """Whether any process is left in group ``pgid`` (one we may not signal counts).

    A zombie does not count: it has exited and only waits for its parent to collect its
    status. A server started through ``sh -c`` is orphaned when the shell dies first, and
    its zombie waits for PID 1, which in some containers collects it a second or more
    later: a sweep stopping twelve servers waited about 16 s for nothing but that."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    states = _member_states(pgid)
    return states is None or any(state != "Z" for state in states)


def _member_states(pgid: int) -> list[str] | None:
    """The process states (``/proc/PID/stat``'s third field) of group ``pgid``'s members, or
    None where there is no ``/proc`` to read (then every member counts as alive)."""
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return None
    states = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # exited while we looked, or not ours to read
        if len(fields) > 2 and int(fields[2]) == pgid:
            states.append(fields[0].decode())
    return states


def stop_group(proc: subprocess.Popen[bytes], ladder: Sequence[Rung]) -> None:
    """Climb ``ladder`` (e.g. SIGINT, SIGTERM, each with its grace) until ``proc`` has exited
    and its group is empty; SIGKILL after the last rung. Idempotent."""
    pgid = proc.pid
    for sig, grace_s in (*ladder, (signal.SIGKILL, KILL_GRACE_S)):
        if _stopped(proc, pgid):
            return
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if _stopped(proc, pgid):
                return
            time.sleep(0.05)
    proc.wait(timeout=KILL_GRACE_S)


def _stopped(proc: subprocess.Popen[bytes], pgid: int) -> bool:
    return proc.poll() is not None and not group_alive(pgid)

"""Stopping a process group: the leader and whatever it left behind, by one escalation."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from specload.core.procgroup import group_alive, stop_group

#: A leader that exits on SIGINT/SIGTERM and leaves a child that ignores both (what a
#: server's engine process or a load worker can do); prints the child's pid.
LEADER = """
import os, signal, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time\\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)\\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
    "print('ready', flush=True)\\n"
    "time.sleep(600)"], stdout=subprocess.PIPE)
child.stdout.readline()
print(child.pid, flush=True)
time.sleep(600)
"""


def _leader() -> tuple[subprocess.Popen[bytes], int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", LEADER], start_new_session=True, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def test_a_child_that_ignores_the_signals_is_killed_after_the_ladder() -> None:
    proc, _child = _leader()
    try:
        # SIGINT's grace is the leader's time to exit (a Python interpreter winding down on a
        # busy box: 0.5 s was once too short); the child outlives it whatever the grace
        stop_group(proc, ((signal.SIGINT, 2.0), (signal.SIGTERM, 0.5)))
        # the leader died of the first signal; the group emptied only at SIGKILL
        assert proc.returncode == -signal.SIGINT
        assert not group_alive(proc.pid)
        stop_group(proc, ((signal.SIGTERM, 0.5),))  # idempotent on a stopped group
    finally:
        if group_alive(proc.pid):
            stop_group(proc, ())


def test_an_empty_ladder_kills_what_a_finished_leader_left() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", LEADER.rsplit("time.sleep(600)", 1)[0]],  # the leader ends
        start_new_session=True,
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        proc.stdout.readline()
        proc.wait(timeout=30)  # the leader is done; its child lingers in the group
        assert group_alive(proc.pid)
        stop_group(proc, ())
        assert not group_alive(proc.pid)
    finally:
        if group_alive(proc.pid):
            stop_group(proc, ())


#: A parent that starts a child in a group of its own and never collects it: once the child
#: exits it is a zombie for as long as this parent lives. (Our own child would not do: a
#: worker that imported gevent reaps its children on SIGCHLD.)
NEGLECTFUL_PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
print(child.pid, flush=True)
time.sleep(600)
"""


def test_a_group_whose_last_member_is_a_zombie_counts_as_stopped() -> None:
    """A member that has exited but is not yet collected (a zombie) is not waited for: an
    orphaned server's zombie waits on PID 1, which may collect it seconds later."""
    parent = subprocess.Popen([sys.executable, "-c", NEGLECTFUL_PARENT], stdout=subprocess.PIPE)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        deadline = time.monotonic() + 30
        while _state(child) != "Z":  # exited, not collected by its living parent
            assert time.monotonic() < deadline, "the child did not exit"
            time.sleep(0.02)
        os.killpg(child, 0)  # the kernel still lists the group ...
        assert not group_alive(child)  # ... but nothing in it is alive
    finally:
        parent.kill()
        parent.wait(timeout=30)


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[1].split()[0].decode()

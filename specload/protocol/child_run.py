"""One ``specload run`` as a child of a sweep: started, waited for, interrupted cleanly
(SIGINT first, so its records are kept), and its run.json stamped with what the sweep knows
(the condition declared, the server start, a status the run could not write itself).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from specload.core.condition import Condition
from specload.core.procgroup import INTERRUPT_LADDER, stop_group
from specload.protocol.argv import run_argv
from specload.protocol.sweep_plan import SweepPlan
from specload.protocol.target import Target
from specload.recorder.rundir import RunMeta, update_run_meta

__all__ = [
    "RUN_INTERRUPT_GRACE_S",
    "drive_command",
    "drive_run",
    "patch_run_json",
    "shielded",
    "sigterm_as_interrupt",
]

#: Seconds a run may take to finish after SIGINT before it is terminated.
RUN_INTERRUPT_GRACE_S = 30.0


@contextmanager
def shielded() -> Iterator[Callable[[], bool]]:
    """Defer Ctrl-C / SIGTERM while a server is being stopped: a second Ctrl-C must not
    leave it running. Yields a function that says whether a signal arrived meanwhile."""
    seen: list[int] = []

    def note(signum: int, frame: object) -> None:
        seen.append(signum)

    try:
        previous = {s: signal.signal(s, note) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread
        yield lambda: False
        return
    try:
        yield lambda: bool(seen)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def drive_run(
    plan: SweepPlan,
    cond: Condition,
    target: Target,
    run_dir: Path,
    extra: Sequence[str] = (),
    stdout: IO[bytes] | None = None,
) -> int:
    """``specload run`` of one condition (``drive_command``)."""
    return drive_command(run_command(plan, cond, target, run_dir, extra), stdout)


def drive_command(cmd: Sequence[str], stdout: IO[bytes] | None = None) -> int:
    """A ``specload run`` command line in its own process group; its progress lines go to
    our terminal (or ``stdout``).

    Its own group means a terminal Ctrl-C reaches only us, and we forward exactly one SIGINT,
    so the run sees the same signal whether the user or a test interrupted the sweep.
    """
    proc = subprocess.Popen(
        list(cmd),
        start_new_session=True,
        stdout=stdout,
        stderr=None if stdout is None else subprocess.STDOUT,
    )
    try:
        code = proc.wait()
        stop_group(proc, ())  # anything the finished run left in its group: killed
        return code
    except KeyboardInterrupt:
        _interrupt_run(proc)
        raise
    finally:
        if proc.poll() is None:
            _interrupt_run(proc)


def _interrupt_run(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT the run's group (the run stops and writes what it has); escalate to SIGTERM
    and SIGKILL if it does not finish."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not skip this
    try:
        sigint, sigterm = INTERRUPT_LADDER[:2]
        stop_group(proc, ((sigint, RUN_INTERRUPT_GRACE_S), (sigterm, 5.0)))
    finally:
        signal.signal(signal.SIGINT, previous)


def patch_run_json(
    run_dir: Path,
    cond: Condition,
    server_cmd: str | None,
    interrupted: bool,
    returncode: int | None,
    notes: Sequence[str] = (),
    replicate: int | None = None,
) -> str:
    """Stamp ``server_cmd``, ``condition`` and ``replicate`` (which server start of its
    condition this run is) into run.json; fix a status left ``running``.

    Returns the run's final status. A run that never wrote run.json (its server failed to
    start, or it was interrupted before its first step) is reported as ``failed`` or
    ``interrupted`` and nothing is written.
    """
    said = list(notes)

    def stamp(meta: RunMeta) -> None:
        meta.server_cmd = server_cmd
        meta.condition = _merged_condition(cond.as_json(), meta.condition)
        if replicate is not None:
            meta.replicate = replicate
        if meta.status in (None, "running"):
            meta.status = "interrupted" if interrupted else "failed"
            if meta.ended_at is None:
                meta.ended_at = time.time()
            said.append(f"status set by sweep: run exited with code {returncode}")
        meta.notes = [*meta.notes, *said]

    meta = update_run_meta(run_dir, stamp)
    if meta is None:
        return "interrupted" if interrupted else "failed"
    return meta.status


def _merged_condition(ours: dict[str, Any], theirs: Any) -> dict[str, Any]:
    """The sweep's declaration, completed by what the run itself declared (``--url`` mode:
    ``--speculative-config`` / ``--prefix-caching`` went to the run)."""
    if not isinstance(theirs, dict):
        return ours
    src = dict(ours["source"])
    raw = theirs.get("source")
    their_src: dict[str, Any] = raw if isinstance(raw, dict) else {}
    for f in ("speculative", "prefix_caching"):
        if src.get(f) != "declared" and their_src.get(f) == "declared":
            ours[f], src[f] = theirs.get(f), "declared"
    return {**ours, "source": src}


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Treat SIGTERM (a CI job cancelled) like Ctrl-C, so servers are stopped either way."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_command(
    plan: SweepPlan, cond: Condition, target: Target, run_dir: Path, extra: Sequence[str] = ()
) -> list[str]:
    """``specload run`` with the condition declared, so run.json is right from its start (the
    sweep checked this server itself, before the cache reset: the run skips its pre-flight)."""
    declared: list[str] = []
    if cond.speculative is not None:
        declared += ["--speculative-config", json.dumps(cond.speculative, separators=(",", ":"))]
    if cond.prefix_caching is not None:
        declared += ["--prefix-caching", "on" if cond.prefix_caching else "off"]
    if target.command_line:
        declared += ["--server-cmd", target.command_line]
    return run_argv(
        host=target.url, scenario=plan.scenario, label=cond.name, out=run_dir,
        processes=plan.processes, store_text=plan.store_text,
        flags=[*declared, *plan.run_args, *extra],
    )  # fmt: skip

"""The measurement protocol as one command: one run per server condition, then compare.

For each condition (a name and the extra server flags that make it) and each replicate (a
fresh server start; ``--replicates N`` runs them interleaved: baseline, spec, baseline, spec,
...), the sweep starts a fresh server (``target.ManagedServer``; ``{replicate}`` in the
command becomes the replicate number), resets its prefix cache, drives one headless run through
``specload run`` in a child process, stops the server, and stamps the run's ``run.json``
with the exact server command line and the condition as declared (speculative config JSON,
prefix caching). The run is a child process, not a function call, because Locust needs
gevent's monkey-patching, which must not leak into the process that owns the servers, and
because a child can be interrupted and still write its records.

Ctrl-C (or SIGTERM) at any point: the current run gets SIGINT and is marked ``interrupted``
with the records it has, the server's process group is stopped, and no further condition runs.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from specload.core.condition import Condition
from specload.core.errors import ConfigError, TargetError
from specload.core.ports import free_port
from specload.protocol.child_run import drive_run, patch_run_json, shielded, sigterm_as_interrupt
from specload.protocol.sweep_compare import label, sweep_run_dirs
from specload.protocol.sweep_plan import ConditionResult, SweepPlan
from specload.protocol.target import (
    ExternalTarget,
    ManagedServer,
    Target,
    log_tail,
    reset_prefix_cache,
)
from specload.recorder.rundir import remove_new_dirs

__all__ = [
    "make_target",
    "next_url_replicate",
    "outermost_new",
    "planned_runs",
    "preflight_target",
    "remove_if_empty",
    "replicate_dir",
    "run_sweep",
    "sweep_order",
]


@dataclass
class _Sweep:
    plan: SweepPlan
    say: Callable[[str], None]
    results: list[ConditionResult] = field(default_factory=list)


def sweep_order(conditions: Sequence[Condition], replicates: int) -> list[tuple[Condition, int]]:
    """(condition, replicate) in run order: replicates interleaved, never one condition's
    starts all first (baseline, spec, baseline, spec, ...), so drift over the sweep and
    warm-up of the host hit every condition alike."""
    return [(c, r) for r in range(1, replicates + 1) for c in conditions]


def replicate_dir(out: Path, name: str, replicate: int, numbered: bool) -> Path:
    """``OUT/NAME-rK`` for replicate K of a numbered series, else ``OUT/NAME``."""
    return out / f"{name}-r{replicate}" if numbered else out / name


def next_url_replicate(out: Path, name: str) -> int:
    """A ``--url`` run adds a replicate: one more than the runs of ``name`` already in ``out``."""
    return 1 + sum(1 for d in sweep_run_dirs(out) if label(d) == name)


def planned_runs(plan: SweepPlan) -> list[tuple[Condition, int, Path]]:
    """(condition, replicate, run dir) in run order. A sweep that starts servers names its
    dirs ``NAME-rK`` when it plans several starts per condition; a ``--url`` run adds to what
    ``--out`` holds: its first replicate keeps the plain name, later ones are ``NAME-rK``."""
    tag = plan.dir_tag
    if plan.url is None:
        numbered = plan.replicates > 1
        return [
            (c, r, replicate_dir(plan.out, c.name + tag, r, numbered))
            for c, r in sweep_order(plan.conditions, plan.replicates)
        ]
    cond = plan.conditions[0]
    first = next_url_replicate(plan.out, cond.name)
    reps = range(first, first + plan.replicates)
    return [(cond, r, replicate_dir(plan.out, cond.name + tag, r, r > 1)) for r in reps]


def run_sweep(plan: SweepPlan, say: Callable[[str], None] = print) -> list[ConditionResult]:
    """Run every condition (and replicate) in order; one result per run that started.

    Raises ``TargetError`` when a server cannot be started (after stopping it) and
    ``KeyboardInterrupt`` after a Ctrl-C has been cleaned up; the results gathered so far
    are then in the exception's ``results`` attribute.
    """
    _check_plan(plan)
    sweep = _Sweep(plan, say)
    order = planned_runs(plan)
    made = outermost_new(plan.out)
    with sigterm_as_interrupt():
        for i, (cond, rep, run_dir) in enumerate(order, 1):
            of = f", replicate {rep}" + (f"/{plan.replicates}" if plan.url is None else "")
            say(
                f"[sweep] run {i}/{len(order)}: {cond.name}"
                + (of if plan.replicates > 1 or rep > 1 else "")
                + (f" ({shlex.join(cond.flags)})" if cond.flags else " (no extra flags)")
            )
            try:
                result = _run_condition(sweep, cond, rep, run_dir)
            except TargetError as exc:
                exc.results = sweep.results  # type: ignore[attr-defined]
                remove_if_empty(run_dir)
                remove_new_dirs(plan.out, made)
                raise
            sweep.results.append(result)
            if result.interrupted:
                interrupt = KeyboardInterrupt()
                interrupt.results = sweep.results  # type: ignore[attr-defined]
                raise interrupt
            say(f"[sweep] {cond.name}: {result.status} -> {result.run_dir}")
    return sweep.results


def outermost_new(path: Path) -> Path | None:
    """The outermost of ``path`` and its parents that does not exist yet (None: it does):
    what a sweep that measured nothing removes again, if still empty (``remove_new_dirs``)."""
    made = None
    for p in (path, *path.parents):
        if p.exists():
            return made
        made = p
    return made


def remove_if_empty(*paths: Path) -> None:
    """Remove each directory that is empty, in order (a sweep that could not reach or start
    a server leaves no empty run dir, nor an ``OUT`` it made itself)."""
    for path in paths:
        if path.is_dir() and not any(path.iterdir()):
            path.rmdir()


def _check_plan(plan: SweepPlan) -> None:
    if (plan.server_cmd is None) == (plan.url is None):
        raise ConfigError("give exactly one of --server-cmd and --url")
    if plan.url is not None and len(plan.conditions) != 1:
        raise ConfigError(
            "with --url (a server someone else manages) give exactly one condition, via --label",
            path="--url",
        )
    if not plan.conditions:
        raise ConfigError("no condition given (expected --condition NAME=FLAGS ...)")
    names = [c.name for c in plan.conditions]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"condition names must be unique, repeated: {', '.join(dupes)}")
    if not plan.scenario.is_file():
        raise ConfigError("no such file", file=str(plan.scenario), path="--scenario")
    for _, _, d in planned_runs(plan):
        if (d / "run.json").exists() or (d / "requests.jsonl").exists():
            raise ConfigError(
                f"{d} already holds a run (choose another --out or remove it)", path="--out"
            )


def make_target(
    plan: SweepPlan, cond: Condition, run_dir: Path, say: Callable[[str], None], replicate: int
) -> Target:
    url = plan.urls.get(cond.name) or plan.url
    if url is not None:
        return ExternalTarget(url)
    assert plan.server_cmd is not None
    log_path = run_dir / "server.log"
    return ManagedServer(
        template=plan.server_cmd,
        extra_flags=cond.flags,
        port=plan.port or free_port(),
        log_path=log_path,
        health_timeout_s=plan.health_timeout_s,
        replicate=replicate,
        on_waiting=lambda s: say(f"[sweep] waiting for the server: {s:.0f} s (log: {log_path})"),
    )


def _run_condition(
    sweep: _Sweep, cond: Condition, replicate: int, run_dir: Path
) -> ConditionResult:
    """Server up, reset, one run, server down; a Ctrl-C anywhere still stops the server."""
    plan = sweep.plan
    run_dir.mkdir(parents=True, exist_ok=True)
    target = make_target(plan, cond, run_dir, sweep.say, replicate)
    started = time.monotonic()
    interrupted = False
    code: int | None = None
    server_exit: int | None = None
    try:
        if target.command_line:
            sweep.say(f"[sweep] starting server: {target.command_line}")
        target.start()
        took_s = time.monotonic() - started
        sweep.say(f"[sweep] server healthy at {target.url} after {took_s:.1f} s")
        preflight_target(plan, target)  # before the reset: it leaves nothing cached then
        if not reset_prefix_cache(target.url):
            sweep.say("[sweep] server has no /reset_prefix_cache; prefix cache not reset")
        code = drive_run(plan, cond, target, run_dir)
        server_exit = _check_server_alive(sweep, target)
    except KeyboardInterrupt:
        interrupted = True
    except TargetError:  # unreachable or failed its pre-flight: leave no empty run dir
        if run_dir.is_dir() and not any(run_dir.iterdir()):
            run_dir.rmdir()
        raise
    finally:
        with shielded() as late_signal:
            target.stop()
            interrupted = interrupted or late_signal()
            notes = (
                []
                if server_exit is None
                else [f"the server exited with code {server_exit} during the run (see server.log)"]
            )
            status = patch_run_json(
                run_dir, cond, target.command_line, interrupted, code, notes, replicate
            )
    if interrupted:
        sweep.say(f"[sweep] interrupted: {cond.name} marked {status}; server stopped")
    return ConditionResult(
        cond,
        run_dir,
        status,
        code,
        target.command_line,
        interrupted,
        server_exit,
        replicate,
        server_s=time.monotonic() - started,
    )


def preflight_target(plan: SweepPlan, target: Target) -> None:
    """The target serves the scenario's model and streams with usage, or ``PreflightError``
    (exit 2) before any load."""
    if plan.skip_preflight:
        return
    from specload.protocol.preflight import preflight
    from specload.scenario import load_scenario

    preflight(
        target.url,
        model=load_scenario(plan.scenario).model,
        api_key=os.environ.get("OPENAI_API_KEY") or None,
    )


def _check_server_alive(sweep: _Sweep, target: Target) -> int | None:
    """A server that died mid-run leaves a run of connection errors: say so, loudly."""
    if not isinstance(target, ManagedServer) or target.exit_code() is None:
        return None
    code = target.exit_code()
    tail = log_tail(target.log_path, lines=10)
    sweep.say(
        f"[sweep] WARNING: the server exited with code {code} during the run; "
        f"last lines of {target.log_path}:\n{tail}"
    )
    return code

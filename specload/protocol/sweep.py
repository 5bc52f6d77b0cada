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

import json
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from specload.core.condition import Condition, choose_baseline
from specload.core.errors import ConfigError, TargetError
from specload.core.ports import free_port
from specload.core.procgroup import INTERRUPT_LADDER, stop_group
from specload.protocol.argv import compare_argv, run_argv
from specload.protocol.target import (
    ExternalTarget,
    ManagedServer,
    Target,
    log_tail,
    reset_prefix_cache,
)
from specload.protocol.until_decided import UntilDecided
from specload.recorder.run_json import peek_run_json
from specload.recorder.rundir import remove_new_dirs, write_json_durably

__all__ = [
    "ConditionResult",
    "SweepPlan",
    "baseline_line",
    "compare_sweep",
    "drive_command",
    "degraded_lines",
    "next_url_replicate",
    "patch_run_json",
    "planned_runs",
    "outermost_new",
    "remove_if_empty",
    "replicate_dir",
    "run_sweep",
    "sweep_order",
    "sweep_run_dirs",
]

#: Seconds a run may take to finish after SIGINT before it is terminated.
RUN_INTERRUPT_GRACE_S = 30.0


@dataclass
class SweepPlan:
    """Everything a sweep needs. Exactly one of ``server_cmd`` and ``url`` is set."""

    scenario: Path
    out: Path
    conditions: Sequence[Condition]
    server_cmd: str | None = None
    url: str | None = None
    port: int | None = None
    health_timeout_s: float = 600.0
    store_text: bool = False
    processes: int | None = None
    run_args: Sequence[str] = ()
    skip_preflight: bool = (
        False  # else each server is checked (specload.protocol.preflight) once healthy
    )
    #: fresh server starts per condition, interleaved across conditions (``sweep_order``)
    replicates: int = 1
    #: appended to each run dir's name (``-p2`` for the refine search's second pass)
    dir_tag: str = ""
    #: ``--interleave``: every condition's server up at once, blocks interleaved
    #: (``protocol/interleaved_sweep.py``); with ``urls`` (LABEL -> URL) instead of ``url``
    interleave: bool = False
    urls: dict[str, str] = field(default_factory=dict)
    #: the condition every change is read against (``core.condition.choose_baseline``;
    #: empty: chosen here among ``conditions``)
    baseline: str = ""
    #: ``--until-decided`` (with ``interleave``): more blocks where steps are undecided
    #: (``protocol/until_decided.py``); None: the scenario's blocks only
    until_decided: UntilDecided | None = None

    def __post_init__(self) -> None:
        if self.replicates < 1:
            raise ConfigError(f"{self.replicates} (expected 1 or more)", path="--replicates")
        if not self.baseline and self.conditions:
            managed = self.server_cmd is not None
            self.baseline = choose_baseline(
                {c.name: c.runs_speculation(managed) for c in self.conditions}
            )


@dataclass
class ConditionResult:
    """How one condition's run ended: ``status`` is run.json's (or ``failed`` if it has none)."""

    condition: Condition
    run_dir: Path
    status: str
    returncode: int | None = None
    server_cmd: str | None = None
    interrupted: bool = False
    server_exit: int | None = None  # the server's exit code when it died during the run
    replicate: int = 1
    #: seconds from the server's start to its stop (what a sweep spends of a GPU)
    server_s: float = 0.0


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
    return 1 + sum(1 for d in sweep_run_dirs(out) if _label(d) == name)


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


def _run_command(
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


def drive_run(
    plan: SweepPlan,
    cond: Condition,
    target: Target,
    run_dir: Path,
    extra: Sequence[str] = (),
    stdout: IO[bytes] | None = None,
) -> int:
    """``specload run`` of one condition (``drive_command``)."""
    return drive_command(_run_command(plan, cond, target, run_dir, extra), stdout)


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
    path = run_dir / "run.json"
    meta = peek_run_json(run_dir)
    if meta is None:
        return "interrupted" if interrupted else "failed"
    meta["server_cmd"] = server_cmd
    meta["condition"] = _merged_condition(cond.as_json(), meta.get("condition"))
    if replicate is not None:
        meta["replicate"] = replicate
    if meta.get("status") in (None, "running"):
        meta["status"] = "interrupted" if interrupted else "failed"
        meta.setdefault("ended_at", time.time())
        if meta["ended_at"] is None:
            meta["ended_at"] = time.time()
        notes = [*notes, f"status set by sweep: run exited with code {returncode}"]
    if notes:
        meta["notes"] = [*(meta.get("notes") or []), *notes]
    write_json_durably(path, meta)
    return str(meta["status"])


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


def degraded_lines(results: Sequence[ConditionResult]) -> list[str]:
    """One line per ``degraded`` run with its reasons from run.json (for the sweep's end)."""
    lines = []
    for r in results:
        if r.status != "degraded":
            continue
        reasons = (peek_run_json(r.run_dir) or {}).get("degraded") or []
        lines.append(
            f"{r.condition.name} degraded ({r.run_dir}): "
            + ("; ".join(map(str, reasons)) or "see its run.json")
        )
    return lines


def sweep_run_dirs(out: Path) -> list[Path]:
    """Every run dir directly under ``out`` (this sweep's and earlier ``--url`` ones)."""
    return sorted(p.parent for p in out.glob("*/run.json") if p.parent.name != "report")


def baseline_line(plan: SweepPlan) -> str:
    """The sweep's first line: which condition every change will be read against."""
    others = [c.name for c in plan.conditions if c.name != plan.baseline]
    measured = f"; measured against it: {', '.join(others)}" if others else ""
    return f"[sweep] baseline: {plan.baseline}{measured}"


def compare_sweep(
    out: Path,
    run_dirs: Sequence[Path],
    say: Callable[[str], None] = print,
    compare_args: Sequence[str] = (),
    baseline: str | None = None,
) -> int:
    """Compare the sweep's runs with ``specload compare`` into ``out/report``; its exit code.

    Runs already in ``out`` from earlier invocations (``--url``, one condition each) are
    compared too. ``baseline``: the plan's (``SweepPlan.baseline``), else compare's rule over
    the runs in the order they were added. A single ``--url`` run is listed after the ones
    already there, so the report's order is the order conditions were added. ``compare_args``
    are extra ``specload compare`` options. Ends with the one-sentence verdict and the HTML
    report's path, so they are the last lines on the terminal after the tables.
    """
    earlier = sorted(
        (d for d in sweep_run_dirs(out) if d not in run_dirs),
        key=lambda d: float((peek_run_json(d) or {}).get("started_at") or 0.0),
    )
    # one ``--url`` condition joins the runs already there, last (the order they were added)
    dirs = list(run_dirs) + earlier if len(run_dirs) > 1 else earlier + list(run_dirs)
    if len(dirs) < 2:
        say(f"[sweep] one run in {out}; measure another condition into it to compare")
        return 0
    report_dir = out / "report"
    cmd = compare_argv(dirs, report_dir, baseline=baseline, flags=compare_args)
    against = f" against the baseline {baseline}" if baseline else ""
    say(f"[sweep] comparing {len(dirs)} runs{against} -> {report_dir}")
    code = subprocess.call(cmd)
    headline = _headline(report_dir / "report.json")
    if headline:
        say(f"\nVerdict: {headline}")
    if (report_dir / "report.html").is_file():
        say(f"Report:  {report_dir / 'report.html'}")
    return code


def _label(run_dir: Path) -> str:
    return str((peek_run_json(run_dir) or {}).get("label") or run_dir.name)


def _headline(report_json: Path) -> str | None:
    try:
        headline = json.loads(report_json.read_text()).get("headline")
    except (OSError, json.JSONDecodeError, AttributeError):
        return None
    return str(headline) if headline else None

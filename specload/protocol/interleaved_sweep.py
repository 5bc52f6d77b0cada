"""``specload sweep --interleave``: every condition's server up at once, blocks interleaved.

One *session* per replicate: start (or reach, with ``--url LABEL=URL``) one server per
condition, check each, then one ``specload run`` whose steps are the session's blocks
(``locust/blocks.py``: each block's load goes to its condition's server after that server's
prefix cache is reset; no measured request is served while the other server has requests in
flight or while the load falls). At the end (or on Ctrl-C) the servers stop and the session's
run dir is split into one run dir per condition, ``OUT/NAME`` (``OUT/NAME-rK`` with several
replicates), which compare reads as usual; the last line says where the wall time went.
With ``--until-decided`` the servers stay up after the session's blocks for rounds of more
blocks where steps are undecided (``protocol/until_decided.py``), each split into the same
run dirs.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specload.core.condition import Condition
from specload.core.errors import ConfigError, TargetError
from specload.protocol.argv import run_argv
from specload.protocol.child_run import (
    drive_command,
    patch_run_json,
    shielded,
    sigterm_as_interrupt,
)
from specload.protocol.interleave import (
    Round,
    cells_of,
    opens,
    plan_blocks,
    split_session,
)
from specload.protocol.sweep import (
    make_target,
    outermost_new,
    preflight_target,
    remove_if_empty,
    replicate_dir,
)
from specload.protocol.sweep_plan import ConditionResult, SweepPlan
from specload.protocol.target import ManagedServer, Target
from specload.protocol.until_decided import look_at, plan_round, round_line, stamp_looks
from specload.recorder.rundir import RunMeta, peek_run_meta, remove_new_dirs, update_run_meta
from specload.recorder.steps_json import read_steps
from specload.scenario import load_scenario
from specload.scenario.schema import Scenario

__all__ = ["check_interleave_plan", "describe", "run_interleaved", "time_split_line"]

#: Seconds a block adds to its warm-up and measured window (its cool-down until its
#: measured requests are in, and the switch to the next), for the estimate before the
#: session starts; the session's own progress lines use the time blocks really took.
BLOCK_OVERHEAD_S = 1.5
#: The session's run dir under ``OUT`` (split into the conditions' run dirs at the end).
SESSION_DIR = ".session"
#: run.json ``label`` of a session's run before the split
SESSION_LABEL = "interleaved-session"


@dataclass
class _Session:
    """One replicate's servers, blocks run so far, and how it ended."""

    plan: SweepPlan
    scenario: Scenario
    replicate: int
    say: Callable[[str], None]
    targets: dict[str, Target] = field(default_factory=dict)
    stopped: list[str] = field(default_factory=list)
    interrupted: bool = False
    started: float = field(default_factory=time.monotonic)
    #: when every server was up and checked (monotonic), for the wall time's split
    servers_up: float | None = None
    #: the outermost folder of ``OUT`` this sweep made (``sweep.outermost_new``)
    made: Path | None = None
    #: ``--until-decided``: the round running now (None: the session's own blocks), and the
    #: looks taken so far
    later: Round | None = None
    looks: int = 0

    @property
    def session_dir(self) -> Path:
        """The session's own run dir, split into the conditions' at the end (of each round)."""
        tail = f"-round{self.later.index + 1}" if self.later is not None else ""
        return self.plan.out / SESSION_DIR / f"r{self.replicate}{tail}"

    @property
    def conditions(self) -> dict[str, Condition]:
        return {c.name: c for c in self.plan.conditions}

    def run_dir(self, name: str) -> Path:
        numbered = self.plan.replicates > 1
        return replicate_dir(self.plan.out, name + self.plan.dir_tag, self.replicate, numbered)


def check_interleave_plan(plan: SweepPlan) -> None:
    """What an interleaved sweep needs, before any server starts."""
    if len(plan.conditions) < 2:
        raise ConfigError(
            "interleaving needs two or more conditions (--condition NAME=FLAGS each, or "
            "--url LABEL=URL each)",
            path="--interleave",
        )
    if plan.server_cmd is None and set(plan.urls) != {c.name for c in plan.conditions}:
        raise ConfigError(_unmatched(plan), path="--url")
    if plan.server_cmd is not None and plan.port is not None:
        raise ConfigError(
            "every condition's server runs at once, each on a free port: drop --port",
            path="--port",
        )
    cells_of(load_scenario(plan.scenario))  # ConfigError for a trace


def _unmatched(plan: SweepPlan) -> str:
    """Which condition has no ``--url LABEL=URL`` (a ``--condition`` label misspelt, say)."""
    urls = ", ".join(plan.urls) or "none"
    missing = [c.name for c in plan.conditions if c.name not in plan.urls]
    return (
        f"--condition {missing[0]} has no server: give --url {missing[0]}=URL, or name one "
        f"of the --url labels ({urls})"
        if missing
        else "give one --url LABEL=URL per condition"
    )


def run_interleaved(plan: SweepPlan, say: Callable[[str], None] = print) -> list[ConditionResult]:
    """Every replicate's session in turn; one result per (condition, replicate) merged.

    Raises ``TargetError`` when a server cannot be started (after stopping the others) and
    ``KeyboardInterrupt`` after a Ctrl-C has been cleaned up, with the results so far in the
    exception's ``results`` attribute, like ``sweep.run_sweep``.
    """
    check_interleave_plan(plan)
    scenario = load_scenario(plan.scenario)
    results: list[ConditionResult] = []
    with sigterm_as_interrupt():
        for rep in range(1, plan.replicates + 1):
            session = _Session(plan, scenario, rep, say, made=outermost_new(plan.out))
            try:
                results += _run_session(session)
            except (TargetError, KeyboardInterrupt) as exc:
                exc.results = results  # type: ignore[union-attr]
                raise
            if session.interrupted:
                interrupt = KeyboardInterrupt()
                interrupt.results = results  # type: ignore[attr-defined]
                raise interrupt
    return results


def _run_session(s: _Session) -> list[ConditionResult]:
    code: int | None = None
    try:
        _start_servers(s)
        s.servers_up = time.monotonic()
        code = _run_blocks(s)
        while s.plan.until_decided is not None and code in (0, 1) and not s.interrupted:
            results = _split(s, code)  # this round's blocks into the run dirs, then a look
            later = _next_round(s)
            if later is None:
                return results
            s.later = later
            code = _run_blocks(s)
    except KeyboardInterrupt:
        s.interrupted = True
    except TargetError:  # a server could not be reached or started: nothing ran
        _remove_unused(s)
        raise
    finally:
        with shielded() as late_signal:
            for target in s.targets.values():
                target.stop()
            s.interrupted = s.interrupted or late_signal()
    return _split(s, code)


def _next_round(s: _Session) -> Round | None:
    """A look at the run dirs as they are; the next round, or None to stop (every step
    decided, the looks used up, or no round fits the budget), said on the terminal."""
    rule = s.plan.until_decided
    assert rule is not None
    dirs = [s.run_dir(name) for name in s.conditions]
    stamp_looks(dirs, rule.looks)
    s.looks += 1
    cells = cells_of(s.scenario)
    try:
        look = look_at(dirs, s.plan.baseline, rule, cells, s.looks)
    except ConfigError as exc:  # e.g. a condition without a complete step: said, then stop
        s.say(f"[until-decided] stopped: the runs cannot be compared yet ({exc})")
        return None
    s.say(look.line(rule.looks))
    spent = time.monotonic() - s.started
    if not look.undecided:
        s.say(f"[until-decided] every step decided after {s.looks} look(s), {spent / 60:.1f} min")
        return None
    if s.looks >= rule.looks:
        s.say(f"[until-decided] stopped: all {rule.looks} looks taken; the report gives the "
              "time to decide the rest")  # fmt: skip
        return None
    meta = peek_run_meta(dirs[0])
    design = (meta.interleave if meta is not None else None) or {}
    split = design.get("time_split") or {}
    blocks_run = max(1, len(design.get("plan") or []))
    per_block = sum(float(split.get(k) or 0.0) for k in _BLOCK_PARTS) / blocks_run
    left = rule.budget_s - spent - float(split.get("other_s") or 0.0)
    later = plan_round(
        look, cells, design, len(s.conditions), float(design.get("block_s") or 1.0),
        max(per_block, 0.1), left, last=s.looks + 1 >= rule.looks,
    )  # fmt: skip
    if later is None:
        s.say(f"[until-decided] stopped: no more blocks fit the budget ({spent / 60:.1f} of "
              f"{rule.budget_s / 60:.1f} min spent); the report gives the time to decide the "
              "rest")  # fmt: skip
        return None
    est = sum(later.blocks.values()) * len(s.conditions) * per_block
    s.say(round_line(later, cells, est, spent, rule.budget_s))
    return later


#: The parts of a session's time split that its blocks take (the rest: starts, run start/end)
_BLOCK_PARTS = ("warmup_s", "measured_s", "cooldown_s", "switching_s")


def _remove_unused(s: _Session) -> None:
    """The empty run dirs made for the servers (a started server's ``server.log`` stays:
    it says why), and ``OUT`` if this sweep made it and left it empty: a sweep that measured
    nothing leaves no empty directory behind."""
    remove_if_empty(*(s.run_dir(name) for name in s.conditions))
    remove_new_dirs(s.plan.out, s.made)


def _start_servers(s: _Session) -> None:
    """One server per condition, one after another (two engines profiling one GPU's memory
    at once can each count the other's allocation as free), each checked."""
    for name, cond in s.conditions.items():
        run_dir = s.run_dir(name)
        run_dir.mkdir(parents=True, exist_ok=True)
        target = make_target(s.plan, cond, run_dir, s.say, s.replicate)
        s.targets[name] = target
        if target.command_line:
            s.say(f"[interleave] starting {name}: {target.command_line}")
        t0 = time.monotonic()
        target.start()
        s.say(f"[interleave] {name} healthy at {target.url} after {time.monotonic() - t0:.1f} s")
        preflight_target(s.plan, target)


def _run_blocks(s: _Session) -> int:
    """The session's one ``specload run``: every block a step (``locust/blocks.py``), its
    progress lines (one per block, with the time left) on our terminal."""
    return drive_command(_session_command(s))


def _session_command(s: _Session) -> list[str]:
    """``specload run`` over every condition's server (``--interleave-targets``)."""
    targets = {name: t.url for name, t in s.targets.items()}
    first = next(iter(s.targets.values()))
    design: dict[str, Any] = {"targets": targets, "replicate": s.replicate}
    if s.later is not None:
        design["round"] = s.later.to_json()
    return run_argv(
        host=first.url, scenario=s.plan.scenario, label=SESSION_LABEL, out=s.session_dir,
        processes=s.plan.processes, store_text=s.plan.store_text,
        flags=["--interleave-targets", json.dumps(design), *s.plan.run_args],
    )  # fmt: skip


def _dead_server(s: _Session) -> str | None:
    for name, target in s.targets.items():
        if isinstance(target, ManagedServer) and target.exit_code() is not None:
            return f"the {name} server exited with code {target.exit_code()} (see its server.log)"
    return None


def _split(s: _Session, code: int | None) -> list[ConditionResult]:
    """The session's run dir -> each condition's, stamped like any sweep run; the wall
    time's split said last."""
    dead = _dead_server(s)
    if dead:
        s.stopped.append(dead)
        s.say(f"[interleave] WARNING: {dead}")
    dirs = {name: s.run_dir(name) for name in s.conditions if name in s.targets}
    session_meta = peek_run_meta(s.session_dir)
    split = _time_split(s, session_meta)
    statuses = split_session(s.session_dir, dirs) if session_meta is not None else {}
    remove_if_empty(s.plan.out / SESSION_DIR)
    results: list[ConditionResult] = []
    said = split
    server_s = time.monotonic() - s.started
    for name, run_dir in dirs.items():
        cond, target = s.conditions[name], s.targets[name]
        if name not in statuses:
            remove_if_empty(run_dir)
            continue
        notes = [f"interleaved session stopped early: {why}" for why in s.stopped]
        if code not in (None, 0, 1):
            notes.append(f"the session's run exited {code} (see session-stdout.log)")
        said = _stamp_time_split(run_dir, split, later=s.later is not None)
        status = patch_run_json(
            run_dir, cond, target.command_line, s.interrupted, code, notes, s.replicate
        )
        if notes and status == "completed":
            status = _mark_degraded(run_dir, notes, s.interrupted)
        elif s.interrupted and status != "interrupted":
            status = _mark_degraded(run_dir, [], True)
        results.append(
            ConditionResult(
                cond,
                run_dir,
                status,
                code,
                target.command_line,
                s.interrupted,
                replicate=s.replicate,
                server_s=server_s,
            )  # fmt: skip
        )
        s.say(f"[interleave] {name}: {_blocks_of(run_dir)} blocks -> {run_dir} ({status})")
    if split:
        s.say(f"[interleave] wall time: {time_split_line(said)}")
    return results


def _blocks_of(run_dir: Path) -> int:
    return len({x.get("block") for x in read_steps(run_dir)[0]})


def _time_split(s: _Session, meta: RunMeta | None) -> dict[str, float]:
    """Where the session's wall time went (seconds): server starts, the run's start until
    its first block (prompts prepared once per server), each block's warm-up, measured
    window and cool-down, the switches between blocks, and the run's end."""
    steps = sorted(read_steps(s.session_dir)[0], key=lambda x: float(x.get("start") or 0.0))
    now = time.monotonic()
    total = now - s.started
    servers = (s.servers_up or now) - s.started
    if not steps or meta is None:
        return {"total_s": total, "server_starts_s": servers} if steps or meta else {}
    warm = sum(float(x["warmup_end"]) - float(x["start"]) for x in steps)
    measured = sum(float(x["end"]) - float(x["warmup_end"]) for x in steps)
    done = [float(x.get("cooldown_end") or x["end"]) for x in steps]
    starts = [float(x["start"]) for x in steps[1:]] + [float("inf")]
    # a block that the next one continues (same server and load, its window opening at this
    # one's end) cools down inside the next window: that time is measured, not cool-down
    cool = sum(
        max(0.0, min(d, nxt) - float(x["end"]))
        for x, d, nxt in zip(steps, done, starts, strict=True)
    )
    switching = sum(max(0.0, float(b["start"]) - d) for d, b in zip(done, steps[1:], strict=False))
    phase = max(done) - float(steps[0]["start"])
    return {
        "total_s": total,
        "server_starts_s": servers,
        "block_phase_s": phase,
        "warmup_s": warm,
        "measured_s": measured,
        "cooldown_s": cool,
        "switching_s": switching,
        "other_s": max(0.0, total - servers - phase),
    }


def time_split_line(split: dict[str, float]) -> str:
    """The wall time's split in one line: what share of it was measured."""
    total = split.get("total_s") or 0.0
    phase = split.get("block_phase_s")
    measured = split.get("measured_s")
    if not phase or measured is None or total <= 0:
        return f"{total:.0f} s, servers starting {split.get('server_starts_s', 0.0):.0f} s"
    parts = ", ".join(
        f"{name} {split[key]:.0f} s"
        for name, key in (
            ("server starts", "server_starts_s"), ("warm-up", "warmup_s"),
            ("cool-down", "cooldown_s"), ("switching", "switching_s"),
            ("run start and end", "other_s"),
        )
    )  # fmt: skip
    return (
        f"{total:.0f} s; measured {measured:.0f} s ({measured / phase:.0%} of the "
        f"{phase:.0f}-s block phase, {measured / total:.0%} of the whole); {parts}"
    )


def _stamp_time_split(
    run_dir: Path, split: dict[str, float], later: bool = False
) -> dict[str, float]:
    """run.json ``interleave.time_split``; a later round's block phase adds to the rounds'
    before it (``total_s`` and the server starts count from the session's start)."""
    if not split:
        return split

    def stamp(meta: RunMeta) -> None:
        design = meta.interleave or {}
        before = design.get("time_split") or {}
        meta.interleave = {**design, "time_split": _rounds_added(before, split) if later else split}

    meta = update_run_meta(run_dir, stamp)
    return split if meta is None else dict((meta.interleave or {})["time_split"])


def _rounds_added(before: dict[str, float], split: dict[str, float]) -> dict[str, float]:
    """A later round's split added to the rounds' before it; the total and the server starts
    count from the session's start, so they are the later round's own."""
    if not before:
        return split
    out = {
        **{k: float(before.get(k) or 0.0) + v for k, v in split.items()},
        "total_s": split.get("total_s", 0.0),
        "server_starts_s": split.get("server_starts_s", 0.0),
    }
    phase = out.get("block_phase_s", 0.0)
    out["other_s"] = max(0.0, out["total_s"] - out["server_starts_s"] - phase)
    return out


def _mark_degraded(run_dir: Path, reasons: list[str], interrupted: bool) -> str:
    """A session cut short measured fewer blocks than planned: the run says so, and every
    condition of an interrupted session says ``interrupted``."""

    def mark(meta: RunMeta) -> None:
        if interrupted:
            meta.status = "interrupted"
        elif meta.status == "completed":
            meta.status = "degraded"
        meta.degraded = [*meta.degraded, *reasons]

    meta = update_run_meta(run_dir, mark)
    if meta is None:  # the split wrote it a moment ago: gone now is a bug, said plainly
        raise RuntimeError(f"{run_dir / 'run.json'}: the run.json is missing or unreadable")
    return meta.status


def describe(plan: SweepPlan) -> str:
    """One line: what the session will do (conditions, blocks, time)."""
    scenario = load_scenario(plan.scenario)
    blocks = plan_blocks(scenario, [c.name for c in plan.conditions])
    # a block that continues its server's load has no warm-up, and the one before it no
    # cool-down or switch
    total = sum(
        b.duration_s + (b.warmup_s + BLOCK_OVERHEAD_S if opened else 0.0)
        for b, opened in zip(blocks, opens(blocks), strict=True)
    )
    names = ", ".join(shlex.quote(c.name) for c in plan.conditions)
    return (
        f"[interleave] {len(blocks)} blocks per session ({names}), about "
        f"{total / 60:.1f} min each, {plan.replicates} session(s)"
    )

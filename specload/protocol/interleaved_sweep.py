"""``specload sweep --interleave``: every condition's server up at once, blocks interleaved.

One *session* per replicate: start (or reach, with ``--url LABEL=URL``) one server per
condition, check each, then run the block plan (``protocol/interleave.py``): before each
block that condition's prefix cache is reset, then one ``specload run`` of the scenario cut
to that block's step. Blocks never overlap (a block's run ends when its requests have), so two
servers sharing one GPU never share its time while measured. At the end (or on Ctrl-C, or
when a server dies) the servers stop and each condition's blocks are merged into one run dir,
``OUT/NAME`` (``OUT/NAME-rK`` with several replicates), which compare reads as usual.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from specload.core.errors import ConfigError, TargetError
from specload.protocol.interleave import (
    Block,
    Cell,
    block_overrides,
    cells_of,
    merge_blocks,
    plan_blocks,
    plan_json,
)
from specload.protocol.sweep import (
    Condition,
    ConditionResult,
    SweepPlan,
    drive_run,
    make_target,
    patch_run_json,
    preflight_target,
    replicate_dir,
    shielded,
    sigterm_as_interrupt,
)
from specload.protocol.target import ManagedServer, Target, reset_prefix_cache
from specload.recorder.run_json import peek_run_json
from specload.recorder.rundir import write_json_durably
from specload.scenario import load_scenario
from specload.scenario.schema import Scenario

__all__ = ["check_interleave_plan", "describe", "run_interleaved"]

#: Seconds a block's ``specload run`` adds to its scheduled time (start-up, prompt
#: preparation, drain), for the time-left estimate until a block has been timed.
BLOCK_OVERHEAD_S = 3.0


@dataclass
class _Session:
    """One replicate's servers, blocks run so far, and how it ended."""

    plan: SweepPlan
    scenario: Scenario
    replicate: int
    say: Callable[[str], None]
    targets: dict[str, Target] = field(default_factory=dict)
    ran: dict[str, list[tuple[Block, Path]]] = field(default_factory=dict)
    stopped: list[str] = field(default_factory=list)
    interrupted: bool = False
    started: float = field(default_factory=time.monotonic)

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
        raise ConfigError("give one --url LABEL=URL per condition", path="--url")
    if plan.server_cmd is not None and plan.port is not None:
        raise ConfigError(
            "every condition's server runs at once, each on a free port: drop --port",
            path="--port",
        )
    cells_of(load_scenario(plan.scenario))  # ConfigError for a trace


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
            session = _Session(plan, scenario, rep, say)
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
    blocks = plan_blocks(s.scenario, list(s.conditions), salt=s.replicate - 1)
    cells = cells_of(s.scenario)
    s.ran = {name: [] for name in s.conditions}
    try:
        _start_servers(s)
        _run_blocks(s, blocks, cells)
    except KeyboardInterrupt:
        s.interrupted = True
    finally:
        with shielded() as late_signal:
            for target in s.targets.values():
                target.stop()
            s.interrupted = s.interrupted or late_signal()
    results = _merge(s, blocks)
    root = s.plan.out / ".blocks"
    for d in (root / f"r{s.replicate}", root):  # emptied by the merge
        if d.is_dir() and not any(d.iterdir()):
            d.rmdir()
    return results


def _start_servers(s: _Session) -> None:
    """One server per condition, one after another (two engines profiling one GPU's memory
    at once can each count the other's allocation as free), each checked and reset."""
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


def _run_blocks(s: _Session, blocks: Sequence[Block], cells: Sequence[Cell]) -> None:
    root = s.plan.out / ".blocks" / f"r{s.replicate}"
    took: list[float] = []
    for block in blocks:
        dead = _dead_server(s)
        if dead:
            s.stopped.append(dead)
            s.say(f"[interleave] WARNING: {dead}; the session stops here")
            return
        target = s.targets[block.condition]
        reset_prefix_cache(target.url)
        path = root / f"{block.number:04d}-{block.condition}"
        s.say(_progress(s, block, blocks, cells, took))
        s.ran[block.condition].append((block, path))
        t0 = time.monotonic()
        code = _run_block(s, block, target, path, cells)
        took.append(time.monotonic() - t0)
        s.say(f"[interleave]   {_last_step_line(path)}")
        if code not in (0, 1):  # 1: degraded, its records kept; else the run's own words
            s.say(f"[interleave]   exit {code}: {_last_line(path)}")
        if code == 2:  # bad input: every later block would fail the same way
            s.stopped.append(f"block {block.number + 1} exited 2 (see {path / 'stdout.log'})")
            s.say(f"[interleave] ERROR: {s.stopped[-1]}; the session stops here")
            return


def _run_block(s: _Session, block: Block, target: Target, path: Path, cells: Sequence[Cell]) -> int:
    """One block's ``specload run``; its terminal lines go to the block's ``stdout.log``
    (merged into the run dir's ``blocks.log``), a summary line to ours."""
    path.mkdir(parents=True, exist_ok=True)
    overrides = json.dumps(block_overrides(block, cells), separators=(",", ":"))
    with open(path / "stdout.log", "wb") as out:
        return drive_run(
            s.plan,
            s.conditions[block.condition],
            target,
            path,
            ["--scenario-set", overrides],
            stdout=out,
        )


def _lines(path: Path) -> list[str]:
    try:
        return (path / "stdout.log").read_text(errors="replace").strip().splitlines()
    except OSError:
        return []


def _last_line(path: Path) -> str:
    lines = _lines(path)
    return lines[-1] if lines else "(no output)"


def _last_step_line(path: Path) -> str:
    """The block run's own per-step line (``achieved ..., p50 TPOT ...``), else its last."""
    steps = [ln for ln in _lines(path) if ln.startswith("step ")]
    return steps[-1].split(": ", 1)[-1] if steps else _last_line(path)


def _dead_server(s: _Session) -> str | None:
    for name, target in s.targets.items():
        if isinstance(target, ManagedServer) and target.exit_code() is not None:
            return f"the {name} server exited with code {target.exit_code()} (see its server.log)"
    return None


def _progress(
    s: _Session, block: Block, blocks: Sequence[Block], cells: Sequence[Cell], took: list[float]
) -> str:
    per_block = (
        sum(took) / len(took) if took else block.warmup_s + block.duration_s + BLOCK_OVERHEAD_S
    )
    left_s = per_block * (len(blocks) - block.number)
    of = f" (replicate {s.replicate}/{s.plan.replicates})" if s.plan.replicates > 1 else ""
    per_cell = sum(1 for b in blocks if b.cell == block.cell and b.condition == block.condition)
    return (
        f"[interleave] block {block.number + 1}/{len(blocks)}{of}: {block.condition} at "
        f"{cells[block.cell].label}, {block.k + 1}/{per_cell} of that step "
        f"({block.warmup_s:g} s warm-up + {block.duration_s:g} s); about "
        f"{left_s / 60:.1f} min left"
    )


def _merge(s: _Session, blocks: Sequence[Block]) -> list[ConditionResult]:
    """Each condition's blocks → its run dir, stamped like any sweep run."""
    scenario = {**s.scenario.to_dict(), "path": str(Path(s.plan.scenario).resolve())}
    design = plan_json(s.scenario, blocks, salt=s.replicate - 1)
    results: list[ConditionResult] = []
    server_s = time.monotonic() - s.started
    for name, cond in s.conditions.items():
        ran = s.ran.get(name) or []
        if not ran:
            continue
        run_dir = s.run_dir(name)
        merge_blocks(run_dir, ran, scenario, design)
        target = s.targets.get(name)
        command = target.command_line if target is not None else None
        notes = [f"interleaved session stopped early: {why}" for why in s.stopped]
        skipped = sum(1 for b in blocks if b.condition == name) - len(ran)
        if skipped:
            notes.append(f"{skipped} planned blocks not run")
        status = patch_run_json(run_dir, cond, command, s.interrupted, 0, notes, s.replicate)
        if (notes and status == "completed") or skipped:
            status = _mark_degraded(run_dir, notes, s.interrupted)
        results.append(
            ConditionResult(
                cond,
                run_dir,
                status,
                0,
                command,
                s.interrupted,
                replicate=s.replicate,
                server_s=server_s,
            )
        )
        s.say(f"[interleave] {name}: {len(ran)} blocks -> {run_dir} ({status})")
    return results


def _mark_degraded(run_dir: Path, reasons: list[str], interrupted: bool) -> str:
    """A session cut short measured fewer blocks than planned: the run says so, and every
    condition of an interrupted session says ``interrupted`` (whichever block was hit)."""
    path = run_dir / "run.json"
    meta = peek_run_json(run_dir)
    if meta is None:  # the merge wrote it a moment ago: gone now is a bug, said plainly
        raise RuntimeError(f"{path}: the merged run.json is missing or unreadable")
    if interrupted:
        meta["status"] = "interrupted"
    elif meta.get("status") == "completed":
        meta["status"] = "degraded"
    meta["degraded"] = [*(meta.get("degraded") or []), *reasons]
    write_json_durably(path, meta)
    return str(meta["status"])


def describe(plan: SweepPlan) -> str:
    """One line: what the session will do (conditions, blocks, time)."""
    scenario = load_scenario(plan.scenario)
    blocks = plan_blocks(scenario, [c.name for c in plan.conditions])
    total = sum(b.warmup_s + b.duration_s + BLOCK_OVERHEAD_S for b in blocks)
    names = ", ".join(shlex.quote(c.name) for c in plan.conditions)
    return (
        f"[interleave] {len(blocks)} blocks per session ({names}), about "
        f"{total / 60:.1f} min each, {plan.replicates} session(s)"
    )

"""Block-randomized A/B: every condition's load steps cut into short blocks, run interleaved.

Why: on an H200, vLLM's draft-model speculative step flipped between ~13 and ~20 ms in
windows of seconds while the baseline's stayed flat. A ladder that measures each (condition,
step) once, in one contiguous window, lets the share of slow seconds that window caught
decide the step's ratio, and that share is drift, not load. Here each cell's measured time
is split into ``blocks`` blocks; all blocks of the session run in a seeded random order in
which the conditions' blocks of one step come in adjacent pairs (a *unit*), and each
condition comes first in half of a step's units. Drift then hits every step and condition
alike and averages out over the blocks; what is left shows as spread between blocks, which
compare's block-level interval measures (``analysis/steps.py``).

A session is one ``specload run`` whose steps are its blocks (``locust/blocks.py``: how a
block's warm-up, measured window and cool-down keep what is measured clean). Its records
carry their ``condition`` and ``block`` as written; ``split_session`` then gives each
condition a run dir of its own (records copied unchanged: ``step`` is the block's number in
the session, ``repeat`` the scenario repeat), and run.json carries the whole plan under
``interleave``, whose ``plan`` maps a block to its cell and its number ``k`` there.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from specload.core.errors import ConfigError
from specload.recorder.run_json import peek_run_json
from specload.recorder.rundir import write_json_durably
from specload.scenario.schema import FIRST_BLOCK_WARMUP_S, InterleaveSpec, Scenario

__all__ = [
    "Block",
    "Cell",
    "cells_of",
    "plan_blocks",
    "plan_json",
    "split_session",
]


@dataclass(frozen=True, slots=True)
class Cell:
    """One step of the ladder: a QPS step, or a closed-loop ``{concurrency: N}`` step."""

    target_qps: float
    concurrency: int = 0

    @property
    def label(self) -> str:
        return f"c={self.concurrency}" if self.concurrency else f"{self.target_qps:g} req/s"

    def step_entry(self) -> Any:
        """The scenario ``steps`` entry that makes this cell."""
        return {"concurrency": self.concurrency} if self.concurrency else self.target_qps


@dataclass(frozen=True, slots=True)
class Block:
    """One block: ``condition`` at ``cell`` for ``duration_s`` after ``warmup_s``.

    ``number`` is its place in the session (0-based), ``unit`` the pair of adjacent blocks it
    belongs to (one per condition), ``k`` its number among its condition's blocks of that cell.
    """

    number: int
    unit: int
    condition: str
    cell: int
    k: int
    duration_s: float
    warmup_s: float


def cells_of(scenario: Scenario) -> list[Cell]:
    """The ladder's cells in the scenario's order (closed-loop steps first, as it runs them)."""
    if scenario.arrival == "trace":
        raise ConfigError(
            "not with arrival: trace (a trace replays one recording per step; interleaving "
            "cuts steps into blocks: use arrival poisson, constant or gamma)",
            path="--interleave",
        )
    closed = [Cell(0.0, c) for c in scenario.concurrency_steps]
    return closed + [Cell(float(q)) for q in scenario.steps]


def _spec(scenario: Scenario) -> InterleaveSpec:
    return scenario.interleave or InterleaveSpec()


def _seed(scenario: Scenario, salt: int) -> int:
    spec = _spec(scenario)
    return (scenario.seed if spec.seed is None else spec.seed) + salt


def plan_blocks(scenario: Scenario, conditions: Sequence[str], salt: int = 0) -> list[Block]:
    """Every block of one session, in run order.

    Units (a cell's k-th block of every condition) are shuffled with a seeded generator;
    inside a unit the conditions follow a per-cell shuffled order rotated by k, so for two
    conditions each comes first in half of a cell's units (balanced against drift within a
    unit). ``repeats`` multiplies the blocks per cell. ``salt`` (the replicate, 0-based) gives
    each session of a sweep its own order.
    """
    spec = _spec(scenario)
    rng = random.Random(f"specload-interleave:{_seed(scenario, salt)}")
    cells = cells_of(scenario)
    per_cell = spec.blocks * scenario.repeats
    units = [(c, k) for c in range(len(cells)) for k in range(per_cell)]
    rng.shuffle(units)
    base = {c: rng.sample(list(conditions), len(conditions)) for c in range(len(cells))}
    duration = scenario.step_duration_s / spec.blocks
    # a derived warm-up (None) is planned at its first block's; the session sets each one
    warmup = FIRST_BLOCK_WARMUP_S if spec.block_warmup_s is None else spec.block_warmup_s
    blocks: list[Block] = []
    for unit, (c, k) in enumerate(units):
        order = base[c][k % len(conditions) :] + base[c][: k % len(conditions)]
        for cond in order:
            blocks.append(Block(len(blocks), unit, cond, c, k, duration, warmup))
    return blocks


def plan_json(scenario: Scenario, blocks: Sequence[Block], salt: int = 0) -> dict[str, Any]:
    """run.json's ``interleave``: the design and every block, whoever ran it."""
    spec = _spec(scenario)
    cells = cells_of(scenario)
    return {
        "blocks_per_cell": spec.blocks * scenario.repeats,
        "block_s": scenario.step_duration_s / spec.blocks,
        "block_warmup_s": spec.block_warmup_s,
        "seed": _seed(scenario, salt),
        "cells": [asdict(c) | {"label": c.label} for c in cells],
        "plan": [asdict(b) for b in blocks],
    }


def split_session(session: Path, dirs: dict[str, Path]) -> dict[str, str]:
    """An interleaved session's run dir (``locust/blocks.py``) -> one run dir per condition,
    ``dirs[label]``; each condition's status.

    Records are copied as written (they carry their ``condition`` and ``block``); metrics
    lines and steps go to the condition of their block; GPU and host telemetry (one machine)
    to every condition. Each run.json is the session's with the condition's label, server
    and counts (``sent`` by condition as the load processes counted it). A record without a
    known condition is counted in every run.json as ``unassigned``, never dropped silently.
    The session dir is removed once every condition's files are written.
    """
    meta = peek_run_json(session)
    if meta is None:
        return {label: "failed" for label in dirs}
    design = meta.get("interleave") or {}
    cond_of = {int(b["number"]): str(b["condition"]) for b in design.get("plan") or []}
    recorded, unassigned = _split_lines(
        session / "requests.jsonl", dirs, "requests.jsonl", lambda o: o.get("condition")
    )
    _split_lines(
        session / "metrics.jsonl", dirs, "metrics.jsonl", lambda o: cond_of.get(o.get("step", -1))
    )
    for label, run_dir in dirs.items():
        if (session / "telemetry.jsonl").is_file():
            shutil.copyfile(session / "telemetry.jsonl", run_dir / "telemetry.jsonl")
        for log in ("stdout.log", "locust.log"):
            if (session / log).is_file():
                shutil.copyfile(session / log, run_dir / f"session-{log}")
        steps = [x for x in _steps(session) if x.get("condition") == label]
        _write_json(run_dir / "steps.json", steps)
        _write_json(
            run_dir / "run.json", _condition_meta(meta, label, recorded.get(label, 0), unassigned)
        )
    shutil.rmtree(session, ignore_errors=True)
    return {label: str(meta.get("status") or "failed") for label in dirs}


def _split_lines(
    path: Path, dirs: dict[str, Path], name: str, label_of: Any
) -> tuple[dict[str, int], int]:
    """Each JSON line of ``path`` appended, unchanged, to ``dirs[label_of(line)]/name``;
    lines per label and lines with no known label (a partial last line is no line)."""
    for run_dir in dirs.values():
        run_dir.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    orphans = 0
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raw = b""
    out = {label: bytearray() for label in dirs}
    for line in raw.splitlines():
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        label = label_of(obj) if isinstance(obj, dict) else None
        if label not in out:
            orphans += 1
            continue
        out[label] += line + b"\n"
        counts[label] = counts.get(label, 0) + 1
    for label, data in out.items():
        with open(dirs[label] / name, "ab") as fh:
            fh.write(data)
    return counts, orphans


def _condition_meta(
    meta: dict[str, Any], label: str, recorded: int, unassigned: int
) -> dict[str, Any]:
    """The session's run.json as one condition's: its label, its server, its counts."""
    out = dict(meta)
    out["label"] = label
    target = ((meta.get("interleave") or {}).get("targets") or {}).get(label) or {}
    out["target"] = {**(meta.get("target") or {}), **target}
    session = dict(meta.get("counts") or {})
    sent = int((session.get("sent_by_condition") or {}).get(label, recorded))
    out["counts"] = {
        "sent": sent,
        "recorded": recorded,
        "by_worker": {},
        "unrecorded": max(0, sent - recorded),
        "late": int(session.get("late") or 0),
        "unassigned": unassigned,
        "session": session,
    }
    return out


def _steps(path: Path) -> list[dict[str, Any]]:
    steps = _read_json(path / "steps.json")
    return [s for s in steps if isinstance(s, dict)] if isinstance(steps, list) else []


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _write_json(path: Path, value: Any) -> None:
    """A condition's run.json or steps.json, durably (``recorder.write_json_durably``)."""
    write_json_durably(path, value)

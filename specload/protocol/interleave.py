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

Each block is one ordinary ``specload run`` of the scenario cut to one step
(``block_overrides``): its own warm-up, and it ends only when its requests have finished,
so the next block (on the other server, maybe sharing the GPU) never overlaps a measured
one. ``merge_blocks`` then writes one run dir per condition, as if it were one run whose
step executions are the blocks: records keep their values and gain ``block``, ``step``
numbers the executions, ``repeat`` the block's number within its cell (0-based), and run.json
carries the whole plan under ``interleave``.
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
from specload.scenario.schema import InterleaveSpec, Scenario

__all__ = [
    "Block",
    "Cell",
    "block_overrides",
    "cells_of",
    "merge_blocks",
    "plan_blocks",
    "plan_json",
]

#: run.json statuses from best to worst; a merged run takes its worst block's.
_STATUS_ORDER = ("completed", "degraded", "interrupted", "failed")


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
    blocks: list[Block] = []
    for unit, (c, k) in enumerate(units):
        order = base[c][k % len(conditions) :] + base[c][: k % len(conditions)]
        for cond in order:
            blocks.append(Block(len(blocks), unit, cond, c, k, duration, spec.block_warmup_s))
    return blocks


def block_overrides(block: Block, cells: Sequence[Cell]) -> dict[str, Any]:
    """Scenario keys that cut the scenario to this block (``specload run --scenario-set``)."""
    return {
        "steps": [cells[block.cell].step_entry()],
        "step_duration_s": block.duration_s,
        "warmup_s": block.warmup_s,
        "repeats": 1,
        # the design travels with the block: a closed-loop block is valid only inside it
        "interleave": {"block_warmup_s": block.warmup_s},
    }


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


def merge_blocks(
    run_dir: Path,
    blocks: Sequence[tuple[Block, Path]],
    scenario: dict[str, Any],
    interleave: dict[str, Any],
) -> str:
    """One condition's block run dirs → ``run_dir`` (a run dir like any other); its status.

    ``blocks`` are (block, its run dir) in session order; a block whose run dir has no
    run.json (it never started) counts as failed and is named in run.json's ``degraded``.
    The block dirs are removed once merged; their Locust logs are kept in ``blocks.log``.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    metas: list[tuple[int, dict[str, Any]]] = []  # (block number from 1, its run.json)
    missing: list[str] = []
    steps: list[dict[str, Any]] = []
    with (
        open(run_dir / "requests.jsonl", "ab") as req,
        open(run_dir / "metrics.jsonl", "ab") as met,
        open(run_dir / "telemetry.jsonl", "ab") as tel,
        open(run_dir / "blocks.log", "a", encoding="utf-8") as log,
    ):
        for execution, (block, path) in enumerate(blocks):
            meta = peek_run_json(path)
            if meta is None:
                missing.append(f"block {block.number + 1} ({_where(block, interleave)}) never ran")
                continue
            metas.append((block.number + 1, meta))
            tags = {"repeat": block.k, "block": block.number}
            req.write(_relabel(path / "requests.jsonl", {"step": execution, **tags}))
            met.write(_relabel(path / "metrics.jsonl", {"step": execution}))
            tel.write(_relabel(path / "telemetry.jsonl", {"block": block.number}))
            steps += [s | {"index": execution, **tags} for s in _steps(path)[:1]]
            _append_log(log, block, path)
    _write_json(run_dir / "steps.json", steps)
    meta = _merged_meta(metas, missing, scenario, interleave)
    _write_json(run_dir / "run.json", meta)
    for _, path in blocks:
        shutil.rmtree(path, ignore_errors=True)
    return str(meta["status"])


def _steps(path: Path) -> list[dict[str, Any]]:
    steps = _read_json(path / "steps.json")
    return [s for s in steps if isinstance(s, dict)] if isinstance(steps, list) else []


def _where(block: Block, interleave: dict[str, Any]) -> str:
    cells = interleave.get("cells") or []
    label = cells[block.cell]["label"] if block.cell < len(cells) else f"cell {block.cell}"
    return f"{label}, block {block.k + 1}"


def _relabel(path: Path, fields: dict[str, Any]) -> bytes:
    """``path``'s JSON lines with ``fields`` set (a partial last line is dropped: it never
    was a record), as bytes ready to append."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return b""
    out = bytearray()
    for line in raw.splitlines():
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            if obj.get("step") is not None or "step" not in fields:
                obj.update(fields)
            out += orjson.dumps(obj) + b"\n"
    return bytes(out)


def _append_log(log: Any, block: Block, path: Path) -> None:
    """The block's terminal output and Locust log, under a header naming the block."""
    log.write(f"===== block {block.number + 1}: {block.condition} =====\n")
    for name in ("stdout.log", "locust.log"):
        try:
            log.write((path / name).read_text(encoding="utf-8", errors="replace"))
        except FileNotFoundError:
            continue


def _merged_meta(
    numbered: list[tuple[int, dict[str, Any]]],
    missing: list[str],
    scenario: dict[str, Any],
    interleave: dict[str, Any],
) -> dict[str, Any]:
    """The blocks' run.json as one: counts summed, reasons named by block, worst status."""
    metas = [m for _, m in numbered]
    if not metas:
        return {"label": "?", "status": "failed", "degraded": missing, "interleave": interleave}
    first, last = metas[0], metas[-1]
    meta = dict(first)
    meta["scenario"] = scenario
    meta["interleave"] = interleave
    meta["started_at"] = first.get("started_at")
    meta["ended_at"] = last.get("ended_at")
    meta["counts"] = _summed_counts([m.get("counts") or {} for m in metas])
    meta["workers"] = sorted({w for m in metas for w in (m.get("workers") or [])})
    meta["lost_workers"] = [w for m in metas for w in (m.get("lost_workers") or [])]
    meta["notes"] = list(dict.fromkeys(n for m in metas for n in (m.get("notes") or [])))
    reasons = [f"block {n}: {r}" for n, m in numbered for r in (m.get("degraded") or [])]
    meta["degraded"] = reasons + missing
    statuses = [str(m.get("status") or "failed") for m in metas]
    worst = max(statuses, key=lambda s: _STATUS_ORDER.index(s) if s in _STATUS_ORDER else 3)
    if worst == "completed" and meta["degraded"]:
        worst = "degraded"
    meta["status"] = worst
    if isinstance(first.get("host"), dict) and isinstance(last.get("host"), dict):
        meta["host"] = {**first["host"], "load_avg_end": last["host"].get("load_avg_end")}
    return meta


def _summed_counts(counts: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"sent": 0, "recorded": 0, "by_worker": {}}
    for c in counts:
        for key in ("sent", "recorded"):
            out[key] += int(c.get(key) or 0)
        for worker, wc in (c.get("by_worker") or {}).items():
            mine = out["by_worker"].setdefault(worker, {"sent": 0, "recorded": 0})
            for key in ("sent", "recorded"):
                mine[key] += int((wc or {}).get(key) or 0)
    for c in counts:  # any other count (late records, losses) is summed where numeric
        for key, v in c.items():
            if key not in out and isinstance(v, (int, float)):
                out[key] = out.get(key, 0) + v
    return out


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _write_json(path: Path, value: Any) -> None:
    """A merged run.json or steps.json, durably (``recorder.write_json_durably``)."""
    write_json_durably(path, value)

"""Block-randomized A/B: every condition's load steps cut into short blocks, run interleaved.

Why: on an H200, vLLM's draft-model speculative step flipped between ~13 and ~20 ms in
windows of seconds while the baseline's stayed flat. A ladder that measures each (condition,
step) once, in one contiguous window, lets the share of slow seconds that window caught
decide the step's ratio, and that share is drift, not load. Here each cell's measured time
is split into ``blocks`` blocks; the conditions' blocks of one step come in adjacent pairs
(a *unit*), and each condition comes first in half of a step's units. ``spread`` (the
default) runs all units of the session in a seeded random order: drift then hits every step
and condition alike and averages out over the blocks; what is left shows as spread between
blocks, which compare's block-level interval measures (``analysis/statistics/steps.py``).
``grouped`` runs a step's units back to back in mirrored order, so a server runs two blocks
in a row where units meet (``continues``) and needs one warm-up for both: less of the
session goes unmeasured, and only drift that hits both servers still cancels (in each pair).

A session is one ``specload run`` whose steps are its blocks (``locust/blocks.py``: how a
block's warm-up, measured window and cool-down keep what is measured clean). Its records
carry their ``condition`` and ``block`` as written; ``split_session`` then gives each
condition a run dir of its own (records copied unchanged: ``step`` is the block's number in
the session, ``repeat`` the scenario repeat), and run.json carries the whole plan under
``interleave``, whose ``plan`` maps a block to its cell and its number ``k`` there.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import orjson

from specload.core.errors import ConfigError
from specload.recorder.rundir import RunMeta, peek_run_meta, write_json_durably
from specload.recorder.steps_json import STEPS_JSON, read_steps
from specload.report.wording import step_name
from specload.scenario.schema import FIRST_BLOCK_WARMUP_S, InterleaveSpec, Scenario

__all__ = [
    "Block",
    "Cell",
    "Round",
    "cells_of",
    "continues",
    "next_round",
    "opens",
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
        return step_name(self.target_qps, self.concurrency, short=True)

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


@dataclass(frozen=True, slots=True)
class Round:
    """A later round of one server start's session (``sweep --until-decided``): ``blocks``
    per condition at the cells it names (index into ``cells_of``), their ``k`` counting on
    from ``k_from``, and block and unit numbers from ``first_block`` / ``first_unit``, so the
    round's blocks continue the run dirs of the rounds before it (``split_session``)."""

    index: int
    blocks: dict[int, int]
    k_from: dict[int, int]
    first_block: int
    first_unit: int

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "blocks": {str(c): n for c, n in self.blocks.items()},
            "k_from": {str(c): k for c, k in self.k_from.items()},
            "first_block": self.first_block,
            "first_unit": self.first_unit,
        }

    @classmethod
    def from_json(cls, value: Any) -> Round:
        """From ``to_json``'s object; ValueError when it is not one."""
        if not isinstance(value, dict):
            raise ValueError("expected an object")
        return cls(
            index=int(value["index"]),
            blocks={int(c): int(n) for c, n in dict(value["blocks"]).items()},
            k_from={int(c): int(k) for c, k in dict(value.get("k_from") or {}).items()},
            first_block=int(value["first_block"]),
            first_unit=int(value["first_unit"]),
        )


def blocks_per_cell(design: dict[str, Any]) -> dict[int, int]:
    """Blocks of one condition per cell (by cell index) in a condition's interleaved design
    (run.json ``interleave``, its ``plan``): the next ``k`` of each cell, every round so far
    counted."""
    plan = design.get("plan") or []
    first = str(plan[0]["condition"]) if plan else ""
    out: dict[int, int] = {}
    for b in plan:
        if b["condition"] == first:
            out[int(b["cell"])] = max(out.get(int(b["cell"]), 0), int(b["k"]) + 1)
    return out


def next_round(design: dict[str, Any], blocks: dict[int, int], index: int) -> Round:
    """The round after those in a condition's interleaved design (run.json ``interleave``)."""
    plan = design.get("plan") or []
    k_from = blocks_per_cell(design)
    return Round(
        index=index,
        blocks=blocks,
        k_from={c: k_from.get(c, 0) for c in blocks},
        first_block=1 + max((int(b["number"]) for b in plan), default=-1),
        first_unit=1 + max((int(b["unit"]) for b in plan), default=-1),
    )


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


def plan_blocks(
    scenario: Scenario, conditions: Sequence[str], salt: int = 0, later: Round | None = None
) -> list[Block]:
    """Every block of one session, in run order.

    ``spread`` (the default order): units (a cell's k-th block of every condition) are
    shuffled with a seeded generator; inside a unit the conditions follow a per-cell shuffled
    order rotated by k, so for two conditions each comes first in half of a cell's units
    (balanced against drift within a unit). ``grouped``: the cells come in a shuffled order,
    each cell's units back to back, and unit k's conditions in that order reversed when k is
    odd (A B, B A, A B, ...): every condition's mean place in a cell is the same, and a
    condition's blocks of two neighbouring units run in a row (``continues``). ``repeats``
    multiplies the blocks per cell. ``salt`` (the replicate, 0-based) gives each session of a
    sweep its own order; ``later`` makes the session a later round of the same server start
    (``Round``): its cells and block counts, numbered on from the last.
    """
    spec = _spec(scenario)
    seed = _seed(scenario, salt) + (7919 * later.index if later is not None else 0)
    rng = random.Random(f"specload-interleave:{seed}")
    cells = cells_of(scenario)
    per_cell = spec.blocks * scenario.repeats
    counts = (
        {c: (0, per_cell) for c in range(len(cells))}
        if later is None
        else {c: (later.k_from.get(c, 0), n) for c, n in sorted(later.blocks.items())}
    )
    units = [(c, k0 + k) for c, (k0, n) in counts.items() if 0 <= c < len(cells) for k in range(n)]
    if spec.order == "grouped":
        order = list(counts)
        rng.shuffle(order)
        rank = {c: i for i, c in enumerate(order)}
        units.sort(key=lambda u: (rank[u[0]], u[1]))
    else:
        rng.shuffle(units)
    first_block, first_unit = (later.first_block, later.first_unit) if later else (0, 0)
    base = {c: rng.sample(list(conditions), len(conditions)) for c in range(len(cells))}
    duration = scenario.step_duration_s / spec.blocks
    # a derived warm-up (None) is planned at its first block's; the session sets each one
    warmup = FIRST_BLOCK_WARMUP_S if spec.block_warmup_s is None else spec.block_warmup_s
    blocks: list[Block] = []
    for unit, (c, k) in enumerate(units, first_unit):
        for cond in _unit_order(base[c], k, spec.order):
            blocks.append(Block(first_block + len(blocks), unit, cond, c, k, duration, warmup))
    return blocks


def _unit_order(base: list[str], k: int, order: str) -> list[str]:
    """The conditions of a cell's unit k: rotated by k (``spread``), or mirrored when k is
    odd (``grouped``, so the last of one unit is the first of the next)."""
    if order == "grouped":
        return base if k % 2 == 0 else base[::-1]
    return base[k % len(base) :] + base[: k % len(base)]


def blocks_so_far(blocks: Sequence[Block]) -> int:
    """The session's block count once ``blocks`` have run: a later round's blocks number on
    from the rounds before it, so its progress counts to its last block, not its own size."""
    return blocks[-1].number + 1 if blocks else 0


def opens(blocks: Sequence[Block]) -> list[bool]:
    """Per block of a plan, whether it opens after another server's block, another step or
    nothing (a warm-up, and a cool-down and switch before it), not ``continues`` the one
    before."""
    return [not continues(a, b) for a, b in zip([None, *blocks], blocks, strict=False)]


def continues(prev: Block | None, block: Block) -> bool:
    """``block`` runs right after ``prev`` at the same server and load: its window opens
    where ``prev``'s ends, with no warm-up (the load never stopped) and no cool-down for
    ``prev`` (its measured requests finish under the same load, ``locust/blocks.py``)."""
    return (
        prev is not None
        and block.number == prev.number + 1
        and block.condition == prev.condition
        and block.cell == prev.cell
    )


def plan_json(scenario: Scenario, blocks: Sequence[Block], salt: int = 0) -> dict[str, Any]:
    """run.json's ``interleave``: the design and every block, whoever ran it."""
    spec = _spec(scenario)
    cells = cells_of(scenario)
    return {
        "blocks_per_cell": spec.blocks * scenario.repeats,
        "block_s": scenario.step_duration_s / spec.blocks,
        "block_warmup_s": spec.block_warmup_s,
        "order": spec.order,
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

    A later round of the same server start (``Round``) goes into run dirs that an earlier
    round wrote: its records, metrics, telemetry and steps are added to theirs and run.json
    merged (``_merge_round``), so a condition keeps one run dir per server start.
    """
    meta = peek_run_meta(session)
    if meta is None:
        return {label: "failed" for label in dirs}
    earlier = {label: peek_run_meta(d) for label, d in dirs.items()}
    design = meta.interleave or {}
    cond_of = {int(b["number"]): str(b["condition"]) for b in design.get("plan") or []}
    recorded, unassigned = _split_lines(
        session / "requests.jsonl", dirs, "requests.jsonl", lambda o: o.get("condition")
    )
    _split_lines(
        session / "metrics.jsonl", dirs, "metrics.jsonl", lambda o: cond_of.get(o.get("step", -1))
    )
    for label, run_dir in dirs.items():
        before = earlier[label]
        if (session / "telemetry.jsonl").is_file():
            with open(run_dir / "telemetry.jsonl", "ab" if before else "wb") as fh:
                fh.write((session / "telemetry.jsonl").read_bytes())
        for log in ("stdout.log", "locust.log"):
            if (session / log).is_file():
                shutil.copyfile(session / log, run_dir / f"session-{log}")
        steps = [x for x in _steps(session) if x.get("condition") == label]
        mine = _condition_meta(meta, label, recorded.get(label, 0), unassigned)
        if before is not None:
            steps = _steps(run_dir) + steps
            mine = _merge_round(before, mine)
        _write_json(run_dir / STEPS_JSON, steps)
        _write_json(run_dir / "run.json", mine.to_dict())
    shutil.rmtree(session, ignore_errors=True)
    return {label: meta.status or "failed" for label in dirs}


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


def _condition_meta(meta: RunMeta, label: str, recorded: int, unassigned: int) -> RunMeta:
    """The session's run.json as one condition's: its label, its server, its counts."""
    target = ((meta.interleave or {}).get("targets") or {}).get(label) or {}
    session = dict(meta.counts or {})
    sent = int((session.get("sent_by_condition") or {}).get(label, recorded))
    counts = {
        "sent": sent,
        "recorded": recorded,
        "by_worker": {},
        "unrecorded": max(0, sent - recorded),
        "late": int(session.get("late") or 0),
        "unassigned": unassigned,
        "session": session,
    }
    return replace(meta, label=label, target={**(meta.target or {}), **target}, counts=counts)


def _merge_round(old: RunMeta, new: RunMeta) -> RunMeta:
    """One condition's run.json after a later round: the first round's (its stamps: the
    condition, the server, the start) with the blocks, counts, end and notes of both."""
    a, b = old.interleave or {}, new.interleave or {}
    ca, cb = old.counts or {}, new.counts or {}
    return replace(
        old,
        interleave={
            **a,
            "plan": [*(a.get("plan") or []), *(b.get("plan") or [])],
            "rounds": int(a.get("rounds") or 1) + 1,
        },
        counts={
            **ca,
            **{
                k: int(ca.get(k) or 0) + int(cb.get(k) or 0)
                for k in ("sent", "recorded", "unrecorded", "late", "unassigned")
            },
            "session": _add_counts(ca.get("session") or {}, cb.get("session") or {}),
        },
        ended_at=new.ended_at,
        status=old.status if new.status == "completed" else new.status,
        notes=[*old.notes, *new.notes],
    )


def _add_counts(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """The session's counts over both rounds (sent, recorded, ... and the same per worker and
    per condition): every round is a session run of its own, and run.json speaks for all."""
    out: dict[str, Any] = {}
    for k in a.keys() | b.keys():
        x, y = a.get(k), b.get(k)
        if isinstance(x, dict) or isinstance(y, dict):
            out[k] = _add_counts(x or {}, y or {})
        else:
            out[k] = int(x or 0) + int(y or 0)
    return out


def _steps(path: Path) -> list[dict[str, Any]]:
    return read_steps(path)[0]


def _write_json(path: Path, value: Any) -> None:
    """A condition's run.json or steps.json, durably (``recorder.write_json_durably``)."""
    write_json_durably(path, value)

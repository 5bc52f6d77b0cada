"""Chunk gaps in time, per request, for the regime analysis (``analysis/diagnostics/regimes.py``).

compare keeps records as numpy columns without ``itl_s`` or ``first_token_at`` (a list per
record would double its parse). The regime analysis needs them for a bounded sample of
requests only, so this module picks those requests from the columns compare already has and
reads just their lines: ``requests.jsonl`` is memory-mapped, its line starts are found with
numpy (~0.3 s per 400 MB) and only the picked lines are parsed (orjson). Record ``i`` of the
columns is line ``i`` of the file when no line is broken; every parsed line's ``sent_at`` is
checked against the column, and a mismatch falls back to parsing every line (a file with a
broken line, or columns that are a subset of the file).

The sample: successful measured requests with two or more content chunks; per step execution
at most ``MAX_PER_SECOND`` requests sent in any one second (the first in file order), then at
most ``MAX_PER_EXECUTION`` per execution (every k-th). At 16 req/s and 1-2 s per request that
still leaves ~10 sampled requests in flight in every second (hundreds of gaps per second);
up to 8 req/s nothing is left out. A run recorded without ITL (``record_itl: false``) costs a
few lines: its first records are probed and the run is skipped.

A chunk's arrival time is ``first_token_at`` plus the running sum of the request's
``itl_s``; a zero gap is a token of the same chunk, each non-zero gap is one engine step the
request took part in. Gaps outside their step's measured window (``warmup_end``..``end`` in
steps.json) are dropped: they belong to another load.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from specload.analysis.inputs.run_columns import RunColumns
from specload.recorder.steps_json import measured_window

__all__ = ["MAX_PER_EXECUTION", "MAX_PER_SECOND", "RunGaps", "pick", "read_gaps"]

#: Requests sent in one second of one step execution that are read, at most.
MAX_PER_SECOND = 8
#: Requests of one step execution that are read, at most.
MAX_PER_EXECUTION = 2000
#: Lines read at the start of a file to find out whether the run recorded ITL at all.
_PROBE_LINES = 200
_SCAN_BYTES = 64 << 20


@dataclass(slots=True)
class RunGaps:
    """One run's sampled requests and their engine-step gaps (one entry per non-zero gap)."""

    #: per request: its index in the run's columns
    rec: np.ndarray
    #: per gap: arrival time (unix s) of the chunk that ended it
    t: np.ndarray
    #: per gap: the gap in seconds (one engine step)
    gap_s: np.ndarray
    #: per gap: which request (index into ``rec``)
    req: np.ndarray
    #: step indices (steps.json ``index``) at which the caps left requests out
    capped: frozenset[float]


def _first_per_group(keys: list[np.ndarray], limit: int) -> np.ndarray:
    """Mask of the first ``limit`` entries (in the given order) of each group of equal keys."""
    n = keys[0].shape[0]
    order = np.lexsort([np.arange(n), *reversed(keys)])
    changed = np.zeros(n, dtype=bool)
    changed[0] = True
    for k in keys:
        changed[1:] |= k[order][1:] != k[order][:-1]
    starts = np.flatnonzero(changed)
    rank = np.arange(n) - np.repeat(starts, np.diff(np.append(starts, n)))
    keep = np.zeros(n, dtype=bool)
    keep[order] = rank < limit
    return keep


def _every_kth(execs: np.ndarray, limit: int) -> np.ndarray:
    """Mask keeping at most ``limit`` entries per execution, evenly spread."""
    keep = np.ones(execs.shape[0], dtype=bool)
    for e in np.unique(execs):
        where = np.flatnonzero(execs == e)
        if where.size > limit:
            keep[where] = False
            keep[where[:: -(-where.size // limit)]] = True
    return keep


def pick(cols: dict[str, np.ndarray]) -> tuple[np.ndarray, frozenset[float]]:
    """Record indices to read (ascending) and the step indices where the caps left some out."""
    use = cols["ok"] & ~cols["warmup"] & (cols["content_chunks"] >= 2)
    use &= np.isfinite(cols["sent_at"]) & np.isfinite(cols["step"])
    idx = np.flatnonzero(use)
    if not idx.size:
        return idx, frozenset()
    execs = cols["step"][idx]
    keep = _first_per_group([execs, np.floor(cols["sent_at"][idx])], MAX_PER_SECOND)
    kept = idx[keep]
    kept = kept[_every_kth(cols["step"][kept], MAX_PER_EXECUTION)]
    left_out = np.setdiff1d(idx, kept, assume_unique=True)
    return kept, frozenset(np.unique(cols["step"][left_out]).tolist())


def _records_itl(path: Path) -> bool:
    """False when the file's first successful multi-chunk records all lack ``itl_s`` (the run
    was made with ``record_itl: false``); True when one has it, or none was found."""
    seen = 0
    with path.open("rb") as fh:
        for _, line in zip(range(_PROBE_LINES), fh, strict=False):
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(rec, dict) and rec.get("ok") and (rec.get("content_chunks") or 0) >= 2:
                if rec.get("itl_s"):
                    return True
                seen += 1
    return seen == 0


def _line_starts(mm: mmap.mmap) -> np.ndarray:
    """Byte offset of every line's start, and the file's end (line ``i`` is
    ``starts[i]:starts[i + 1]``)."""
    data = np.frombuffer(mm, dtype=np.uint8)
    parts = [np.zeros(1, dtype=np.int64)]
    for lo in range(0, data.shape[0], _SCAN_BYTES):
        parts.append(np.flatnonzero(data[lo : lo + _SCAN_BYTES] == 0x0A) + (lo + 1))
    if data.shape[0] and data[-1] != 0x0A:  # a last line without its newline
        parts.append(np.array([data.shape[0]], dtype=np.int64))
    del data
    return np.concatenate(parts)


def _by_line(path: Path, picked: np.ndarray, sent: np.ndarray) -> list[dict[str, Any]] | None:
    """The picked records, read as lines ``picked``; None when a line is not its record."""
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        starts = _line_starts(mm)
        if picked[-1] + 1 >= starts.shape[0]:
            return None
        out = []
        for i in picked.tolist():
            try:
                rec = orjson.loads(mm[starts[i] : starts[i + 1]])
            except orjson.JSONDecodeError:
                return None
            if not isinstance(rec, dict) or rec.get("sent_at") != sent[i]:
                return None
            out.append(rec)
        return out


def _by_scan(path: Path, picked: np.ndarray, sent: np.ndarray) -> list[dict[str, Any]]:
    """The picked records found by their ``sent_at``, parsing every line (slow, rare)."""
    want: dict[Any, int] = {float(sent[i]): k for k, i in enumerate(picked.tolist())}
    found: list[dict[str, Any]] = [{} for _ in want]
    with path.open("rb") as fh:
        for line in fh:
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(rec, dict) and (k := want.get(rec.get("sent_at"))) is not None:
                found[k] = rec
    return found


def _flatten(recs: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every gap of every record as (arrival time, gap, record position), zeros dropped."""
    itls: list[float] = []
    lengths, firsts = [], []
    for rec in recs:
        itl = rec.get("itl_s") or []
        first = rec.get("first_token_at")
        if first is None and rec.get("ttft_s") is not None:
            first = rec["sent_at"] + rec["ttft_s"]
        if first is None:
            itl = []
        itls.extend(itl)
        lengths.append(len(itl))
        firsts.append(first or 0.0)
    gaps = np.asarray(itls, dtype=np.float64)
    lens = np.asarray(lengths, dtype=np.int64)
    owner = np.repeat(np.arange(len(recs)), lens)
    csum = np.cumsum(gaps)
    before = np.concatenate([[0.0], csum])[np.cumsum(lens) - lens]
    t = np.repeat(np.asarray(firsts, dtype=np.float64), lens) + csum - np.repeat(before, lens)
    nz = gaps > 0
    return t[nz], gaps[nz], owner[nz]


def _windows(run: RunColumns, execs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each entry's step execution's measured window [lo, hi); unbounded when unknown."""
    lo = np.full(execs.shape[0], -np.inf)
    hi = np.full(execs.shape[0], np.inf)
    for s in run.steps:
        at = execs == s.get("index")
        start, end = measured_window(s)
        if start is not None:
            lo[at] = start
        if end is not None:
            hi[at] = end
    return lo, hi


def read_gaps(run: RunColumns) -> RunGaps | None:
    """The run's sampled requests and their gaps in their measured windows; None without ITL."""
    path = run.path / "requests.jsonl"
    if not path.is_file() or not _records_itl(path):
        return None
    picked, capped = pick(run.cols)
    if not picked.size:
        return None
    sent = run.cols["sent_at"]
    recs = _by_line(path, picked, sent) or _by_scan(path, picked, sent)
    t, gap, owner = _flatten(recs)
    if not t.size:
        return None
    lo, hi = _windows(run, run.cols["step"][picked[owner]])
    inside = (t >= lo) & (t < hi)
    return RunGaps(picked, t[inside], gap[inside], owner[inside], capped)

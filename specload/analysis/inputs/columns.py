"""``requests.jsonl`` → numpy columns, fast: chunked orjson parsing, in parallel for big files.

Parsing JSON is most of compare's cost on a million records (~800 MB). Each file is cut into
byte ranges that start on a line boundary; each range is parsed (one ``orjson.loads`` per
32 MB chunk, not per line) and turned into columns in its own process when the input is
large, in this process otherwise. Processes are *spawned*, never forked, so this is safe
inside gevent-patched or threaded callers. Set ``SPECLOAD_COMPARE_PROCS=1`` to stay in
one process.

Columns: float64 for numbers (null → NaN), bool for ``warmup``/``ok``, int8 for
``json_valid`` (-1 unknown), uint64 for the prompt/output hashes (their first 64 bits: equal
hashes stay equal, 0 = missing; a value that is not hex is hashed with blake2b), object for short strings.
Malformed lines are skipped and reported with their line number (``LineFault``); only the
last line of a file may be partial (a writer killed mid-line) and is reported as such.
"""

from __future__ import annotations

import gc
import hashlib
import os
import sys
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import pairwise
from multiprocessing import get_context
from operator import itemgetter
from pathlib import Path
from typing import Any, Literal

import numpy as np
import orjson

__all__ = [
    "FLOAT_FIELDS",
    "HASH_FIELDS",
    "OBJECT_FIELDS",
    "LineFault",
    "Part",
    "parse_lines",
    "parse_range",
    "read_columns",
]

#: Record fields kept as float64 columns (None becomes NaN). Durations in seconds.
FLOAT_FIELDS = (
    "step",
    "repeat",
    "target_qps",
    "scheduled_at",
    "sent_at",
    "done_at",
    "queue_delay_s",
    "ttft_s",
    "tpot_s",
    "e2e_s",
    "content_chunks",
    "prompt_tokens",
    "output_tokens",
    "cached_tokens",
    "tool_calls",
    "lookup_match_rate",
    "turn",
    "concurrency",
    "block",
)
HASH_FIELDS = ("prompt_sha256", "output_sha256")
OBJECT_FIELDS = ("finish_reason", "error_kind", "category")
CHUNK_BYTES = 32 << 20
#: Below this many bytes of input, parsing stays in this process (spawning costs ~0.5 s).
PARALLEL_MIN_BYTES = 96 << 20


#: Why a line was skipped: not JSON (``not_json``), or the range's last line cut short, the
#: mark of a writer killed mid-line (``partial``).
LineFault = Literal["not_json", "partial"]


@dataclass(slots=True)
class Part:
    """Columns of one byte range, its line count, and the lines skipped in it as (line within
    the range, why)."""

    cols: dict[str, np.ndarray] | None
    lines: int
    bad_lines: list[tuple[int, LineFault]] = field(default_factory=list)
    newest_schema: int = 1


def _code(value: Any) -> int:
    """64-bit code of one hash value: its first 16 hex digits, else a blake2b of its text."""
    if value is None:
        return 0
    text = str(value)
    try:
        raw = bytes.fromhex(text[:16])
    except ValueError:
        raw = b""
    if len(raw) != 8:
        raw = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(raw, "big")


def _hash64(values: list[Any]) -> np.ndarray:
    """``_code`` of every value, vectorised for the usual case (all hex digests or None).

    The fast path decodes all 16-digit prefixes in one ``bytes.fromhex``; it is taken only
    when that yields exactly 8 bytes per value, i.e. when every prefix is plain hex, so both
    paths give every value the same code (codes must agree across chunks and files).
    """
    pieces = [v[:16] if isinstance(v, str) and len(v) >= 16 else "0000000000000000" for v in values]
    try:
        raw = bytes.fromhex("".join(pieces))
    except ValueError:
        raw = b""
    if len(raw) != 8 * len(values):
        return np.array([_code(v) for v in values], dtype=np.uint64)
    out = np.frombuffer(raw, dtype=">u8").astype(np.uint64)
    for i in np.flatnonzero(out == 0).tolist():  # None, short, or an all-zero prefix
        out[i] = _code(values[i])
    return out


def _float_block(recs: list[dict[str, Any]], names: tuple[str, ...]) -> np.ndarray:
    """(n, len(names)) float64; ``itemgetter`` when every record has every key (one writer),
    3x faster than ``.get``; missing keys fall back to ``.get`` (NaN)."""
    try:
        return np.array(list(map(itemgetter(*names), recs)), dtype=np.float64).reshape(
            len(recs), len(names)
        )
    except KeyError:
        return np.array([[r.get(k) for k in names] for r in recs], dtype=np.float64).reshape(
            len(recs), len(names)
        )


def _other_fields(recs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    names = (
        "warmup",
        "ok",
        "json_valid",
        "prompt_sha256",
        "output_sha256",
        "finish_reason",
        "error",
        "category",
    )
    try:
        return list(zip(*map(itemgetter(*names), recs), strict=False))
    except KeyError:
        return [tuple(r.get(k) for r in recs) for k in names]


def _columns(recs: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """One array per field, built with as few Python-level passes over the records as possible."""
    first = recs[0]
    present = tuple(k for k in FLOAT_FIELDS if k in first)
    cols: dict[str, np.ndarray] = {}
    if present:
        block = _float_block(recs, present)
        cols = {k: np.ascontiguousarray(block[:, i]) for i, k in enumerate(present)}
    for name in FLOAT_FIELDS:
        if name not in cols:
            cols[name] = np.array([r.get(name) for r in recs], dtype=np.float64)
    warmup, ok, jv, prompt, output, finish, error, category = _other_fields(recs)
    cols["warmup"] = np.array(warmup, dtype=bool)
    cols["ok"] = np.array(ok, dtype=bool)
    cols["json_valid"] = np.array([-1 if v is None else int(bool(v)) for v in jv], dtype=np.int8)
    cols["prompt_sha256"] = _hash64(list(prompt))
    cols["output_sha256"] = _hash64(list(output))
    cols["finish_reason"] = np.array(finish, dtype=object)
    cols["error_kind"] = np.array(
        [e.get("kind") if isinstance(e, dict) else None for e in error], dtype=object
    )
    cols["category"] = np.array(category, dtype=object)
    return cols


def parse_lines(
    lines: list[bytes], first: int, bad_lines: list[tuple[int, LineFault]]
) -> list[Any]:
    """Parse JSON lines one by one (``first``: the first one's number); a line that is not
    JSON is skipped and added to ``bad_lines``."""
    out: list[Any] = []
    for i, line in enumerate(lines):
        if line.strip():
            try:
                out.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                bad_lines.append((first + i, "not_json"))
    return out


def _add(parts: list[dict[str, np.ndarray]], objs: list[Any]) -> int:
    recs = objs if all(type(r) is dict for r in objs) else [r for r in objs if isinstance(r, dict)]
    if recs:
        parts.append(_columns(recs))
        return int(recs[0].get("schema_version", 1) or 1)
    return 1


def parse_range(path: str, start: int, end: int) -> Part:
    """Parse the records in bytes [start, end) of ``path`` (start on a line boundary).

    The cyclic garbage collector is paused meanwhile: parsing allocates millions of objects
    that hold no cycles, and collections triggered by them cost ~10 % of the time.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _parse_range(path, start, end)
    finally:
        if was_enabled:
            gc.enable()


def _parse_buffer(
    buf: bytearray, cut: int, first: int, reread: Any, bad_lines: list[tuple[int, LineFault]]
) -> tuple[list[Any], int]:
    """Parse the lines in ``buf[1:cut]`` (``buf[cut]`` is a newline), in place.

    Turns the chunk into a JSON array without copying it: ``[`` into the spare first byte,
    ``]`` over the last newline, commas over the others (numpy, in place), one
    ``orjson.loads``. If that fails (an empty or broken line), ``reread()`` gives back the
    original bytes for the line-by-line path.
    """
    buf[0], buf[cut] = 0x5B, 0x5D  # "[" and "]"
    arr = np.frombuffer(buf, dtype=np.uint8, count=cut + 1)
    body = arr[1:cut]
    newlines = body == 0x0A
    body[newlines] = 0x2C  # ","
    del arr, body
    try:
        out = orjson.loads(memoryview(buf)[: cut + 1])
        if isinstance(out, list):
            return out, int(newlines.sum()) + 1
    except orjson.JSONDecodeError:
        pass
    lines = reread().split(b"\n")
    return parse_lines(lines, first, bad_lines), len(lines)


def _parse_range(path: str, start: int, end: int) -> Part:
    bad_lines: list[tuple[int, LineFault]] = []
    parts: list[dict[str, np.ndarray]] = []
    line_no, newest, carry, pos = 1, 1, 0, start
    buf = bytearray(CHUNK_BYTES + 2)  # byte 0 spare for "[", data from byte 1
    with open(path, "rb") as fh:
        fh.seek(start)
        while pos < end:
            if carry + 2 >= len(buf):  # one line longer than the buffer
                buf.extend(bytes(CHUNK_BYTES))
            with memoryview(buf) as view:
                got = fh.readinto(view[1 + carry : min(len(buf) - 1, 1 + carry + end - pos)])
            if not got:
                break
            base, pos, filled = pos - carry, pos + got, carry + got
            cut = buf.rfind(b"\n", 1, 1 + filled)
            if cut < 0:
                carry = filled
                continue

            def reread(at: int = base, size: int = cut - 1) -> bytes:
                with open(path, "rb") as again:
                    again.seek(at)
                    return again.read(size)

            objs, n_lines = _parse_buffer(buf, cut, line_no, reread, bad_lines)
            newest = max(newest, _add(parts, objs))
            line_no += n_lines
            carry = filled - cut
            buf[1 : 1 + carry] = buf[cut + 1 : 1 + filled]
    rest = bytes(buf[1 : 1 + carry])
    if rest.strip():
        try:
            newest = max(newest, _add(parts, [orjson.loads(rest)]))
        except orjson.JSONDecodeError:
            bad_lines.append((line_no, "partial"))
        line_no += 1
    cols = None
    if parts:
        cols = (
            parts[0]
            if len(parts) == 1
            else {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        )
    return Part(cols, line_no - 1, bad_lines, newest)


def _ranges(path: Path, pieces: int) -> list[tuple[int, int]]:
    size = path.stat().st_size
    bounds = [0]
    with path.open("rb") as fh:
        for i in range(1, pieces):
            fh.seek(max(size * i // pieces - 1, bounds[-1]))
            fh.readline()
            bounds.append(max(fh.tell(), bounds[-1]))
    bounds.append(size)
    return [(a, b) for a, b in pairwise(bounds) if b > a]


def _gevent_patched() -> bool:
    """True inside a gevent-patched process (Locust): no process pools there."""
    monkey = sys.modules.get("gevent.monkey")
    return bool(monkey is not None and monkey.is_module_patched("threading"))


def _procs() -> int:
    """Worker processes for parsing: ``SPECLOAD_COMPARE_PROCS``, else the cores (up to 8);
    always 1 in a gevent-patched process, whatever the variable says: a process pool's
    threads are greenlets there, and its result wait never returns."""
    if _gevent_patched():
        return 1
    env = os.environ.get("SPECLOAD_COMPARE_PROCS")
    if env and env.isdigit():
        return max(1, int(env))
    return max(1, min(os.cpu_count() or 1, 8))


@contextmanager
def _main_hidden() -> Iterator[None]:
    """Keep spawned workers from re-running the caller's ``__main__`` (a script, stdin, a REPL).

    ``multiprocessing``'s spawn re-imports the parent's main module in each child, which
    fails for ``<stdin>`` and re-runs unguarded scripts; the workers only need
    ``specload.analysis.inputs.columns``, so the main module's file and spec are hidden while
    they start, and restored after.
    """
    main = sys.modules.get("__main__")
    saved: dict[str, Any] = {
        k: main.__dict__[k] for k in ("__file__", "__spec__") if main and k in main.__dict__
    }
    try:
        if main is not None:
            main.__dict__.pop("__file__", None)
            main.__dict__["__spec__"] = None
        yield
    finally:
        if main is not None:
            main.__dict__.pop("__spec__", None)
            main.__dict__.update(saved)


def _parallel(paths: list[Path], procs: int, total: int) -> list[list[Part]]:
    tasks = [
        (i, a, b)
        for i, p in enumerate(paths)
        for a, b in _ranges(p, max(1, round(procs * 2 * p.stat().st_size / total)))
    ]
    with ProcessPoolExecutor(
        max_workers=min(procs, len(tasks)), mp_context=get_context("spawn")
    ) as pool:
        with _main_hidden():
            futures = [pool.submit(parse_range, str(paths[i]), a, b) for i, a, b in tasks]
        results = [f.result() for f in futures]
    out: list[list[Part]] = [[] for _ in paths]
    for (i, _a, _b), part in zip(tasks, results, strict=True):
        out[i].append(part)
    return out


def read_columns(paths: list[Path]) -> list[list[Part]]:
    """The parts of each file, in file order; parallel when the files are big enough.

    If worker processes cannot be used (no ``fork``/``spawn`` permission, a broken pool),
    parsing falls back to this process: slower, same result.
    """
    total = sum(p.stat().st_size for p in paths)
    procs = _procs()
    if procs > 1 and total >= PARALLEL_MIN_BYTES:
        try:
            return _parallel(paths, procs, total)
        except (BrokenProcessPool, OSError, RuntimeError):
            pass
    return [[parse_range(str(p), 0, p.stat().st_size)] for p in paths]

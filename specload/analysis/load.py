"""Read one run directory into columns (numpy arrays) for analysis.

Analysis must handle millions of records in seconds, so ``requests.jsonl`` is parsed in
large chunks with orjson (one ``loads`` per chunk, not per line) and kept as one numpy array
per field rather than as ``RequestRecord`` objects. The reader follows the run-directory
contract in ``docs/architecture.md``; it is tolerant where a run that was killed can leave a
mark (a partial trailing line, a missing ``steps.json`` or ``metrics.jsonl``) and reports
each such thing as a warning. A directory that is missing, is not a specload run, or holds
no records is bad input: ``ConfigError`` (exit 2) with one line.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from specload.errors import ConfigError
from specload.records import SCHEMA_VERSION

__all__ = ["FLOAT_FIELDS", "RunData", "iter_jsonl_chunks", "load_run", "read_jsonl"]

#: Record fields kept as float64 columns (None becomes NaN). Durations in seconds.
FLOAT_FIELDS = (
    "step", "repeat", "target_qps", "scheduled_at", "sent_at", "done_at", "queue_delay_s",
    "ttft_s", "tpot_s", "e2e_s", "content_chunks", "prompt_tokens", "output_tokens",
    "cached_tokens", "tool_calls", "lookup_match_rate",
)
#: Record fields kept as Python-object columns (strings or None).
OBJECT_FIELDS = ("finish_reason", "prompt_sha256", "output_sha256", "worker")
_CHUNK_BYTES = 32 << 20


@dataclass(slots=True)
class RunData:
    """One run directory: metadata, the executed steps, scrapes and the records as columns.

    ``cols`` maps a record field to an array with one entry per record: float64 for
    ``FLOAT_FIELDS``, bool for ``warmup``/``ok``, int8 for ``json_valid`` (-1 unknown,
    0 false, 1 true), object for ``OBJECT_FIELDS`` and ``error_kind``.
    """

    path: Path
    meta: dict[str, Any]
    steps: list[dict[str, Any]]
    metrics: list[dict[str, Any]]
    cols: dict[str, np.ndarray]
    warnings: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return str(self.meta.get("label") or self.path.name)

    @property
    def n(self) -> int:
        return int(self.cols["ok"].shape[0])


def _parse_lines(lines: list[bytes], first_line_no: int, where: str, warnings: list[str]) -> list[Any]:
    """Parse JSON lines in one call; on failure fall back to line by line to name the bad ones."""
    body = [ln for ln in lines if ln.strip()]
    if not body:
        return []
    try:
        return list(orjson.loads(b"[" + b",".join(body) + b"]"))
    except orjson.JSONDecodeError:
        pass
    out: list[Any] = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            warnings.append(f"{where}: line {first_line_no + i}: not valid JSON, skipped")
    return out


def iter_jsonl_chunks(path: Path, warnings: list[str]) -> Iterator[list[Any]]:
    """Objects of a JSONL file, a few MB at a time, so memory stays bounded for big runs.

    A partial trailing line (a writer killed mid-line) is skipped and reported as a warning.
    """
    line_no = 1
    rest = b""
    with path.open("rb") as fh:
        while True:
            chunk = fh.read(_CHUNK_BYTES)
            if not chunk:
                break
            data = rest + chunk
            cut = data.rfind(b"\n")
            if cut < 0:
                rest = data
                continue
            lines = data[:cut].split(b"\n")
            rest = data[cut + 1:]
            yield _parse_lines(lines, line_no, str(path), warnings)
            line_no += len(lines)
    if rest.strip():
        try:
            yield [orjson.loads(rest)]
        except orjson.JSONDecodeError:
            warnings.append(f"{path}: line {line_no}: partial trailing line ignored (writer was interrupted?)")


def read_jsonl(path: Path, warnings: list[str]) -> list[Any]:
    """All objects of a (small) JSONL file; see ``iter_jsonl_chunks``."""
    return [obj for chunk in iter_jsonl_chunks(path, warnings) for obj in chunk]


def _columns(recs: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """One array per field; comprehension per field is the fastest pure-Python route."""
    cols: dict[str, np.ndarray] = {}
    for name in FLOAT_FIELDS:
        cols[name] = np.array([r.get(name) for r in recs], dtype=np.float64)
    cols["warmup"] = np.array([bool(r.get("warmup")) for r in recs], dtype=bool)
    cols["ok"] = np.array([bool(r.get("ok")) for r in recs], dtype=bool)
    jv = [r.get("json_valid") for r in recs]
    cols["json_valid"] = np.array([-1 if v is None else int(bool(v)) for v in jv], dtype=np.int8)
    for name in OBJECT_FIELDS:
        cols[name] = np.array([r.get(name) for r in recs], dtype=object)
    errs = [r.get("error") for r in recs]
    cols["error_kind"] = np.array(
        [e.get("kind") if isinstance(e, dict) else None for e in errs], dtype=object
    )
    return cols


def _load_meta(path: Path) -> dict[str, Any]:
    run_json = path / "run.json"
    if not path.exists():
        raise ConfigError("run directory does not exist", file=str(path))
    if not path.is_dir():
        raise ConfigError("not a directory (expected a specload run directory)", file=str(path))
    if not run_json.is_file():
        raise ConfigError("not a specload run directory (no run.json)", file=str(path))
    try:
        meta = orjson.loads(run_json.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"not valid JSON ({exc})", file=str(run_json)) from None
    if not isinstance(meta, dict) or "label" not in meta:
        raise ConfigError("not a specload run.json (expected an object with 'label')", file=str(run_json))
    return meta


def _load_steps(path: Path, warnings: list[str]) -> list[dict[str, Any]]:
    steps_path = path / "steps.json"
    if not steps_path.is_file():
        warnings.append(f"{steps_path}: missing; achieved QPS estimated from record times")
        return []
    try:
        steps = orjson.loads(steps_path.read_bytes())
    except orjson.JSONDecodeError:
        warnings.append(f"{steps_path}: not valid JSON; achieved QPS estimated from record times")
        return []
    return [s for s in steps if isinstance(s, dict)] if isinstance(steps, list) else []


def load_run(path: str | Path) -> RunData:
    """Read ``path`` (a run directory) into a ``RunData``; ConfigError when it is not one."""
    path = Path(path)
    meta = _load_meta(path)
    warnings: list[str] = []
    req_path = path / "requests.jsonl"
    if not req_path.is_file():
        raise ConfigError("no requests.jsonl (was the run started?)", file=str(path))
    parts: list[dict[str, np.ndarray]] = []
    newest = SCHEMA_VERSION
    for chunk in iter_jsonl_chunks(req_path, warnings):
        recs = [r for r in chunk if isinstance(r, dict)]
        if recs:
            newest = max(newest, int(recs[0].get("schema_version", 1) or 1))
            parts.append(_columns(recs))
    if not parts:
        raise ConfigError("requests.jsonl holds no records", file=str(path))
    cols = parts[0] if len(parts) == 1 else {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    if newest > SCHEMA_VERSION:
        warnings.append(f"{req_path}: schema_version {newest} is newer than {SCHEMA_VERSION}; extra fields ignored")
    metrics_path = path / "metrics.jsonl"
    metrics: list[dict[str, Any]] = []
    if metrics_path.is_file():
        metrics = [m for m in read_jsonl(metrics_path, warnings) if isinstance(m, dict)]
    status = meta.get("status")
    if status not in (None, "completed"):
        warnings.append(f"{path}: run status is {status!r}, not 'completed'")
    return RunData(
        path=path, meta=meta, steps=_load_steps(path, warnings), metrics=metrics,
        cols=cols, warnings=warnings,
    )

"""Read one run directory into columns (numpy arrays) for analysis.

Analysis must handle millions of records in seconds, so records are kept as one numpy array
per field (``analysis.inputs.columns`` parses them) rather than as ``RequestRecord`` objects. The reader follows the run-directory
contract in ``docs/run-dir.md``; it is tolerant where a run that was killed can leave a
mark (a partial trailing line, a missing ``steps.json`` or ``metrics.jsonl``) and reports
each such thing as a warning. A directory that is missing, is not a specload run, or holds
no records is bad input: ``ConfigError`` (exit 2) with one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from specload.analysis.inputs.columns import Part, parse_lines, read_columns
from specload.core.errors import ConfigError
from specload.core.records import SCHEMA_VERSION
from specload.recorder.run_json import load_run_json, unrecorded_warning
from specload.recorder.rundir import RunMeta
from specload.recorder.steps_json import STEPS_JSON, read_steps

__all__ = ["RunColumns", "load_run", "load_runs", "read_jsonl"]


@dataclass(slots=True)
class RunColumns:
    """One run directory: metadata, the executed steps, scrapes and the records as columns.

    ``cols`` maps a record field to an array with one entry per record (see
    ``analysis.inputs.columns`` for the types).
    """

    path: Path
    meta: RunMeta
    steps: list[dict[str, Any]]
    metrics: list[dict[str, Any]]
    cols: dict[str, np.ndarray]
    warnings: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.meta.label or self.path.name

    @property
    def n(self) -> int:
        return int(self.cols["ok"].shape[0])


def read_jsonl(path: Path, warnings: list[str]) -> list[Any]:
    """All objects of a small JSONL file (metrics.jsonl); bad lines become warnings."""
    part_warnings: list[tuple[int, str]] = []
    objs = parse_lines(path.read_bytes().split(b"\n"), 1, part_warnings)
    warnings += [f"{path}: line {n}: {msg}" for n, msg in part_warnings]
    return objs


def _load_meta(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ConfigError("run directory does not exist", file=str(path))
    if not path.is_dir():
        raise ConfigError("not a directory (expected a specload run directory)", file=str(path))
    return load_run_json(path)


def _load_steps(path: Path, warnings: list[str]) -> list[dict[str, Any]]:
    steps, problem = read_steps(path)
    if problem:
        warnings.append(f"{path / STEPS_JSON}: {problem}; achieved QPS estimated from record times")
    return steps


def _merge(path: Path, parts: list[Part], warnings: list[str]) -> dict[str, np.ndarray]:
    """Concatenate a file's parts; renumber their warnings to whole-file line numbers."""
    offset, newest = 0, SCHEMA_VERSION
    cols = []
    for part in parts:
        warnings += [f"{path}: line {offset + n}: {msg}" for n, msg in part.warnings]
        offset += part.lines
        newest = max(newest, part.newest_schema)
        if part.cols is not None:
            cols.append(part.cols)
    if not cols:
        raise ConfigError("requests.jsonl holds no records", file=str(path.parent))
    if newest > SCHEMA_VERSION:
        warnings.append(
            f"{path}: schema_version {newest} is newer than {SCHEMA_VERSION}; extra fields ignored"
        )
    return cols[0] if len(cols) == 1 else {k: np.concatenate([c[k] for c in cols]) for k in cols[0]}


def load_runs(paths: list[str | Path]) -> list[RunColumns]:
    """Read run directories (records in parallel when big); ConfigError on the first bad one."""
    dirs = [Path(p) for p in paths]
    metas = [_load_meta(d) for d in dirs]
    for d in dirs:
        if not (d / "requests.jsonl").is_file():
            raise ConfigError("no requests.jsonl (was the run started?)", file=str(d))
    runs = []
    for d, meta, parts in zip(
        dirs, metas, read_columns([d / "requests.jsonl" for d in dirs]), strict=False
    ):
        warnings: list[str] = []
        cols = _merge(d / "requests.jsonl", parts, warnings)
        metrics_path = d / "metrics.jsonl"
        metrics = (
            [m for m in read_jsonl(metrics_path, warnings) if isinstance(m, dict)]
            if metrics_path.is_file()
            else []
        )
        status = meta.get("status")
        if status not in (None, "completed"):
            warnings.append(f"{d}: run status is {status!r}, not 'completed'")
        warnings += unrecorded_warning(d, meta)
        runs.append(
            RunColumns(
                path=d,
                meta=RunMeta.from_dict(meta),
                steps=_load_steps(d, warnings),
                metrics=metrics,
                cols=cols,
                warnings=warnings,
            )
        )
    return runs


def load_run(path: str | Path) -> RunColumns:
    """Read one run directory into a ``RunColumns``; ConfigError when it is not one."""
    return load_runs([path])[0]

"""Read one run directory into columns (numpy arrays) for analysis.

Analysis must handle millions of records in seconds, so records are kept as one numpy array
per field (``analysis.inputs.columns`` parses them) rather than as ``RequestRecord`` objects. The reader follows the run-directory
contract in ``docs/run-dir.md``; it is tolerant where a run that was killed can leave a
mark (a partial trailing line, a missing ``steps.json`` or ``metrics.jsonl``) and reports
each such thing as a warning: a fact (``ReadWarning``: which file, which line, what), worded
by ``report/compare_words.py``. A directory that is missing, is not a specload run, or holds
no records is bad input: ``ConfigError`` (exit 2) with one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from specload.analysis.inputs.columns import LineFault, Part, parse_lines, read_columns
from specload.core.errors import ConfigError
from specload.core.records import SCHEMA_VERSION
from specload.recorder.run_json import load_run_json, unrecorded_count
from specload.recorder.rundir import RunMeta
from specload.recorder.steps_json import STEPS_JSON, read_steps

__all__ = [
    "BadLine",
    "NewerSchema",
    "ReadWarning",
    "RunColumns",
    "RunNotCompleted",
    "StepsUnreadable",
    "Unrecorded",
    "load_run",
    "load_runs",
    "read_jsonl",
]


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line of a JSONL file (``requests.jsonl``, ``metrics.jsonl``) the reader skipped."""

    path: Path
    #: the line's number in the whole file, from 1
    line: int
    fault: LineFault


@dataclass(frozen=True, slots=True)
class NewerSchema:
    """Records written by a newer specload (``schema_version`` above the one this specload
    writes): the fields it does not know are ignored."""

    path: Path
    version: int
    known: int


@dataclass(frozen=True, slots=True)
class RunNotCompleted:
    """A run whose run.json ``status`` is not ``completed`` (``running`` after a crash,
    ``interrupted``, ``degraded``, ...): its figures may stop short."""

    run: Path
    status: str


@dataclass(frozen=True, slots=True)
class Unrecorded:
    """Requests the run sent but has no record of (``counts.unrecorded``)."""

    run: Path
    requests: int


@dataclass(frozen=True, slots=True)
class StepsUnreadable:
    """A ``steps.json`` the reader could not use: achieved QPS is estimated from the records'
    times instead."""

    #: the steps.json file
    path: Path
    #: why, as ``recorder.steps_json.read_steps`` says it: "missing", "not valid JSON", ...
    problem: str


#: What a reader found wrong with a run directory, in the order found.
ReadWarning = BadLine | NewerSchema | RunNotCompleted | Unrecorded | StepsUnreadable


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
    warnings: list[ReadWarning] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.meta.label or self.path.name

    @property
    def n(self) -> int:
        return int(self.cols["ok"].shape[0])


def read_jsonl(path: Path, warnings: list[ReadWarning]) -> list[Any]:
    """All objects of a small JSONL file (metrics.jsonl); bad lines become warnings."""
    bad: list[tuple[int, LineFault]] = []
    objs = parse_lines(path.read_bytes().split(b"\n"), 1, bad)
    warnings += [BadLine(path, n, fault) for n, fault in bad]
    return objs


def _load_meta(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ConfigError("run directory does not exist", file=str(path))
    if not path.is_dir():
        raise ConfigError("not a directory (expected a specload run directory)", file=str(path))
    return load_run_json(path)


def _load_steps(path: Path, warnings: list[ReadWarning]) -> list[dict[str, Any]]:
    steps, problem = read_steps(path)
    if problem:
        warnings.append(StepsUnreadable(path / STEPS_JSON, problem))
    return steps


def _merge(path: Path, parts: list[Part], warnings: list[ReadWarning]) -> dict[str, np.ndarray]:
    """Concatenate a file's parts; renumber their bad lines to whole-file line numbers."""
    offset, newest = 0, SCHEMA_VERSION
    cols = []
    for part in parts:
        warnings += [BadLine(path, offset + n, fault) for n, fault in part.bad_lines]
        offset += part.lines
        newest = max(newest, part.newest_schema)
        if part.cols is not None:
            cols.append(part.cols)
    if not cols:
        raise ConfigError("requests.jsonl holds no records", file=str(path.parent))
    if newest > SCHEMA_VERSION:
        warnings.append(NewerSchema(path, newest, SCHEMA_VERSION))
    return cols[0] if len(cols) == 1 else {k: np.concatenate([c[k] for c in cols]) for k in cols[0]}


def _run_warnings(path: Path, meta: dict[str, Any]) -> list[ReadWarning]:
    """What run.json says against the run: a status other than completed, unrecorded
    requests."""
    out: list[ReadWarning] = []
    status = meta.get("status")
    if status not in (None, "completed"):
        out.append(RunNotCompleted(path, status))
    if unrecorded := unrecorded_count(meta):
        out.append(Unrecorded(path, unrecorded))
    return out


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
        warnings: list[ReadWarning] = []
        cols = _merge(d / "requests.jsonl", parts, warnings)
        metrics_path = d / "metrics.jsonl"
        metrics = (
            [m for m in read_jsonl(metrics_path, warnings) if isinstance(m, dict)]
            if metrics_path.is_file()
            else []
        )
        warnings += _run_warnings(d, meta)
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

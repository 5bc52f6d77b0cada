"""The run directory: the one artefact a run leaves, and the only input analysis reads.

Layout and keys are the contract in ``docs/run-dir.md`` ("Run directory"): ``run.json``
(metadata, rewritten atomically and durably at start, at each step change and at the end, so a
reader never sees half a file and a power loss never leaves an empty one), ``requests.jsonl`` (one record per request, append-only), ``metrics.jsonl``
(one object per ``/metrics`` scrape) and ``steps.json`` (the schedule as executed). Exactly one
process writes a run directory: the Locust master, or the local runner; ``RunWriter`` holds an
exclusive ``flock`` on ``LOCK_NAME`` in it for the writer's life, so a second writer (two
masters given one ``--out``) fails with one line instead of interleaving records. ``read_run``
is the reading side, tolerant of a run that was killed mid-write.
"""

from __future__ import annotations

import fcntl
import os
import platform
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import IO, Any

import orjson

from specload import __version__
from specload.core.errors import ConfigError
from specload.core.records import RequestRecord
from specload.recorder.jsonl import JsonlWriter, iter_jsonl
from specload.recorder.run_json import (
    RUN_SCHEMA_VERSION,
    load_run_json,
    not_completed_text,
    peek_run_json,
    unrecorded_count,
    unrecorded_text,
)
from specload.recorder.steps_json import STEPS_JSON, read_steps

#: GPU and host telemetry of a run, one line per sample (``metrics.telemetry`` writes it,
#: ``analysis.inputs.telemetry`` reads it): named here, with the run dir, so neither imports the other.
TELEMETRY_FILE = "telemetry.jsonl"

__all__ = [
    "peek_run_meta",
    "update_run_meta",
    "RUN_SCHEMA_VERSION",
    "RUN_STATUSES",
    "LOCK_FD_ENV",
    "LOCK_NAME",
    "RunData",
    "RunMeta",
    "RunWriter",
    "check_out_dir",
    "read_run",
    "remove_new_dirs",
    "write_json_durably",
]

#: ``degraded``: the run went to its end, but too many requests failed (``--max-error-rate``)
#: or a worker was lost; every record is kept and ``degraded`` in run.json says why.
RUN_STATUSES = ("running", "completed", "degraded", "interrupted", "failed")
#: The lock file a writer holds (``flock``, exclusive) in its run directory.
LOCK_NAME = ".specload.lock"
#: Environment variable naming a file descriptor of ``LOCK_NAME``, locked by ``specload run``
#: and inherited by its Locust child, whose master then writes that run directory.
LOCK_FD_ENV = "SPECLOAD_RUN_LOCK_FD"


def _versions() -> dict[str, str | None]:
    try:
        from importlib.metadata import version

        locust_version: str | None = version("locust")
    except Exception:  # noqa: BLE001 -- locust missing or broken: a reader-only install
        locust_version = None
    return {"specload": __version__, "locust": locust_version, "python": platform.python_version()}


@dataclass(slots=True)
class RunMeta:
    """``run.json``: what was run, against what, by whom, and how it ended.

    Mutable on purpose: the writer updates ``status``, ``counts`` and ``workers`` as the run
    goes, and rewrites the whole file each time. Times are unix seconds.
    """

    run_id: str
    label: str
    condition: dict[str, Any] = field(
        default_factory=lambda: {"speculative": None, "prefix_caching": None}
    )
    target: dict[str, Any] = field(
        default_factory=lambda: {"url": None, "model": None, "server_version": None, "models": None}
    )
    scenario: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str | None] = field(default_factory=_versions)
    workers: list[str] = field(default_factory=list)
    started_at: float | None = None
    ended_at: float | None = None
    status: str = "running"
    server_cmd: str | None = None
    counts: dict[str, Any] = field(
        default_factory=lambda: {"sent": 0, "recorded": 0, "by_worker": {}}
    )
    lost_workers: list[dict[str, Any]] = field(default_factory=list)
    token_count_source: str | None = None
    #: The prompt set every load process sent (``PreparedPrompts.summary()``): its sha256,
    #: size, how tokens were counted and what preparing it met; None in older runs.
    prompt_set: dict[str, Any] | None = None
    lookup_method: str | None = None
    notes: list[str] = field(default_factory=list)
    #: The error budget this run was held to (fraction of requests; ``--max-error-rate``).
    max_error_rate: float | None = None
    #: Why the run is ``degraded`` (one sentence each); empty otherwise.
    degraded: list[str] = field(default_factory=list)
    #: Where the numbers came from (``specload.metrics.host.fingerprint``); None in older runs.
    host: dict[str, Any] | None = None
    #: What ``telemetry.jsonl`` samples (``TelemetrySampler.summary()``: ``gpu``, ``host``,
    #: ``interval_s``, why no GPU, sources that stopped); None in older runs.
    telemetry: dict[str, Any] | None = None
    #: an interleaved session's design (``protocol.interleave.plan_json``), its servers
    #: and where its wall time went; None outside ``sweep --interleave``
    interleave: dict[str, Any] | None = None
    #: Which server start of its condition this run is (1, 2, ...): a sweep stamps it once
    #: the run has ended; None for a run made alone.
    replicate: int | None = None
    schema_version: int = RUN_SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunMeta:
        """A run.json as read: unknown keys from newer writers are ignored, and a key an
        older writer left out reads as not recorded (no id, no label, no versions), never
        as the value a new run would get (this process's own versions)."""
        known = {f.name for f in fields(cls)}
        unrecorded: dict[str, Any] = {"run_id": "", "label": "", "versions": {}}
        return cls(**unrecorded | {k: v for k, v in d.items() if k in known})


def peek_run_meta(run_dir: str | Path) -> RunMeta | None:
    """``peek_run_json`` typed: a run that may not be one yet (a sweep's own run just
    written, an earlier run in its folder), None when run.json is missing or unreadable."""
    raw = peek_run_json(run_dir)
    if raw is None:
        return None
    return RunMeta.from_dict(raw)


def update_run_meta(run_dir: str | Path, change: Callable[[RunMeta], None]) -> RunMeta | None:
    """A finished run's run.json read typed, changed in place by ``change`` and written back
    durably (a sweep stamps its runs: condition, replicate, time split, status). Keys this
    version does not know (a newer writer's) are kept as they were. None, and nothing
    written, when run.json is missing or unreadable."""
    raw = peek_run_json(run_dir)
    if raw is None:
        return None
    meta = RunMeta.from_dict(raw)
    change(meta)
    write_json_durably(Path(run_dir) / "run.json", raw | meta.to_dict())
    return meta


def write_json_durably(path: Path, obj: Any) -> None:
    """Write a temp file, fsync it, rename it over ``path``, fsync the directory.

    The rename alone makes readers see the old or the new file, whole; without the fsyncs a
    power loss can still leave ``path`` empty (the rename reached the disk, the data did not)
    or the old file back (the directory entry did not).
    """
    tmp = path.with_name(path.name + ".tmp")
    data = orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    """Make a rename (or a new file) in ``path`` durable: fsync the directory itself."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def lock_run_dir(path: Path) -> IO[bytes]:
    """Hold ``path/LOCK_NAME`` exclusively (``flock``) until the returned file is closed (or the
    process ends); ConfigError naming the directory when another writer holds it. The lock
    ``specload run`` took for this directory and handed down (``LOCK_FD_ENV``) is this
    process's already."""
    inherited = _inherited_lock(path)
    if inherited is not None:
        return inherited
    try:
        path.mkdir(parents=True, exist_ok=True)
        fh = open(path / LOCK_NAME, "a+b")  # noqa: SIM115 -- held as long as the writer
    except OSError as exc:
        raise ConfigError(
            f"not a writable directory ({exc.strerror or exc})", file=str(path)
        ) from None
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        raise ConfigError(
            "in use: another specload run is writing this run directory "
            f"(it holds {LOCK_NAME}); choose another --out",
            file=str(path),
        ) from None
    return fh


def _inherited_lock(path: Path) -> IO[bytes] | None:
    """The locked descriptor named by ``LOCK_FD_ENV`` when it is this directory's lock file.

    ``specload run`` locks the directory before starting Locust, so a second run given the
    same ``--out`` at the same moment fails there, in the terminal, and not inside its child;
    the child shares the lock through the inherited descriptor (``flock`` locks belong to
    the open file, not to the process).
    """
    raw = os.environ.get(LOCK_FD_ENV)
    try:
        fd = int(raw) if raw else -1
        held, mine = os.fstat(fd), (path / LOCK_NAME).stat()
    except (OSError, ValueError):
        return None
    if (held.st_dev, held.st_ino) != (mine.st_dev, mine.st_ino):
        return None
    return os.fdopen(os.dup(fd), "a+b")


def check_out_dir(path: str | Path) -> Path:
    """Create ``path`` if needed and prove it is writable and not already a run; else ConfigError.

    Called before any traffic, so a bad ``--out`` fails in a second with one line, exit 2.
    """
    p = Path(path)
    if (p / "run.json").exists():
        raise ConfigError("already holds a run (run.json); choose a new directory", file=str(p))
    try:
        p.mkdir(parents=True, exist_ok=True)
        probe = p / ".specload-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(
            f"not a writable directory ({exc.strerror or exc})", file=str(p)
        ) from None
    return p


def remove_new_dirs(path: Path, created: Path | None) -> None:
    """Undo ``check_out_dir``'s mkdir after a failed pre-flight: remove ``path`` and its
    parents up to ``created`` (the outermost one that did not exist), each only if empty,
    so a run that never started leaves no directory behind."""
    if created is None:
        return
    p = path
    while True:
        try:
            p.rmdir()
        except OSError:
            return
        if p == created or p.parent == p:
            return
        p = p.parent


def _write_records(out: JsonlWriter, records: Iterable[dict[str, Any] | RequestRecord]) -> int:
    n = 0
    for r in records:
        out.write(r.to_dict() if isinstance(r, RequestRecord) else r)
        n += 1
    return n


class RunWriter:
    """Writes one run directory. Not thread-safe: the master's single gevent loop owns it.

    The directory's lock is taken before anything is written and held after ``close()`` (late
    records may still be appended, ``append_late``) until the writer is gone.
    """

    def __init__(self, path: str | Path, meta: RunMeta, *, buffer_lines: int = 512) -> None:
        self._lock = lock_run_dir(Path(path))  # first: a second writer fails here, naming it
        self.path = check_out_dir(path)
        self.meta = meta
        self.steps: list[dict[str, Any]] = []
        self._requests = JsonlWriter(self.path / "requests.jsonl", buffer_lines=buffer_lines)
        self._metrics = JsonlWriter(self.path / "metrics.jsonl", buffer_lines=64)
        self.write_meta()
        self.write_steps()

    def add_records(self, records: Iterable[dict[str, Any] | RequestRecord]) -> int:
        """Append records (dicts in the ``RequestRecord.to_dict`` shape, or records); count them."""
        return _write_records(self._requests, records)

    def append_late(self, records: list[dict[str, Any]]) -> int:
        """Append records that arrived after ``close()`` (a worker slow at the end), fsynced;
        the caller updates the counts in run.json. Returns how many were written."""
        late = JsonlWriter(self.path / "requests.jsonl")
        try:
            return _write_records(late, records)
        finally:
            late.close()

    def add_metrics(self, t: float, step: int | None, phase: str, values: dict[str, float]) -> None:
        """One ``/metrics`` scrape; ``phase`` is ``start``, ``end`` or ``interval``."""
        self._metrics.write({"t": t, "step": step, "phase": phase, "values": values})

    def begin_step(self, step: dict[str, Any]) -> None:
        """Record a step as announced (``index, repeat, target_qps, start, warmup_end, end``)."""
        self.steps.append(dict(step))
        self.write_steps()
        self.write_meta()

    def end_step(self, index: int, end: float) -> None:
        """Close a step at its actual end; flush records and metrics so a crash keeps them."""
        self.flush()
        self.update_step(index, end=end)
        self.write_meta()

    def update_step(self, index: int, **fields: float) -> None:
        """Set fields of an announced step in steps.json: its actual ``end``, a block's held
        warm-up (``warmup_end`` and ``end``, ``locust/blocks``) or its ``cooldown_end``."""
        for s in self.steps:
            if s["index"] == index:
                s.update(fields)
        self.write_steps()

    def note_step(self, index: int, text: str) -> None:
        """Say why a step's server figures are incomplete (``server_notes`` in steps.json)."""
        for s in self.steps:
            if s["index"] == index and text not in s.setdefault("server_notes", []):
                s["server_notes"].append(text)
                self.write_steps()

    def flush(self) -> None:
        self._requests.flush()
        self._metrics.flush()

    def write_meta(self) -> None:
        write_json_durably(self.path / "run.json", self.meta.to_dict())

    def write_steps(self) -> None:
        write_json_durably(self.path / STEPS_JSON, self.steps)

    def close(self, status: str, ended_at: float) -> None:
        """Fsync the JSONL files and write the final ``run.json``. Safe to call twice."""
        if status not in RUN_STATUSES:
            raise ValueError(f"status {status!r} not in {RUN_STATUSES}")
        self._requests.close()
        self._metrics.close()
        self.meta.status = status
        self.meta.ended_at = ended_at
        self.write_steps()
        self.write_meta()


@dataclass
class RunData:
    """One run directory, read back. Records are streamed (``records()``), the rest is loaded.

    ``warnings`` collects what the reader had to skip or found suspicious (a partial trailing
    line, a run still marked ``running``, lost workers); it grows while ``records()`` runs.
    """

    path: Path
    meta: RunMeta
    steps: list[dict[str, Any]]
    metrics: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)

    def record_dicts(self) -> Iterator[dict[str, Any]]:
        """Each line of ``requests.jsonl`` as a dict (the fast path for analysis)."""
        return iter_jsonl(self.path / "requests.jsonl", self.warnings)

    def records(self) -> Iterator[RequestRecord]:
        """Each line of ``requests.jsonl`` as a ``RequestRecord``."""
        for d in self.record_dicts():
            yield RequestRecord.from_dict(d)

    def telemetry(self) -> list[dict[str, Any]]:
        """The lines of ``telemetry.jsonl`` (GPU and host samples, ``analysis/inputs/telemetry.py``
        aggregates them); ``[]`` for a run without the file (older, or no source)."""
        path = self.path / "telemetry.jsonl"
        return list(iter_jsonl(path, self.warnings)) if path.exists() else []


def read_run(path: str | Path) -> RunData:
    """Open a run directory written by ``RunWriter``; ConfigError when it is not one.

    The reader accepts runs that did not complete (status ``running`` after a crash,
    ``interrupted``) and says so in ``warnings`` rather than refusing them.
    """
    p = Path(path)
    raw = load_run_json(p)
    meta = RunMeta.from_dict(raw)
    steps, problem = read_steps(p, strict=True)
    warnings: list[str] = []
    if problem:
        warnings.append(f"{p}: {STEPS_JSON} {problem}")
    metrics = list(iter_jsonl(p / "metrics.jsonl", warnings))
    if meta.status == "degraded":
        warnings.extend(f"{p}: run degraded: {why}" for why in meta.degraded)
    if meta.status != "completed" and not (meta.status == "degraded" and meta.degraded):
        warnings.append(not_completed_text(p, meta.status))
    if unrecorded := unrecorded_count(raw):
        warnings.append(unrecorded_text(p, unrecorded))
    for lost in meta.lost_workers:
        warnings.append(
            f"{p}: worker {lost.get('worker')} lost at {lost.get('at')} "
            f"(sent {lost.get('sent')}, recorded {lost.get('recorded')})"
        )
    return RunData(path=p, meta=meta, steps=steps, metrics=metrics, warnings=warnings)

"""``run.json``: the one reader that every run-directory reader goes through.

Two readers open run directories (``recorder.read_run`` for records one by one,
``analysis.load`` for columns); both take ``run.json`` from here, so they accept and refuse
the same files. The contract is ``run.schema.json`` beside this module (JSON Schema, also
used by the test suite). Only ``label`` is required: older runs lack fields added since
(``host``, ``replicate``, ``max_error_rate``, ``degraded``, ``condition.source``, even
``schema_version``), and readers treat a missing field as unknown. A field of the wrong
type, such as ``workers`` as a count instead of a list, is bad input: one line naming the
file, the key path and what was expected (``ConfigError``, exit 2), never a traceback
further down.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import orjson

from specload.core.errors import ConfigError

__all__ = [
    "RUN_SCHEMA_PATH",
    "RUN_SCHEMA_VERSION",
    "load_run_json",
    "not_completed_text",
    "peek_run_json",
    "unrecorded_count",
    "unrecorded_text",
    "validate_run_json",
]

#: The newest run.json layout this specload writes and reads.
RUN_SCHEMA_VERSION = 1
RUN_SCHEMA_PATH = Path(__file__).with_name("run.schema.json")


@functools.cache
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(json.loads(RUN_SCHEMA_PATH.read_text(encoding="utf-8")))


def validate_run_json(meta: Any, file: str | Path) -> dict[str, Any]:
    """``meta`` when it follows the schema; else ConfigError naming ``file`` and the field."""
    if not isinstance(meta, dict):
        raise ConfigError(
            "not a specload run.json (expected an object with 'label')", file=str(file)
        )
    version = meta.get("schema_version", 1)
    if isinstance(version, int) and version > RUN_SCHEMA_VERSION:
        raise ConfigError(
            f"schema_version {version} is newer than this specload reads ({RUN_SCHEMA_VERSION})",
            file=str(file),
        )
    from jsonschema.exceptions import best_match

    err = best_match(_validator().iter_errors(meta))
    if err is None:
        return meta
    where = ".".join(str(p) for p in err.absolute_path) or None
    expected = err.schema.get("description") if isinstance(err.schema, dict) else None
    if err.validator == "required":
        expected = "an object with 'label' (not a specload run.json?)"
    message = err.message if len(err.message) <= 120 else err.message[:117] + "..."
    raise ConfigError(
        f"{message}" + (f" (expected {expected})" if expected else ""), file=str(file), path=where
    )


def unrecorded_count(meta: dict[str, Any]) -> int:
    """Requests the run sent but has no record of (``counts.unrecorded``: a worker's last batch
    never reached the master); 0 when there are none or the run predates the count."""
    return int((meta.get("counts") or {}).get("unrecorded") or 0)


def unrecorded_text(run_dir: str | Path, n: int) -> str:
    """The readers' warning for ``n`` unrecorded requests (``unrecorded_count``), so every
    report, and both readers, name them in the same words."""
    return f"{run_dir}: {n} requests sent without a record (their last batch never arrived)"


def not_completed_text(run_dir: str | Path, status: str) -> str:
    """The readers' warning for a run whose ``status`` is not ``completed`` (a run still
    marked ``running`` after a crash, ``interrupted``, ...)."""
    return f"{run_dir}: run status is {status!r}, not 'completed'"


def load_run_json(run_dir: str | Path) -> dict[str, Any]:
    """Read and check ``RUN_DIR/run.json``; ConfigError (one line) when it is missing or bad."""
    path = Path(run_dir) / "run.json"
    try:
        meta = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise ConfigError("not a specload run directory (no run.json)", file=str(run_dir)) from None
    except IsADirectoryError:
        raise ConfigError("run.json is a directory", file=str(path)) from None
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"not valid JSON ({exc})", file=str(path)) from None
    return validate_run_json(meta, path)


def peek_run_json(run_dir: str | Path) -> dict[str, Any] | None:
    """``RUN_DIR/run.json`` as it is, or None when missing or unreadable: for the tools that
    look at a run they may not own (a sweep's own just-written run, the start form's list of
    finished runs), where a bad file means "not a run to use", not bad input. Nothing is
    checked against the schema: a reader that uses the run goes through ``load_run_json``."""
    try:
        meta = orjson.loads((Path(run_dir) / "run.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return meta if isinstance(meta, dict) else None

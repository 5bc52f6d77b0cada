"""``steps.json``, the schedule as executed, read back the one way every reader reads it.

One entry per step execution (a repeat of a step, a block of an interleaved session), as
``RunWriter`` wrote it: ``index``, ``target_qps`` or ``concurrency``, ``start``,
``warmup_end``, ``end`` and what the run added (a block's ``condition`` and ``block``, the
server's notes). Written once here so that a missing or broken file, and where a step's
measured window starts and ends, mean the same to analysis, the sweeps and the web UI.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from specload.core.errors import ConfigError

__all__ = ["STEPS_JSON", "measured_window", "read_steps"]

STEPS_JSON = "steps.json"


def read_steps(run_dir: str | Path, *, strict: bool = False) -> tuple[list[dict[str, Any]], str]:
    """The run's step entries and, when there are none to read, why ("missing", "not valid
    JSON", "not a list"; "" when read). Entries that are not objects are left out.
    ``strict``: a file that is there but broken is a ``ConfigError`` naming it, for readers
    that must not go on without it."""
    path = Path(run_dir) / STEPS_JSON
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return [], "missing"
    except (OSError, orjson.JSONDecodeError) as exc:
        if strict:
            raise ConfigError(f"{STEPS_JSON} is not valid JSON ({exc})", file=str(path)) from None
        return [], "not valid JSON"
    if not isinstance(data, list):
        if strict:
            raise ConfigError(f"{STEPS_JSON}: expected a list of step entries", file=str(path))
        return [], "not a list"
    return [s for s in data if isinstance(s, dict)], ""


def _num(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok else None


def measured_window(step: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """A step execution's measured window: from ``warmup_end`` (``start`` where no warm-up
    end was recorded) to ``end``; None for an edge not recorded (a step interrupted before
    its end has no ``end``). Each reader decides what an open edge means to it."""
    lo = _num(step.get("warmup_end"))
    return (lo if lo is not None else _num(step.get("start"))), _num(step.get("end"))

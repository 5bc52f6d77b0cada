"""The baseline run a live run is compared against: a finished run directory, read once.

``--baseline-run DIR`` (or the web UI's start form) names a finished run of the same
scenario; the live comparison (``locust/live_compare.py``) compares the run in progress with
it step by step. ``load_baseline`` reads it before any traffic, so a folder that is not a
finished run (no run.json, no records) is bad input with one line, not a failed comparison
later: the same things ``specload compare`` would refuse. It reads the run directory only,
so it sits with the recorder, below every package that checks or uses a baseline (the
options, the Locust session, the live comparison). Whether a baseline suits a given run
(its label, status and scenario) is ``report/baseline_words.baseline_problem``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from specload.core.errors import ConfigError
from specload.recorder.run_json import load_run_json
from specload.recorder.rundir import RunMeta

__all__ = ["Baseline", "load_baseline"]


@dataclass(frozen=True, slots=True)
class Baseline:
    """A finished run the live run is compared with (its run.json, read once)."""

    path: Path
    label: str
    run_id: str
    status: str
    scenario: dict[str, Any]


def load_baseline(path: str | Path) -> Baseline:
    """The run at ``path``; ConfigError (one line: path and what was expected) otherwise."""
    p = Path(path)
    if not (p / "run.json").is_file():
        raise ConfigError(
            "not a run directory (expected a finished specload run: run.json, requests.jsonl)",
            path="--baseline-run",
            file=str(p),
        )
    meta = RunMeta.from_dict(load_run_json(p))
    _check_records(p)
    return Baseline(
        path=p,  # as the user gave it: the UI shows it; children share the master's cwd
        label=meta.label,
        run_id=meta.run_id or p.name,
        status=meta.status,
        scenario=dict(meta.scenario),
    )


def _check_records(run: Path) -> None:
    """What ``specload compare`` refuses in a run's records, found before any traffic: no
    requests.jsonl, or not one record in it (lines it would skip with a warning are not
    refused here either). Reads up to the first record."""
    path = run / "requests.jsonl"
    expected = "expected a finished specload run: one JSON record per line"
    try:
        with open(path, "rb") as fh:
            for line in fh:
                try:
                    if isinstance(orjson.loads(line), dict):
                        return
                except orjson.JSONDecodeError:
                    continue
    except OSError as exc:
        why = exc.strerror or "cannot read"
        raise ConfigError(f"{why} ({expected})", file=str(path), path="--baseline-run") from None
    raise ConfigError(f"no records ({expected})", file=str(path), path="--baseline-run")

"""What the web UI's start form shows beside Locust's fields: the step plan and the baselines.

Locust's form asks for a user count and a ramp-up; in a specload run neither sets the load
(the scenario's open-loop QPS steps do, and the user pool is its ``max_concurrency``), so the
form says so and shows the plan of the scenario in its ``scenario`` field: each step's QPS,
warm-up and measured time, and how long the run will take. The ``baseline_run`` field offers
the finished runs under ``--runs-root`` (newest first), the same scenario's first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specload.core.errors import SpecloadError
from specload.recorder.rundir import peek_run_meta

__all__ = ["baseline_choices", "step_plan"]

#: At most this many runs are offered (newest first).
MAX_CHOICES = 50


def step_plan(path: str) -> dict[str, Any]:
    """The plan of the scenario at ``path``, or ``error`` (file, key path, expected)."""
    if not path:
        return {"scenario": path, "error": "no scenario: fill in the scenario field"}
    from specload.scenario import load_scenario

    try:
        sc = load_scenario(path)
    except SpecloadError as exc:
        return {"scenario": path, "error": str(exc)}
    plans = sc.schedule()
    return {
        "scenario": path,
        "name": sc.name,
        "arrival": sc.arrival,
        "max_concurrency": sc.max_concurrency,
        "steps": [
            {
                "index": p.index,
                "repeat": p.repeat,
                "target_qps": p.target_qps,
                "concurrency": p.concurrency,
                "warmup_s": p.warmup_s,
                "duration_s": p.duration_s,
            }
            for p in plans
        ],
        "total_s": sum(p.total_s for p in plans),
    }


def _run(d: Path) -> dict[str, Any] | None:
    meta = peek_run_meta(d)
    if meta is None or meta.status not in ("completed", "degraded"):
        return None
    return {
        "path": str(d),
        "label": meta.label,
        "status": meta.status,
        "scenario": meta.scenario.get("name"),
        "started_at": meta.started_at or 0,
    }


def baseline_choices(root: str) -> list[dict[str, Any]]:
    """Finished run dirs under ``root`` (the dir itself, its children and grandchildren, as
    a sweep's ``--out`` nests them), newest first."""
    base = Path(root)
    if not base.is_dir():
        return []
    found = [base, *base.glob("*"), *base.glob("*/*")]
    runs = [r for d in found if (d / "run.json").is_file() and (r := _run(d)) is not None]
    runs.sort(key=lambda r: -float(r["started_at"]))
    return runs[:MAX_CHOICES]

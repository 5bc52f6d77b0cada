"""The web UI's JSON (``/specload/live.json``): the run as it stands, for the tabs and the panel.

One object answers everything the page shows: ``run`` (status, step k of n, time left in the
step and in the run, workers, notes), ``steps`` (per-step figures from the records, seconds
and fractions), ``compare`` (this run against ``--baseline-run``: ratios with CIs, the verdict
so far, flagged provisional until the run ends), ``report`` (the Report button's state) and
``banners`` (what must not be missed: a run that could not start, a lost worker, the error
budget passed, a comparison that cannot be made, a UI open to the network without a login).
``None`` where nothing is known yet.
"""

from __future__ import annotations

import time
from typing import Any

from specload.locust.registry import master_side
from specload.locust.session import SessionSnapshot

__all__ = ["live_view"]


def _state(step: dict[str, Any], current: int | None, finished: bool, now: float) -> str:
    if finished or now >= step["end"]:
        return "done"
    if now < step["start"]:
        return "next"
    if step["index"] == current and now < step["warmup_end"]:
        return "warm-up"
    return "running"


def _live_step(
    s: dict[str, Any], current: int | None, finished: bool, now: float
) -> dict[str, Any]:
    """A step's summary with its state; a running step's achieved QPS over the time elapsed
    so far (``LiveStats`` divides by the whole measured window, right once the step ends)."""
    out = {**s, "state": _state(s, current, finished, now)}
    if out["state"] in ("running", "warm-up") and s["achieved_qps"] is not None:
        elapsed = now - s["warmup_end"]
        window = s["end"] - s["warmup_end"]
        out["achieved_qps"] = s["achieved_qps"] * window / elapsed if elapsed > 0.5 else None
    return out


def _clock(snap: SessionSnapshot, now: float) -> dict[str, Any]:
    """Step k of n and the time left in it and in the run (seconds; None when not known)."""
    if snap.finished or not snap.timeline:
        return {"step_now": None, "time_left_step_s": None, "time_left_run_s": None}
    end = snap.timeline[-1][3]
    at = next((t for t in snap.timeline if t[1] <= now < t[3]), None)
    return {
        "step_now": None if at is None else at[0],
        "time_left_step_s": None if at is None else max(0.0, at[3] - now),
        "time_left_run_s": max(0.0, end - now),
    }


def _banners(
    snap: SessionSnapshot | None, start_error: str | None, exposed: str | None = None
) -> list[dict[str, str]]:
    out = [{"kind": "warning", "text": exposed}] if exposed else []
    if start_error:
        out.append({"kind": "error", "text": f"the run could not start: {start_error}"})
    if snap is None:
        return out
    for x in snap.lost_workers:
        at = time.strftime("%H:%M:%S", time.gmtime(x["at"]))
        out.append(
            {
                "kind": "error",
                "text": f"worker {x['worker']} lost at {at} UTC: its share went unsent until "
                "the re-split; the run will end degraded",
            }
        )
    out += [{"kind": "error", "text": f"error budget passed: {why}"} for why in snap.over_budget]
    problem = (snap.compare or {}).get("problem")
    if problem:
        out.append({"kind": "warning", "text": f"no live comparison: {problem}"})
    report_problem = (snap.report or {}).get("problem")
    if report_problem:
        out.append({"kind": "warning", "text": f"report: {report_problem}"})
    return out


def live_view(environment: Any, now: float | None = None) -> dict[str, Any]:
    """The endpoint's JSON (see module doc and docs/web-ui.md)."""
    now = time.time() if now is None else now
    side = master_side(environment)
    session = side.session if side is not None else None
    start_error = side.last_error if side is not None else None
    exposed = side.exposed if side is not None else None
    snap = session.snapshot() if session is not None else None
    if snap is None:
        return {
            "updated_at": now,
            "run": None,
            "steps": [],
            "compare": None,
            "report": None,
            "banners": _banners(None, start_error, exposed),
        }
    current = snap.live["current_step"]
    steps = [_live_step(s, current, snap.finished, now) for s in snap.live["steps"]]
    known = {s["index"] for s in steps}
    steps += [
        {"index": index, "repeat": repeat, "target_qps": qps, "state": "next"}
        for index, repeat, qps in snap.plans
        if index not in known and not snap.finished
    ]
    run = {
        "run_id": snap.run_id,
        "label": snap.label,
        "status": snap.status,
        "finished": snap.finished,
        "run_dir": snap.run_dir,
        "host": snap.host,
        "model": snap.model,
        "total_steps": len(snap.plans),
        "current_step": current,
        **_clock(snap, now),
        "sent": snap.sent,
        "recorded": snap.recorded,
        "workers": snap.workers,
        "lost_workers": list(snap.lost_workers),
        "notes": list(snap.notes),
    }
    return {
        "updated_at": now,
        "run": run,
        "steps": steps,
        "compare": snap.compare,
        "report": snap.report,
        "banners": _banners(snap, start_error, exposed),
    }

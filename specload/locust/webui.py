"""The specload tabs on the master's Locust web UI, and the JSON endpoint behind them.

Locust's own rows round and mix every request of a name together; the question a specload
run answers is per step (did this QPS step still meet its latency, what did the server
accept), from the full-precision records. Locust 2.47's React UI has an extension point for
exactly this: ``template_args["extended_tabs"]`` adds tabs whose table layout comes from
``extended_tables`` and whose rows come from an ``extended_stats`` entry in the
``/stats/requests`` answer the UI already polls every 2 s while a test runs. So the tabs
refresh with Locust's own cadence and need no JavaScript of ours. The same figures, unformatted
(seconds, fractions), are at ``<web base path>/specload/live.json``, behind Locust's
``--web-login`` like every other page.

Two tabs: ``specload`` (one row per step: state, target/achieved QPS, p50/p95 TTFT, TPOT and
E2E in ms, tokens per chunk, acceptance rate and KV usage from ``/metrics``, requests and
errors) and ``specload run`` (run id, status, run directory, per-worker sent/recorded, lost
workers, notes).
"""

from __future__ import annotations

import json
import time
from typing import Any

from specload.locust.registry import master_side
from specload.locust.session import SessionSnapshot

__all__ = [
    "LIVE_PATH",
    "RUN_TAB",
    "STEPS_TAB",
    "install_web_ui",
    "live_view",
    "run_rows",
    "step_rows",
]

#: The JSON endpoint, under Locust's ``--web-base-path``.
LIVE_PATH = "/specload/live.json"
#: Tab keys (they appear in the UI's URL as ``?tab=...``).
STEPS_TAB = "specload"
RUN_TAB = "specload-run"

_STEP_COLUMNS = [
    ("step", "Step"),
    ("state", "State"),
    ("target_qps", "Target QPS"),
    ("achieved_qps", "Achieved QPS"),
    ("requests", "Requests"),
    ("errors", "Errors"),
    ("ttft_p50_ms", "TTFT p50 ms"),
    ("ttft_p95_ms", "TTFT p95 ms"),
    ("tpot_p50_ms", "TPOT p50 ms"),
    ("tpot_p95_ms", "TPOT p95 ms"),
    ("e2e_p50_ms", "E2E p50 ms"),
    ("e2e_p95_ms", "E2E p95 ms"),
    ("tokens_per_chunk", "Tokens/chunk"),
    ("acceptance_rate", "Acceptance %"),
    ("kv_usage_max", "KV usage max %"),
]
_RUN_COLUMNS = [("name", "What"), ("value", "Value")]


def _snapshot(environment: Any) -> SessionSnapshot | None:
    """The current run as the session shows it; None before the first run."""
    side = master_side(environment)
    session = side.session if side is not None else None
    return session.snapshot() if session is not None else None


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


def live_view(environment: Any, now: float | None = None) -> dict[str, Any]:
    """The endpoint's JSON: ``run`` (None before the first run) and ``steps`` (seconds,
    fractions, QPS; ``None`` where nothing is known yet)."""
    now = time.time() if now is None else now
    snap = _snapshot(environment)
    if snap is None:
        return {"updated_at": now, "run": None, "steps": []}
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
        "run_dir": snap.run_dir,
        "host": snap.host,
        "model": snap.model,
        "total_steps": len(snap.plans),
        "current_step": current,
        "sent": snap.sent,
        "recorded": snap.recorded,
        "workers": snap.workers,
        "lost_workers": list(snap.lost_workers),
        "notes": list(snap.notes),
    }
    return {"updated_at": now, "run": run, "steps": steps}


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:.2f}"


def _num(v: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if v is None else fmt.format(v)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.2f}"


def step_rows(view: dict[str, Any]) -> list[dict[str, str]]:
    """The ``specload`` tab's rows: display strings (ms, %), ``-`` where unknown."""
    run = view["run"] or {}
    total = run.get("total_steps", len(view["steps"]))
    rows = []
    for s in view["steps"]:
        server = s.get("server") or {}
        row = {
            "name": f"step-{s['index']}",
            "step": f"{s['index'] + 1}/{total} (r{s['repeat']})",
            "state": s["state"],
            "target_qps": f"{s['target_qps']:g}",
            "achieved_qps": _num(s.get("achieved_qps")),
            "requests": str(s.get("records", 0)),
            "errors": str(s.get("errors", 0)),
            "tokens_per_chunk": _num(s.get("tokens_per_chunk")),
            "acceptance_rate": _pct(server.get("acceptance_rate")),
            "kv_usage_max": _pct(server.get("kv_usage_max")),
        }
        for key in ("ttft", "tpot", "e2e"):
            q = s.get(f"{key}_s") or {}
            row[f"{key}_p50_ms"], row[f"{key}_p95_ms"] = _ms(q.get("p50")), _ms(q.get("p95"))
        rows.append(row)
    return rows


def run_rows(view: dict[str, Any]) -> list[dict[str, str]]:
    """The ``specload run`` tab's rows: one ``name``/``value`` pair each."""
    run = view["run"]
    if run is None:
        return [{"name": "run", "value": "not started: press Start"}]
    current = run["current_step"]
    rows = [
        ("run id", run["run_id"]),
        ("status", run["status"]),
        ("current step", "-" if current is None else f"{current + 1}/{run['total_steps']}"),
        ("run directory", run["run_dir"]),
        ("target", f"{run['host']} ({run['model']})"),
        ("requests sent / recorded", f"{run['sent']} / {run['recorded']}"),
    ]
    for w, c in run["workers"].items():
        rows.append((f"worker {w}", f"{c['state']}: sent {c['sent']}, recorded {c['recorded']}"))
    for x in run["lost_workers"]:
        at = time.strftime("%H:%M:%S", time.gmtime(x["at"]))
        rows.append(
            (
                f"lost worker {x['worker']}",
                (
                    f"at {at} UTC; sent {x['sent']}, recorded {x['recorded']}; "
                    "its share went unsent from its death until the re-split"
                ),
            )
        )
    rows += [(f"note {i + 1}", n) for i, n in enumerate(run["notes"])]
    return [{"name": k, "value": str(v)} for k, v in rows]


def _extended_stats(environment: Any) -> list[dict[str, Any]]:
    view = live_view(environment)
    return [{"key": STEPS_TAB, "data": step_rows(view)}, {"key": RUN_TAB, "data": run_rows(view)}]


def install_web_ui(environment: Any, web_ui: Any) -> None:
    """Add the tabs, the JSON endpoint and the ``extended_stats`` hook to Locust's web UI."""
    from flask import Response, jsonify, request

    web_ui.template_args["extended_tabs"] = [
        {"title": "specload", "key": STEPS_TAB},
        {"title": "specload run", "key": RUN_TAB},
    ]
    web_ui.template_args["extended_tables"] = [
        {"key": STEPS_TAB, "structure": [{"key": k, "title": t} for k, t in _STEP_COLUMNS]},
        {"key": RUN_TAB, "structure": [{"key": k, "title": t} for k, t in _RUN_COLUMNS]},
    ]
    web_ui.template_args["extended_csv_files"] = [
        {"href": "." + LIVE_PATH, "title": "specload live per-step figures (JSON)"}
    ]
    opts = environment.parsed_options
    base = ((getattr(opts, "web_base_path", None) or "") if opts else "").rstrip("/")

    def specload_live() -> Any:
        return jsonify(live_view(environment))

    # registered without decorators: Locust's WebUI is untyped, and mypy --strict would call
    # a function under an untyped decorator untyped too
    web_ui.app.add_url_rule(
        base + LIVE_PATH, "specload_live", web_ui.auth_required_if_enabled(specload_live)
    )

    def add_specload_rows(response: Response) -> Response:
        if (
            request.path != base + "/stats/requests"
            or response.status_code != 200
            or not response.is_json
        ):
            return response
        body = response.get_json()
        body["extended_stats"] = [*body.get("extended_stats", []), *_extended_stats(environment)]
        response.set_data(json.dumps(body))
        return response

    web_ui.app.after_request(add_specload_rows)

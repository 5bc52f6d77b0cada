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
import logging
import time
from pathlib import Path
from typing import Any

from specload.core.errors import ConfigError
from specload.locust.live_view import live_view
from specload.locust.registry import master_side
from specload.locust.start_form import baseline_choices, step_plan
from specload.locust.web_paths import PathRefused, UiPaths, exposure_warning, hidden_fields
from specload.report.palette import css_variables
from specload.report.wording import step_name

__all__ = [
    "LIVE_PATH",
    "RUN_TAB",
    "STEPS_TAB",
    "install_web_ui",
    "run_rows",
    "step_rows",
]

log = logging.getLogger("specload")

#: The JSON endpoints, under Locust's ``--web-base-path``.
LIVE_PATH = "/specload/live.json"
PLAN_PATH = "/specload/plan.json"
RUNS_PATH = "/specload/runs.json"
#: POST: make the report of the finished run; GET ``REPORT_PATH/report.html``: read it.
REPORT_PATH = "/specload/report"
STATIC_PATH = "/specload/static"
STATIC_DIR = Path(__file__).with_name("webui_static")
#: Tab keys (they appear in the UI's URL as ``?tab=...``).
STEPS_TAB = "specload"
RUN_TAB = "specload-run"

_STEP_COLUMNS = [
    ("step", "Step"),
    ("state", "State"),
    ("target_qps", "Target QPS"),
    ("achieved_qps", "Achieved QPS"),
    ("requests", "Records (incl. warm-up)"),  # the terminal counts the measured window
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
            "target_qps": step_name(s["target_qps"], s["concurrency"], short=True)
            if s.get("concurrency")
            else f"{s['target_qps']:g}",
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


def _page_with_panel(html: str) -> str:
    """Locust's index page with our stylesheet and script (``webui_static/``) added."""
    tags = (
        f"<style>{css_variables()}</style>"
        f'<link rel="stylesheet" href=".{STATIC_PATH}/specload-ui.css">'
        f'<script defer src=".{STATIC_PATH}/specload-ui.js"></script>'
    )
    return html.replace("</body>", tags + "</body>", 1) if tags not in html else html


def _paths(environment: Any) -> UiPaths:
    """The master's path rules (``web_paths.py``), fixed at start-up."""
    side = master_side(environment)
    return side.paths if side is not None else UiPaths.from_options(None)


def _refuse_start(environment: Any, form: Any) -> str | None:
    """Why Start with this form must not run (one line), else None: a path outside what
    the command line allows, or a hidden option. Checked before Locust applies the form."""
    opts = environment.parsed_options
    values = {**(vars(opts) if opts is not None else {}), **form.to_dict()}
    try:
        hidden_fields(form.keys())
        _paths(environment).check(values)
        _check_scenario(values)
    except (PathRefused, ConfigError) as exc:
        side = master_side(environment)
        if side is not None:
            side.last_error = str(exc)  # the banner: Locust's form shows no body of a 400
        return str(exc)
    return None


def _check_scenario(values: dict[str, Any]) -> None:
    """The form's scenario loads (``ConfigError`` naming the file, key or line otherwise):
    a Start with a missing or broken scenario is refused before anything starts, not
    accepted and failed a moment later in a banner."""
    path = str(values.get("scenario") or "")
    if not path:
        raise ConfigError(
            "no scenario: choose one (or start with --scenario FILE)", path="scenario"
        )
    from specload.options.run import scenario_overrides
    from specload.scenario import load_scenario

    load_scenario(path, scenario_overrides(values.get("scenario_set")))


def _routes(environment: Any) -> list[tuple[str, str, Any, list[str]]]:
    """The endpoints under ``/specload/``: (path, name, view, methods)."""
    from flask import jsonify, request, send_from_directory

    def specload_live() -> Any:
        return jsonify(live_view(environment))

    def specload_plan() -> Any:
        path = request.args.get("scenario")
        if path is None:
            path = getattr(environment.parsed_options, "scenario", "") or ""
        try:
            _paths(environment).scenario(path)
        except PathRefused as exc:  # the same line whether the file exists or not
            return jsonify({"error": exc.problem}), 400
        return jsonify(step_plan(path))

    def specload_runs() -> Any:
        root = _paths(environment).runs_root  # the command line's: a form cannot move it
        return jsonify({"root": root, "runs": baseline_choices(root)})

    def specload_report() -> Any:
        side = master_side(environment)
        if side is None:
            return jsonify({"state": "none", "problem": "no run"}), 409
        view = side.make_report()
        return jsonify(view), (202 if view["state"] in ("running", "ready") else 409)

    def specload_report_file(name: str) -> Any:
        side = master_side(environment)
        job = side.session.report if side is not None and side.session is not None else None
        if job is None or job.state != "ready" or job.out is None:
            return jsonify({"problem": "no report yet: press Report when the run has ended"}), 404
        return send_from_directory(job.out.resolve(), name)  # Flask reads relative to its app

    def specload_static(name: str) -> Any:
        return send_from_directory(STATIC_DIR, name)

    return [
        (LIVE_PATH, "specload_live", specload_live, ["GET"]),
        (PLAN_PATH, "specload_plan", specload_plan, ["GET"]),
        (RUNS_PATH, "specload_runs", specload_runs, ["GET"]),
        (REPORT_PATH, "specload_report", specload_report, ["POST"]),
        (REPORT_PATH + "/<path:name>", "specload_report_file", specload_report_file, ["GET"]),
        (STATIC_PATH + "/<path:name>", "specload_static", specload_static, ["GET"]),
    ]


def install_web_ui(environment: Any, web_ui: Any) -> None:
    """Add the tabs, the panel's script, the endpoints and the ``extended_stats`` hook to
    Locust's web UI."""
    from flask import Response, request

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
    # registered without decorators: Locust's WebUI is untyped, and mypy --strict would call
    # a function under an untyped decorator untyped too
    for path, name, view, methods in _routes(environment):
        web_ui.app.add_url_rule(
            base + path, name, web_ui.auth_required_if_enabled(view), methods=methods
        )

    def add_specload_parts(response: Response) -> Response:
        """Our rows into Locust's ``/stats/requests`` answer; our script into its page."""
        if response.status_code != 200:
            return response
        if request.path == base + "/stats/requests" and response.is_json:
            body = response.get_json()
            body["extended_stats"] = [
                *body.get("extended_stats", []),
                *_extended_stats(environment),
            ]
            response.set_data(json.dumps(body))
        elif request.path in (base + "/", base or "/") and response.mimetype == "text/html":
            response.direct_passthrough = False
            response.set_data(_page_with_panel(response.get_data(as_text=True)))
        return response

    web_ui.app.after_request(add_specload_parts)
    _guard_start(environment, web_ui)
    _warn_if_exposed(environment, web_ui)


#: Locust's Start: ``POST /swarm``, a view of its blueprint.
SWARM_ENDPOINT = "locust.swarm"


def _guard_start(environment: Any, web_ui: Any) -> None:
    """Locust's Start with a path outside the allowed folders, or a hidden option, is
    answered 400 with one line before Locust copies the form into the run's options (its
    own checks answer 200 with ``success: false``). Wrapped behind Locust's login check, so
    a visitor without the login gets its redirect, not our answer. Without that view (another
    Locust), ``MasterSide.resolve`` still refuses the run, with a banner."""
    from flask import jsonify, request

    swarm = web_ui.app.view_functions.get(SWARM_ENDPOINT)
    if swarm is None:
        log.warning("no %s view to guard; paths are checked at run start", SWARM_ENDPOINT)
        return

    def guarded_swarm(*args: Any, **kwargs: Any) -> Any:
        why = _refuse_start(environment, request.form)
        if why is None:
            return swarm(*args, **kwargs)
        return jsonify({"success": False, "message": why, "host": environment.host}), 400

    web_ui.app.view_functions[SWARM_ENDPOINT] = web_ui.auth_required_if_enabled(guarded_swarm)


def _warn_if_exposed(environment: Any, web_ui: Any) -> None:
    """Say once, at start-up (log and banner), when the UI is open to the network."""
    warning = exposure_warning(web_ui.host, web_ui.port, bool(web_ui.web_login))
    side = master_side(environment)
    if warning is None or side is None:
        return
    log.warning("%s", warning)
    side.exposed = warning

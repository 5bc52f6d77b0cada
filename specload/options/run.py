"""A run's options: declared once, offered by ``specload run`` and by Locust, checked once.

A run is started two ways: ``specload run`` (its own argparse parser, then a Locust child) and
Locust itself (the locustfile's ``install()`` adds these options to Locust's parser, so they
show in ``locust --help`` and the web UI and travel to workers). Both parsers are fed from
``RUN_OPTIONS``, so a flag has one name, one default and one help text, and both turn what
the user gave into a ``RunOptions`` with ``resolve_run_options``, so the same bad input gets
the same one-line error (``ConfigError``, exit 2) whichever way the run was started.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field, replace
from typing import Any

from specload.core.budget import BUDGET_HELP, DEFAULT_MAX_ERROR_RATE, max_error_rate
from specload.core.condition import declared_speculative
from specload.core.errors import ConfigError
from specload.options.gates import GateOptions, resolve_gate_options

__all__ = [
    "RUN_OPTIONS",
    "Option",
    "RunOptions",
    "add_run_options",
    "check_host",
    "add_run_option",
    "check_processes",
    "resolve_run_options",
    "scenario_overrides",
]


@dataclass(frozen=True, slots=True)
class Option:
    """One option of a run. ``where``: ``both``, ``cli`` (``specload run`` only) or ``locust``."""

    flag: str
    help: str
    default: Any = ""
    type: Any = str  # None: a store_true switch
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    where: str = "both"
    required_in_cli: bool = False
    in_web_ui: bool = True

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


RUN_OPTIONS: tuple[Option, ...] = (
    Option(
        "--host",
        "server base URL, e.g. http://127.0.0.1:8000",
        where="cli",
        required_in_cli=True,
    ),
    Option("--scenario", "specload scenario YAML file", required_in_cli=True),
    # internal: a JSON object of dotted scenario keys to override (``sweep --interleave``
    # runs each block as the scenario cut to one step); not for users, so not in --help
    Option("--scenario-set", argparse.SUPPRESS, in_web_ui=False),
    # internal: ``sweep --interleave``'s session, one run over every condition's server: a
    # JSON object {"targets": {LABEL: URL, ...}, "replicate": N, "round": {...}} (the round
    # optional: ``protocol.interleave.Round``; ``locust/blocks.py``)
    Option("--interleave-targets", argparse.SUPPRESS, in_web_ui=False),
    Option(
        "--label",
        "this run's condition label, e.g. baseline or spec-ngram-k4",
        default="run",
        required_in_cli=True,
    ),
    Option("--out", "run directory to create", where="cli", required_in_cli=True),
    Option(
        "--run-dir",
        "run directory to write (default <runs-root>/<label>; -2, -3... if taken)",
        where="locust",
    ),
    Option(
        "--processes",
        "Locust worker processes on this host (0: one local process)",
        default=0,
        type=int,
        metavar="N",
        where="cli",
    ),
    Option(
        "--store-text",
        "also write raw prompt and output text into requests.jsonl (off by default)",
        default=False,
        type=None,
    ),
    Option(
        "--api-key",
        "bearer token for the server (else $OPENAI_API_KEY); never written anywhere",
        in_web_ui=False,
    ),
    Option(
        "--speculative-config",
        "declare the server's --speculative-config JSON, or 'off', for run.json (else "
        "compare reads it from the server's /metrics where it can)",
    ),
    Option(
        "--prefix-caching",
        "declare whether the server has prefix caching on, for run.json",
        choices=("", "on", "off"),
        metavar="on|off",
    ),
    Option("--server-cmd", "the server's command line, recorded verbatim in run.json"),
    Option(
        "--gpu-metrics-url",
        "GPU memory: a DCGM exporter /metrics URL, or 'nvml' (default: NVML when the "
        "server is on this host, else not sampled)",
    ),
    Option(
        "--max-error-rate",
        f"{BUDGET_HELP} (default {DEFAULT_MAX_ERROR_RATE}): a run with such a step, or whose "
        "overall error rate passes it, or that loses a worker, ends 'degraded' (exit 1)",
        default=DEFAULT_MAX_ERROR_RATE,
        type=float,
        metavar="FRACTION",
    ),
    Option(
        "--baseline-run",
        "a finished run dir of the same scenario (another label): the specload tab shows "
        "this run's ratios to it per step as steps complete, the verdict so far and, when the "
        "run ends, a Report button",
        metavar="RUN_DIR",
        where="locust",
    ),
    Option(
        "--runs-root",
        "where run dirs go by default and the web UI looks for --baseline-run choices; the "
        "web UI's form may name run dirs and baselines only under it (default runs)",
        default="runs",
        metavar="DIR",
        where="locust",
        in_web_ui=False,
    ),
    Option(
        "--skip-preflight",
        "do not check the target (reachable, model served, one streamed completion with "
        "usage) before the run",
        default=False,
        type=None,
    ),
)


def add_run_options(parser: Any, *, locust: bool) -> None:
    """Add the run options to ``specload run``'s parser (``locust=False``) or Locust's."""
    for o in RUN_OPTIONS:
        if o.where != "both" and (o.where == "locust") != locust:
            continue
        _add(parser, o, locust=locust)


def add_run_option(parser: Any, flag: str, *, help_suffix: str = "") -> None:
    """One run option on another command's parser (``specload sweep`` passes its error
    budget to every run): the same name, default and help, ``help_suffix`` added."""
    [o] = [o for o in RUN_OPTIONS if o.flag == flag]
    _add(parser, replace(o, help=o.help + help_suffix), locust=False)


def _add(parser: Any, o: Option, *, locust: bool) -> None:
    kwargs: dict[str, Any] = {"help": o.help}
    if o.type is None:
        kwargs.update(action="store_true", default=False)
    else:
        kwargs.update(type=o.type, default=o.default)
    if o.choices is not None:
        kwargs["choices"] = list(o.choices)
    if o.metavar is not None:
        kwargs["metavar"] = o.metavar
    if locust:
        if not o.in_web_ui:
            kwargs["include_in_web_ui"] = False
    elif o.required_in_cli:
        kwargs.update(required=True)
        kwargs.pop("default", None)
    parser.add_argument(o.flag, **kwargs)


@dataclass(frozen=True, slots=True)
class RunOptions:
    """What the user declared for this run, checked; never holds the API key."""

    scenario_path: str | None
    label: str
    run_dir: str
    host: str
    store_text: bool = False
    #: ``--speculative-config`` as declared: (config or None, whether declared at all)
    speculative: tuple[dict[str, Any] | None, bool] = (None, False)
    prefix_caching: bool | None = None
    server_cmd: str | None = None
    headless: bool = True
    gpu_metrics_url: str | None = None  # DCGM exporter URL, "nvml", or None (metrics/gpu.py)
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE  # errors / records, any step or overall
    #: ``--baseline-run``: a finished run compared live in the web UI (``locust/live_compare``)
    baseline_run: str | None = None
    #: the gate options (``options/gates.py``): checked by ``specload compare`` at the end
    gates: GateOptions = GateOptions()
    #: an interleaved session (``--interleave-targets``): each condition's server URL, in the
    #: order given, and which server start of each this is (1-based)
    targets: dict[str, str] = field(default_factory=dict)
    replicate: int = 1
    #: a later round of that server start's session (``protocol.interleave.Round.to_json``)
    interleave_round: dict[str, Any] | None = None


def check_processes(n: int) -> int:
    """``--processes`` checked: 0 (one local process) or more worker processes."""
    if n < 0:
        raise ConfigError(f"{n} is negative (expected 0 or more)", path="--processes")
    return n


def check_host(host: str | None) -> str:
    """The server base URL without a trailing slash; ConfigError without one or a scheme."""
    if not host:
        raise ConfigError(
            "no target (expected a base URL with a scheme, http://HOST:PORT)", path="--host"
        )
    if not host.startswith(("http://", "https://")):
        raise ConfigError(
            f"{host!r} has no scheme (expected http://... or https://...)", path="--host"
        )
    return host.rstrip("/")


def scenario_overrides(text: str | None) -> dict[str, Any] | None:
    """``--scenario-set``'s JSON object of dotted keys (``{"steps": [4], "repeats": 1}``)."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise ConfigError(
            "expected a JSON object of scenario keys to override", path="--scenario-set"
        )
    return value


def _targets(text: str | None) -> tuple[dict[str, str], int, dict[str, Any] | None]:
    """``--interleave-targets``: ({label: base URL}, replicate, round or None); ({}, 1, None)
    when not given."""
    if not text:
        return {}, 1, None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    targets = value.get("targets") if isinstance(value, dict) else None
    replicate = value.get("replicate", 1) if isinstance(value, dict) else None
    if (
        not isinstance(targets, dict)
        or len(targets) < 2
        or not isinstance(replicate, int)
        or replicate < 1
    ):
        raise ConfigError(
            'expected {"targets": {LABEL: URL, ...} (two or more), "replicate": N}',
            path="--interleave-targets",
        )
    later = value.get("round") if isinstance(value, dict) else None
    if later is not None:
        from specload.protocol.interleave import Round

        try:
            Round.from_json(later)
        except (KeyError, TypeError, ValueError):
            raise ConfigError(
                "round: expected {index, blocks: {CELL: N}, k_from, first_block, first_unit}",
                path="--interleave-targets",
            ) from None
    return {str(k): check_host(str(v)) for k, v in targets.items()}, replicate, later


def _check_baseline(path: str, label: str, scenario: Any) -> None:
    """Headless, a baseline the live comparison could never use (this run's label, another
    scenario, not finished) is bad input before any traffic: nobody watches a banner there.
    The web UI shows it as a banner instead (the form may still change)."""
    from specload.recorder.baseline_run import load_baseline
    from specload.report.baseline_words import baseline_problem

    problem = baseline_problem(load_baseline(path), label, scenario.to_dict())
    if problem is not None:
        raise ConfigError(problem, path="--baseline-run")


def resolve_run_options(
    values: Any, *, host: str | None, run_dir: str | None, headless: bool
) -> tuple[RunOptions, Any]:
    """Check what the user gave (an argparse namespace of the options above) and load the
    scenario; ``ConfigError`` names the first thing wrong. Checks that need no file come
    first, so a typo in a flag is reported before a scenario's."""
    host = check_host(host)
    speculative = declared_speculative(getattr(values, "speculative_config", "") or "")
    gpu_url = getattr(values, "gpu_metrics_url", "") or None
    if gpu_url and gpu_url != "nvml":
        from specload.metrics.gpu import DcgmSource

        DcgmSource(gpu_url)  # ConfigError for anything but an http(s) URL
    budget = max_error_rate(getattr(values, "max_error_rate", DEFAULT_MAX_ERROR_RATE))
    baseline_run = getattr(values, "baseline_run", "") or None
    gates = resolve_gate_options(values)
    if gates.asked and not baseline_run:
        raise ConfigError(
            "gates, SLOs and --junit compare this run with a baseline run: give --baseline-run "
            "RUN_DIR (or run specload compare BASELINE RUN afterwards)",
            path="--max-regression"
            if gates.max_regression
            else "--slo"
            if gates.slo
            else "--junit",
        )
    if baseline_run:
        from specload.recorder.baseline_run import load_baseline

        load_baseline(baseline_run)  # ConfigError: not a run dir
    scenario_path = getattr(values, "scenario", "") or ""
    if not scenario_path:
        raise ConfigError("no scenario: give --scenario FILE", path="--scenario")
    from specload.scenario import load_scenario

    scenario = load_scenario(scenario_path, scenario_overrides(getattr(values, "scenario_set", "")))
    targets, replicate, later = _targets(getattr(values, "interleave_targets", ""))
    if targets:
        from specload.protocol.interleave import cells_of

        cells_of(scenario)  # ConfigError for a trace
    label = getattr(values, "label", "") or "run"
    if baseline_run and headless:
        _check_baseline(baseline_run, label, scenario)
    if gates.asked and scenario.steps:  # a gate that can check nothing: known from the steps
        from specload.analysis.decisions.gates import check_operating_qps

        check_operating_qps(list(scenario.steps), gates.operating_qps, "scenario")
    opts = RunOptions(
        scenario_path=os.path.abspath(scenario_path),
        label=label,
        run_dir=run_dir or os.path.join("runs", label),
        host=host,
        store_text=bool(getattr(values, "store_text", False)),
        speculative=speculative,
        prefix_caching={"on": True, "off": False}.get(getattr(values, "prefix_caching", "")),
        server_cmd=getattr(values, "server_cmd", "") or None,
        headless=headless,
        gpu_metrics_url=gpu_url,
        max_error_rate=budget,
        baseline_run=baseline_run,
        gates=gates,
        targets=targets,
        replicate=replicate,
        interleave_round=later,
    )
    return opts, scenario

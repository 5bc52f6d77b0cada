"""The simulator's command-line flags (vLLM's names), importable without the server.

Kept apart from ``main.py`` so that ``specload --help`` builds the ``sim`` sub-parser without
importing aiohttp, prometheus_client or the engine.
"""

from __future__ import annotations

import argparse

__all__ = ["DEFAULT_MODEL", "add_arguments"]

#: The model name the API answers to unless --served-model-name says otherwise.
DEFAULT_MODEL = "specload-sim"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The simulator's flags; the vLLM ones keep vLLM's names."""
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument(
        "--profile",
        default="h200-llama8b",
        help="engine profile: a bundled name (h200-llama8b, tiny) or a YAML path",
    )
    p.add_argument(
        "--profile-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one profile field, e.g. dynamic_step_overhead_s=0 (repeatable)",
    )
    p.add_argument(
        "--served-model-name",
        nargs="+",
        default=None,
        help="model name(s) the API answers to (default: specload-sim)",
    )
    p.add_argument("--model", default=None, help="accepted for vLLM compatibility; names the model")
    p.add_argument(
        "--speculative-config",
        default=None,
        help='vLLM JSON, e.g. \'{"method":"ngram","num_speculative_tokens":4}\'',
    )
    p.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=False)
    p.add_argument("--max-num-seqs", type=int, default=None)
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument(
        "--num-gpu-blocks-override",
        type=int,
        default=None,
        help="KV cache size in blocks (small values make the queue fill)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--ground-truth",
        action="store_true",
        help="keep per-request chunk write times at /debug/requests",
    )
    p.add_argument("--ground-truth-max", type=int, default=10_000)
    h = p.add_argument_group(
        "host speed for speculation (docs/simulator.md, 'Hosts and server starts')"
    )
    h.add_argument(
        "--spec-overhead-scale",
        type=float,
        default=1.0,
        metavar="S",
        help="scale speculation's CPU-launch-bound costs (draft passes' launch "
        "overheads, proposer and rejection-sampler fixed costs) as a slower (S > 1) "
        "or faster host would; baseline steps are unchanged. 1 (default) = the "
        "profile's calibration host; 1.68 reproduces the measured slow H200 host "
        "(host A: spec step 15-30%% slower, spec never helps)",
    )
    h.add_argument(
        "--start-jitter",
        nargs="?",
        const="calibrated",
        default=None,
        metavar="SIGMA|calibrated",
        help="let this server start draw its own host: a factor on speculation's "
        "launch-bound costs, lognormal with median 1 and SIGMA the sd of its log, "
        "and, with the profile's slow_window_prob (0.3), one slow window (15 s, "
        "those costs x2.4) starting in the first 120 s. Without a value, or "
        "'calibrated': the profile's calibrated sigma (0.3; from four H200 hosts). "
        "Default: off (every start is the same host, deterministic). The draw is "
        "logged at startup and served at GET /debug/host",
    )
    h.add_argument(
        "--start-seed",
        type=int,
        default=0,
        metavar="N",
        help="seed of the --start-jitter draws only (text and acceptance keep "
        "--seed): one seed is one reproducible host, so replicate N of a sweep can "
        "pass --start-seed N (default 0)",
    )
    r = p.add_argument_group("time regime of speculation (docs/simulator.md, 'Time regime')")
    r.add_argument(
        "--spec-regime",
        nargs="?",
        const="calibrated",
        default=None,
        metavar="calibrated|off|KEY=VALUE,...",
        help="fast and slow windows that alternate for the whole server life (exponential "
        "lengths), inside whose slow windows speculation's launch-bound costs are x factor, "
        "as measured on an H200 (spec step ~13 ms <-> ~20 ms in windows of a few seconds); "
        "baseline steps are unchanged. Without a value, or 'calibrated': the profile's "
        "calibrated regime; or change it with KEY=VALUE pairs, e.g. "
        "slow_share=0.4,mean_window_s=5,factor=1.5 (or mean_fast_s, mean_slow_s). "
        "Default: off. The windows are served at GET /debug/host",
    )
    r.add_argument(
        "--regime-seed",
        default=None,
        metavar="N",
        help="seed of the --spec-regime windows only (default: --start-seed, so "
        "replicates with different start seeds get different windows)",
    )
    g = p.add_argument_group("faults (also settable at runtime: POST /debug/faults)")
    g.add_argument("--fault-error-rate", type=float, default=0.0)
    g.add_argument("--fault-error-status", type=int, default=500)
    g.add_argument("--fault-429-rate", type=float, default=0.0)
    g.add_argument("--fault-stall-after", type=int, default=None, metavar="TOKENS")
    g.add_argument("--fault-stall-s", type=float, default=5.0)
    g.add_argument("--fault-drop-after", type=int, default=None, metavar="TOKENS")
    g.add_argument("--fault-malformed-after", type=int, default=None, metavar="TOKENS")
    g.add_argument("--fault-no-done", action="store_true")
    g.add_argument(
        "--fault-tokenize-reset-every",
        type=int,
        default=None,
        metavar="N",
        help="reset the connection of every N-th /tokenize request instead of answering",
    )
    g.add_argument(
        "--fault-metrics-delay-s",
        type=float,
        default=0.0,
        metavar="S",
        help="hold every /metrics answer S seconds (a scrape that hangs)",
    )
    g.add_argument(
        "--fault-metrics-status",
        type=int,
        default=None,
        metavar="CODE",
        help="answer /metrics with this HTTP status (4xx/5xx) instead of the metrics",
    )
    g.add_argument(
        "--fault-stream-rate",
        type=float,
        default=1.0,
        help="fraction of streams the stream faults apply to",
    )

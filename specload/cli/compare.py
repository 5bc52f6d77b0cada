"""``specload compare RUN_DIR... --out REPORT_DIR``: the crossover, its CI, and the reports.

Exit codes: 0 ok, including a gate whose point estimate lies beyond its limit but whose CI
does not (a "possible regression" line on stderr; ``--gate-on point`` fails it); 1 a
``--max-regression`` gate failed (at a step up to ``--operating-qps``: the change hurts and
its whole 95 % CI lies beyond the limit), or a condition has no complete step to compare; 2
bad input (a missing, empty or foreign run dir, a bad option, runs that are not comparable
without ``--force``, or a gate that would check nothing), always as one line on stderr.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from specload.core.gain import DEFAULT_MIN_GAIN
from specload.report.verdict_words import verdict_lines

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Any) -> None:
    from specload.core.budget import BUDGET_HELP, DEFAULT_MAX_ERROR_RATE
    from specload.options.gates import add_baseline_option, add_gate_options

    p = subparsers.add_parser(
        "compare",
        help="compare run directories: where speculative decoding stops helping, with CIs",
        description=(
            "Line runs up by condition (run.json label; same-label dirs are replicates: server "
            "starts, pooled with a hierarchical bootstrap) and by step (target QPS); per-step "
            "p50/p95/p99 with bootstrap 95%% CIs; one rule classifies every step as helps / hurts "
            "/ the same (CI within ±--min-gain) / undecided (with the time that would likely "
            "decide it), and the verdict, the "
            "boundaries where each condition starts and stops helping, the advice and the gates "
            "all follow it; attribution; output contract. Writes report.md, report.json and "
            "report.html to --out and prints a summary. Exit 0 ok (a possible regression "
            "within its CI included), 1 gate failed or nothing comparable, 2 bad input."
        ),
    )
    p.add_argument(
        "run_dirs",  # or folders of run dirs (a sweep's --out)
        nargs="+",
        metavar="RUN_DIR",
        help="run directories (one per condition or repeat), or folders holding them",
    )
    p.add_argument(
        "--out",
        default="reports/compare",
        metavar="REPORT_DIR",
        help="where to write report.md/.json/.html (default: %(default)s)",
    )
    add_baseline_option(p)
    p.add_argument(
        "--metric",
        default="tpot_p50",
        help="metric for the verdict and the crossover (default: %(default)s; "
        "e.g. tpot_p95, e2e_p50, ttft_p50)",
    )
    p.add_argument(
        "--min-gain",
        type=float,
        default=DEFAULT_MIN_GAIN,
        metavar="FRACTION",
        help="a step helps when the metric is at least this much lower and the 95%% CI of the "
        "change lies below 0; hurts, mirrored (default: %(default)s)",
    )
    p.add_argument(
        "--max-error-rate",
        type=float,
        default=None,
        metavar="FRACTION",
        help=f"{BUDGET_HELP} (default: the strictest budget the runs recorded, else "
        f"{DEFAULT_MAX_ERROR_RATE}): such a step keeps its figures in the tables but is left "
        "out of every conclusion",
    )
    add_gate_options(p)  # with --slo and --junit: specload/options/gates.py
    p.add_argument(
        "--force", action="store_true", help="compare runs even when they are not comparable"
    )
    p.add_argument(
        "--bootstrap",
        type=int,
        default=1000,
        metavar="N",
        help="bootstrap replicates (default: %(default)s)",
    )
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: %(default)s)")
    p.add_argument(
        "--max-num-seqs",
        type=int,
        default=1024,
        metavar="N",
        help="the server's max_num_seqs: where a proposed batch-size schedule's last range "
        "ends (default: %(default)s; see docs/dynamic-schedules.md)",
    )
    p.add_argument("--no-html", action="store_true", help="skip report.html (no plots; faster)")
    p.add_argument(
        "--quiet", action="store_true", help="print only the verdict and the report paths"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Compare; with ``--junit`` a JUnit file is written whatever the exit (an ``error``
    naming the cause when the input was bad, exit 2)."""
    from specload.core.errors import ConfigError
    from specload.report.junit import write_error_junit

    try:
        return _compare(args)
    except ConfigError as exc:
        if getattr(args, "junit", ""):
            write_error_junit(args.junit, str(exc))
        raise


def _compare(args: argparse.Namespace) -> int:
    from specload.analysis.compare import compare_runs
    from specload.analysis.schedules.batch_schedule import ScheduleOptions
    from specload.core.errors import ConfigError
    from specload.options.gates import resolve_gate_options
    from specload.report import write_report_files
    from specload.report.gate_words import gate_message, passed_lines
    from specload.report.junit import write_junit
    from specload.report.model import build_report
    from specload.report.terminal import render_terminal

    if args.bootstrap < 100:
        raise ConfigError(f"--bootstrap {args.bootstrap}: expected at least 100 replicates")
    gate_opts = resolve_gate_options(args)
    if args.max_error_rate is not None:
        from specload.core.budget import max_error_rate

        max_error_rate(args.max_error_rate)
    if args.max_num_seqs < 1:
        raise ConfigError(f"--max-num-seqs {args.max_num_seqs}: expected at least 1 request")
    _check_out_dir(args.out)
    comparison = compare_runs(
        args.run_dirs,
        baseline=args.baseline,
        metric=args.metric,
        min_gain=args.min_gain,
        operating_qps=gate_opts.operating_qps,
        force=args.force,
        gates=gate_opts.gates(),
        bootstrap=args.bootstrap,
        seed=args.seed,
        schedule=ScheduleOptions(max_num_seqs=args.max_num_seqs),
        max_error_rate=args.max_error_rate,
        slos=gate_opts.slos(),
    )
    report = build_report(comparison)
    paths = write_report_files(report, args.out, html=not args.no_html)
    if gate_opts.junit:
        paths["junit"] = write_junit(comparison, gate_opts.junit)
    if args.quiet:
        print("\n".join(verdict_lines(report.verdicts)))
    else:
        render_terminal(report)
    print("reports: " + ", ".join(str(p) for p in paths.values()))
    for line in passed_lines(comparison.gates) if comparison.gates else []:
        print(line, file=sys.stderr)  # a CI log shows what passed, and by how much
    for f in comparison.gates.possible if comparison.gates else []:
        print(gate_message(f), file=sys.stderr)  # "possible regression: ...": passes, said
    if report.exit_code:
        failures = comparison.gates.failures if comparison.gates else []
        for f in failures:
            print(f"gate failed: {gate_message(f)}", file=sys.stderr)
        for label in comparison.ratios:
            if comparison.crossover(label, comparison.metric) is None:
                print(f"nothing to compare: {report.verdicts[label]}", file=sys.stderr)
    return report.exit_code


def _check_out_dir(out: str) -> None:
    """Fail before the (possibly long) comparison when the reports could not be written."""
    import os
    from pathlib import Path

    from specload.core.errors import ConfigError

    p = Path(out)
    for existing in (p, *p.parents):
        if existing.exists() or existing.is_symlink():
            if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
                raise ConfigError(
                    f"{out!r} is not a writable directory ({existing} is in the "
                    "way; expected a folder for the reports)",
                    path="--out",
                )
            return

"""``specload sweep``: one run per server condition, each on a fresh server, then compare.

    specload sweep --server-cmd 'vllm serve MODEL --port {port}' \\
      --condition baseline= \\
      --condition spec='--speculative-config {"method":"ngram","num_speculative_tokens":4}' \\
      --condition prefix=--enable-prefix-caching \\
      --scenario scenarios/low-to-medium.yaml --out runs/sweep-1

Each condition's run lands in ``OUT/<name>/`` (with the server's log), the comparison in
``OUT/report/``. One server start is one sample, not a property of the config (the same
vLLM config on two H200 hosts gave opposite answers): ``--replicates N`` starts each
condition N times, interleaved (baseline, spec, baseline, spec, ...), into ``OUT/<name>-rK/``,
and the comparison's CIs then include the variance between starts. ``{replicate}`` in
``--server-cmd`` becomes the replicate number (e.g. a per-start seed).

``--refine crossover|capacity`` searches instead of running a fixed ladder only: after the
scenario's steps (a coarse ladder) it adds steps around the boundary, every condition at the
same new rates on fresh server starts, until the boundary's 95 % CI is narrower than
``--precision`` req/s or ``--budget-s`` server-seconds are spent; ``OUT/refine.json`` says
what each pass added. ``capacity`` refines the highest load within ``--slo`` (or the
scenario's ``slo:``).

``--url URL --label NAME`` measures a server someone else manages instead (one condition per
invocation; runs already in ``OUT`` are compared with it; running the same label again adds a
replicate). Say what that server runs with ``--speculative-config JSON|off`` and
``--prefix-caching on|off``; otherwise compare reads it from the server's /metrics where it
can, and calls it unknown where it cannot.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from specload.core.errors import ConfigError, TargetError
from specload.options.gates import add_baseline_option, add_slo_option
from specload.options.run import add_run_option, check_processes

if TYPE_CHECKING:  # imported where used, so that `specload --help` stays fast
    from specload.core.condition import Condition
    from specload.scenario import Scenario

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from specload.protocol.until_decided import DEFAULT_BUDGET_S, LOOKS

    p = subparsers.add_parser(
        "sweep",
        help="measure each server condition (baseline, speculative, prefix caching) and compare",
        description=(__doc__ or "").replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    target = p.add_argument_group("server (one of)")
    target.add_argument(
        "--server-cmd",
        metavar="CMD",
        help="command that starts the server; {port} is replaced by the port, "
        "each condition's flags are appended",
    )
    target.add_argument(
        "--url",
        action=_InOrder,
        default=[],
        metavar="URL|LABEL=URL",
        help="a server someone else manages (no start/stop); with --interleave give one "
        "LABEL=URL per condition",
    )
    p.add_argument(
        "--condition",
        action=_InOrder,
        default=[],
        metavar="NAME=FLAGS",
        help="a condition and its extra server flags, split like a shell does "
        "(repeatable; 'baseline=' for none)",
    )
    p.add_argument("--label", help="with --url: the condition's name (same as --condition NAME=)")
    add_baseline_option(p)
    p.add_argument(
        "--speculative-config",
        default="",
        metavar="JSON|off",
        help="with --url: declare the server's --speculative-config, or 'off' (for run.json)",
    )
    p.add_argument(
        "--prefix-caching",
        choices=["on", "off"],
        default="",
        help="with --url: declare whether the server has prefix caching on",
    )
    p.add_argument(
        "--replicates",
        type=int,
        default=None,
        metavar="N",
        help="fresh server starts per condition, interleaved across conditions (default: the "
        "scenario's 'replicates', else 1); 2 or more for a decision",
    )
    p.add_argument("--scenario", required=True, type=Path, help="scenario YAML")
    p.add_argument("--out", required=True, type=Path, help="sweep directory")
    p.add_argument("--port", type=int, help="server port (default: a free port per condition)")
    p.add_argument(
        "--health-timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="seconds to wait for the server's /health (default 600)",
    )
    # each run's options, as ``specload run`` defines them (options/run.py)
    add_run_option(p, "--store-text")
    add_run_option(p, "--processes", help_suffix=", for each run")
    # each run's error budget, as ``specload run`` and Locust define it (options/run.py)
    add_run_option(p, "--max-error-rate", help_suffix="; the sweep goes on, compares, and exits 1")
    add_run_option(p, "--skip-preflight", help_suffix="; here each server, before its runs")
    p.add_argument("--no-compare", action="store_true", help="skip the comparison at the end")
    p.add_argument(
        "--interleave",
        action="store_true",
        help="block-randomized A/B (the default for decisions on a GPU whose speed drifts): "
        "every condition's server up at once, each step's measured time cut into the "
        "scenario's interleave: {blocks, block_warmup_s, order} blocks (default 6 blocks, "
        "warm-up about one request, derived per block), each condition's block of a step "
        "next to the other's; order spread (default) shuffles those pairs over the session, "
        "grouped runs a step's pairs back to back (A B, B A, ...: less warm-up, more of the "
        "time measured); compare's intervals are then over blocks",
    )
    p.add_argument(
        "--until-decided",
        action="store_true",
        help="with --interleave: after the session's blocks, look at each step (helps, "
        "hurts, the same, or undecided) and add blocks where steps are undecided, as many "
        "as their time to decide asks (the report gives it), on the same servers, until every step "
        f"is decided, {LOOKS} looks are taken or --budget-s (default {DEFAULT_BUDGET_S:g}) is "
        f"spent; every interval is widened for the {LOOKS} looks (Bonferroni), so "
        "stopping when the data decide keeps the 95 %% promise (protocol/until_decided.py)",
    )
    search = p.add_argument_group("adaptive search (specload/protocol/refine.py)")
    search.add_argument(
        "--refine",
        choices=["crossover", "capacity"],
        help="after the scenario's steps, add steps around the boundary (the verdict "
        "metric's crossover, or each condition's capacity within the SLO) until its CI is "
        "narrower than --precision or the budget is spent",
    )
    search.add_argument(
        "--precision",
        type=float,
        default=1.0,
        metavar="QPS",
        help="stop refining once every boundary's 95 %% CI is narrower than this (req/s; "
        "default %(default)s)",
    )
    search.add_argument(
        "--budget-s",
        type=float,
        metavar="S",
        help="server-seconds the whole sweep may use (starts included); a pass (--refine) "
        "or round (--until-decided: wall seconds, every server sharing them) that would "
        f"overrun it is not started (default: no limit; --until-decided: {DEFAULT_BUDGET_S:g})",
    )
    search.add_argument(
        "--max-passes",
        type=int,
        default=8,
        metavar="N",
        help="at most N passes, the coarse ladder included (default %(default)s)",
    )
    add_slo_option(search, help_suffix="; --refine capacity searches for that highest load")
    p.set_defaults(func=run)


class _InOrder(argparse.Action):
    """``append``, and the condition's label in ``given``: the baseline is the first
    condition the user typed (``core.condition.choose_baseline``), whichever option named
    it, and argparse keeps no order across options."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
        getattr(namespace, self.dest).append(values)
        label, sep, _ = str(values).partition("=")
        if sep and "://" not in label:
            namespace.given = [*getattr(namespace, "given", []), label.strip()]


def _urls(args: argparse.Namespace) -> tuple[str | None, dict[str, str]]:
    """``--url``: one plain URL, or with --interleave one LABEL=URL per condition."""
    if not args.interleave:
        if len(args.url) > 1:
            raise ConfigError("give one --url (several need --interleave)", path="--url")
        return (args.url[0] if args.url else None), {}
    urls: dict[str, str] = {}
    for text in args.url:
        label, sep, url = text.partition("=")
        if not sep or not label or "://" in label:
            raise ConfigError(f"{text!r} (expected LABEL=URL with --interleave)", path="--url")
        if label in urls:
            raise ConfigError(f"label {label!r} given twice", path="--url")
        urls[label] = url
    return None, urls


def _conditions(args: argparse.Namespace, urls: dict[str, str]) -> list[Condition]:
    """The conditions named by --condition, --label and --url LABEL=URL, as declared."""
    from specload.core.condition import parse_condition

    if urls and args.server_cmd is not None:
        raise ConfigError("give --server-cmd or --url, not both", path="--url")
    texts = list(args.condition) + [f"{label}=" for label in urls if not _named(args, label)]
    if args.label:
        if args.url is None:
            raise ConfigError("--label names the condition of a --url server", path="--label")
        texts.append(f"{args.label}=")
    conditions = _in_given_order(
        [parse_condition(t, template=args.server_cmd) for t in texts], getattr(args, "given", [])
    )
    declared = args.speculative_config or args.prefix_caching
    flag = "--speculative-config" if args.speculative_config else "--prefix-caching"
    if urls and declared:
        raise ConfigError(
            "with several --url servers declare each one's flags with --condition "
            "LABEL=FLAGS (e.g. spec='--speculative-config {...}')",
            path=flag,
        )
    if args.url is not None or urls:
        return [_declared_url_condition(c, args) for c in conditions]
    if declared:
        raise ConfigError(
            "with --server-cmd each --condition's flags declare what its server runs", path=flag
        )
    return conditions


def _in_given_order(conditions: list[Condition], given: list[str]) -> list[Condition]:
    """The conditions in the order the user typed their labels (a label named by both
    ``--url`` and ``--condition`` counts where it was first typed)."""
    first = {label: i for i, label in reversed(list(enumerate(given)))}
    return sorted(conditions, key=lambda c: first.get(c.name, len(given)))


def _baseline(args: argparse.Namespace, conditions: list[Condition]) -> str:
    """Which condition every change is read against, decided before any traffic. A single
    ``--url`` condition joins the runs already in ``--out``, after them."""
    from specload.core.condition import choose_baseline

    managed = args.server_cmd is not None
    speculates = {c.name: c.runs_speculation(managed) for c in conditions}
    if len(conditions) == 1 and not args.interleave:
        speculates = {**_earlier_runs(args.out), **speculates}
    return choose_baseline(speculates, args.baseline)


def _earlier_runs(out: Path) -> dict[str, bool | None]:
    """Labels of the runs already in ``out`` (earliest first) and whether each speculated,
    as its run.json declares."""
    from specload.analysis.inputs.features import features_of
    from specload.protocol.sweep_compare import sweep_run_dirs
    from specload.recorder.run_json import peek_run_json

    metas = [m for m in map(peek_run_json, sweep_run_dirs(out)) if m is not None]
    metas.sort(key=lambda m: float(m.get("started_at") or 0.0))
    return {
        str(m.get("label")): features_of(m.get("condition"), []).spec_on
        for m in metas
        if m.get("label")
    }


def _check_urls(urls: list[str], skip_preflight: bool) -> None:
    for url in urls:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(
                f"{url!r} has no scheme (expected http://... or https://...)", path="--url"
            )
        if not skip_preflight:
            from specload.protocol.preflight import check_host_path

            check_host_path(url)


def _plan(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from specload.protocol.sweep_plan import SweepPlan

    args.url, urls = _urls(args)
    conditions = _conditions(args, urls)
    baseline = _baseline(args, conditions)
    if args.port is not None and not 0 < args.port < 65536:
        raise ConfigError(f"{args.port} is not a TCP port", path="--port")
    check_processes(args.processes)
    _check_urls([args.url] if args.url is not None else list(urls.values()), args.skip_preflight)
    from specload.core.budget import max_error_rate

    rate = max_error_rate(args.max_error_rate)
    scenario = _validate_scenario(args.scenario)
    _validate_refine(args, scenario)
    replicates = scenario.replicates if args.replicates is None else args.replicates
    _validate_out(args.out)
    plan = SweepPlan(
        scenario=args.scenario,
        out=args.out,
        conditions=conditions,
        server_cmd=args.server_cmd,
        url=args.url,
        port=args.port,
        health_timeout_s=args.health_timeout,
        store_text=args.store_text,
        processes=args.processes,
        run_args=("--max-error-rate", repr(rate)),
        skip_preflight=args.skip_preflight,
        replicates=replicates,
        interleave=args.interleave,
        urls=urls,
        baseline=baseline,
        until_decided=_until_decided(args, replicates),
    )
    if args.interleave:
        from specload.protocol.interleaved_sweep import check_interleave_plan

        if args.refine:
            raise ConfigError("not with --interleave (yet): refine after it", path="--refine")
        check_interleave_plan(plan)
    return plan


def _until_decided(args: argparse.Namespace, replicates: int):  # type: ignore[no-untyped-def]
    """``--until-decided``'s rule, or None; ConfigError where it cannot apply."""
    from specload.protocol.until_decided import UntilDecided

    if not args.until_decided:
        return None
    if not args.interleave:
        raise ConfigError(
            "needs --interleave (its blocks are what it adds to)", path="--until-decided"
        )
    if replicates != 1:
        raise ConfigError(
            f"adds blocks to one server start per condition; drop --replicates {replicates}",
            path="--until-decided",
        )
    if args.no_compare:
        raise ConfigError("it compares after each round; drop --no-compare", path="--until-decided")
    return UntilDecided() if args.budget_s is None else UntilDecided(budget_s=args.budget_s)


def _named(args: argparse.Namespace, label: str) -> bool:
    """A --url label that a --condition already names (its flags declare what it runs)."""
    return any(str(c).partition("=")[0] == label for c in args.condition)


def _declared_url_condition(cond: Condition, args: argparse.Namespace) -> Condition:
    """A --url condition declares only what --speculative-config / --prefix-caching say."""
    import dataclasses

    from specload.core.condition import declared_speculative

    spec, spec_declared = declared_speculative(args.speculative_config)
    if not spec_declared:  # the condition's own flags, if any
        spec, spec_declared = cond.speculative, "speculative" in cond.declared
    prefix = {"on": True, "off": False}.get(args.prefix_caching, cond.prefix_caching)
    declared = tuple(
        f for f, d in (("speculative", spec_declared), ("prefix_caching", prefix is not None)) if d
    )
    return dataclasses.replace(cond, speculative=spec, prefix_caching=prefix, declared=declared)


def _validate_refine(args: argparse.Namespace, scenario: Scenario) -> None:
    """--refine's options, checked before any server starts."""
    from specload.core.slo import parse_slo

    for spec in args.slo:
        parse_slo(spec)
    if args.budget_s is not None and not args.budget_s > 0:
        raise ConfigError(f"{args.budget_s} (expected server-seconds > 0)", path="--budget-s")
    if args.refine is None:
        if args.budget_s is not None and not args.until_decided:
            raise ConfigError(
                "applies to --refine and --until-decided (their budget)", path="--budget-s"
            )
        return
    if args.max_passes < 2:
        raise ConfigError(
            f"{args.max_passes} (expected 2 or more: the ladder, then a refining pass)",
            path="--max-passes",
        )
    if not args.precision > 0:
        raise ConfigError(f"{args.precision} (expected a CI width > 0, req/s)", path="--precision")
    if args.refine == "capacity" and not (args.slo or scenario.slo):
        raise ConfigError(
            "capacity needs an SLO: --slo METRIC=DURATION (e.g. tpot_p95=25ms) or slo: in "
            "the scenario",
            path="--refine",
        )
    if scenario.arrival == "trace":
        raise ConfigError(
            "not with arrival: trace (its steps are speedups of one recording; the search "
            "places QPS steps: use arrival poisson, constant or gamma)",
            path="--refine",
        )
    if args.refine == "crossover" and args.url is not None:
        raise ConfigError(
            "crossover needs every condition at the same new rates, and --url measures one; "
            "use --server-cmd, or --refine capacity (one condition at a time)",
            path="--refine",
        )
    if args.no_compare:
        raise ConfigError("--refine compares after each pass; drop --no-compare", path="--refine")


def _validate_scenario(path: Path) -> Scenario:
    """Fail on a bad scenario before any server starts (a vLLM start can take minutes)."""
    if not path.is_file():
        raise ConfigError("no such file", file=str(path), path="--scenario")
    from specload.scenario import load_scenario

    return load_scenario(path)


def _validate_out(out: Path) -> None:
    """The sweep directory must be creatable: a file in the way would fail after a server
    start (minutes with vLLM) as a traceback."""
    import os

    for existing in (out, *out.parents):
        if existing.exists():
            if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
                raise ConfigError(
                    f"{str(out)!r} is not a writable directory ({existing} is in the way)",
                    path="--out",
                )
            return


def run(args: argparse.Namespace) -> int:
    from specload.protocol.sweep import run_sweep
    from specload.protocol.sweep_compare import baseline_line, compare_sweep

    plan = _plan(args)
    print(baseline_line(plan))
    try:
        if plan.interleave:
            from specload.protocol.interleaved_sweep import describe, run_interleaved

            print(describe(plan))
            results = run_interleaved(plan)
        else:
            results = run_sweep(plan)
        if args.refine:
            results += _refine(plan, results, args)
    except TargetError as exc:
        _print_results(getattr(exc, "results", []))
        raise
    except KeyboardInterrupt as exc:
        _print_results(getattr(exc, "results", []))
        print(f"specload sweep: interrupted; runs so far are in {plan.out}", file=sys.stderr)
        return 130
    _print_results(results)
    failed = [r for r in results if r.status != "completed" or r.server_exit is not None]
    if args.no_compare:
        _print_degraded(results)
        return 1 if failed else 0
    compare_args = [a for spec in args.slo for a in ("--slo", spec)]
    code = compare_sweep(
        plan.out, [r.run_dir for r in results], compare_args=compare_args, baseline=plan.baseline
    )
    _print_degraded(results)
    return 1 if failed else code


def _refine(plan, results: list, args: argparse.Namespace) -> list:  # type: ignore[no-untyped-def, type-arg]
    """The adaptive search after the coarse ladder; its passes' runs."""
    from specload.core.slo import parse_slo
    from specload.protocol.refine import run_refinement, write_refine_json

    slos = [parse_slo(s) for s in args.slo] or None
    ref = run_refinement(
        plan, results, args.refine, args.precision, args.budget_s, slos, max_passes=args.max_passes
    )
    path = write_refine_json(plan.out, ref.passes, args.refine, args.precision, ref.stopped)
    total = sum(p.server_s for p in ref.passes)
    print(f"[refine] stopped: {ref.stopped}; {total:.0f} server-s in all ({path})")
    return ref.results


def _print_degraded(results: list) -> None:  # type: ignore[type-arg]
    """Degraded runs last on the terminal: their numbers are in the report, but incomplete."""
    from specload.protocol.sweep_compare import degraded_lines

    for line in degraded_lines(results):
        print(f"specload sweep: {line}", file=sys.stderr)


def _print_results(results: list) -> None:  # type: ignore[type-arg]
    for r in results:
        died = "" if r.server_exit is None else f"  (server died: exit {r.server_exit})"
        print(f"  {r.condition.name:<16} {r.status:<12} {r.run_dir}{died}")

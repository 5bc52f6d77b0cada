"""``specload demo``: the whole protocol against the embedded simulator, in minutes.

What ``make demo`` runs. A sweep over four conditions of ``specload sim`` with a calibrated
profile (baseline; speculative decoding with the calibration's draft-model settings; prefix
caching; both), each on three fresh server starts, interleaved (one start is one sample, not
a property of the config; the starts' requests pool into the interval that decides, about
these three starts, its 3-s steps being too short to cut into time slices, and three is the
fewest with an interval about this config beside it, ``stats.over_starts``), the demo scenario through Locust headless, then compare: the
one-sentence verdict on the terminal and the report in ``OUT/report/report.html``.

Each simulator start draws its own host, as real starts differ: a few percent on the
speculative step's launch-bound cost, and now and then a 15-second window where that step
runs slower (seen on an H200: one 20-s step 30 % apart between two starts of one config).
The report decides on the three starts' pooled CIs, shows the t interval over the starts
about the config beside them, and says where starts disagree (one helps, another hurts).

``--workload interleaved`` is the way to decide on a GPU whose speculative step drifts: the
baseline and draft-model speculation, both servers up at once, each step cut into blocks run
in a seeded balanced order (``sweep --interleave``), on simulators whose speculative step
flips between a fast and a slow regime in windows of seconds (``--spec-regime calibrated``,
fitted to an H200): the report shows the regime and the CIs are over blocks.

``--workload mixed`` runs the shipped mixed workload instead (code edits, summaries, short
questions, open-ended writing; ``scenarios/mixed-demo.yaml``) on the baseline and with n-gram
drafting, whose gain depends on the content: the report answers per class ("draft for `code`
requests only").
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
from pathlib import Path

from specload.core.errors import ConfigError

__all__ = [
    "DEFAULT_PROFILE",
    "DEMO_COMPARE_ARGS",
    "SPEC_CONFIGS",
    "add_parser",
    "chosen_conditions",
    "demo_conditions",
    "run",
]

DEFAULT_PROFILE = "h200-llama8b"

#: The speculative config each profile was calibrated with (the calibration table's spec
#: rows: a Llama-3.2-1B-shaped draft model, k=4, per-position acceptance 0.8/0.55/0.3/0.15,
#: mean acceptance length 2.8). Profiles not listed use the same settings.
SPEC_CONFIGS: dict[str, dict[str, object]] = {
    "h200-llama8b": {
        "method": "draft_model",
        "model": "llama-3.2-1b",
        "num_speculative_tokens": 4,
        "synthetic_acceptance_rates": [0.8, 0.55, 0.3, 0.15],
    },
}

#: ``--workload``: the four-condition protocol, or the mixed workload answered per class.
WORKLOADS = ("protocol", "interleaved", "mixed")
#: Each workload's scenario (under scenarios/).
SCENARIOS = {
    "protocol": "demo.yaml",
    "interleaved": "interleaved-demo.yaml",
    "mixed": "mixed-demo.yaml",
}
#: The interleaved demo's simulators: the calibrated time regime (the speculative step's
#: slow part flips between fast and slow windows; the baseline has none to flip).
REGIME_FLAGS = "--spec-regime calibrated --regime-seed {replicate}"
#: The n-gram (prompt lookup) drafting the mixed workload compares with the baseline.
NGRAM_CONFIG: dict[str, object] = {
    "method": "ngram",
    "num_speculative_tokens": 4,
    "prompt_lookup_max": 4,
    "prompt_lookup_min": 2,
}

#: ``specload compare`` options for the demo: "stops helping" = no longer faster at all.
DEMO_COMPARE_ARGS = ("--min-gain", "0")
#: Server starts per condition (interleaved: baseline, spec, prefix, both, baseline, ...):
#: the fewest with an interval about this config over starts beside the deciding one
#: (``stats.MIN_STARTS_FOR_CONFIG``).
DEMO_REPLICATES = 3
#: Per-start host draws (``specload sim --start-jitter``): starts on one host differ by a few
#: percent on speculation's launch-bound cost. No slow window: the profile's 15-s windows
#: (30 % of starts) put one start of three tens of percent off at the high steps, and three
#: short starts then decide nothing ("about 20 min more measurement"); they stay in the
#: simulator (``--start-jitter calibrated``) and in ``benchmarks/coverage.py``'s worlds, where
#: the intervals are measured against them. ``{seed}`` is ``--seed``: 0 gives start seeds
#: 1, 2, 3.
DEMO_HOST_FLAGS = (
    "--start-jitter 0.05 --start-seed {seed}0{{replicate}} --profile-set slow_window_prob=0"
)

_REPO = Path(__file__).resolve().parents[2]


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "demo",
        help="run the protocol (baseline, spec, prefix, both) against the simulator, minutes",
        description=(__doc__ or "").replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("runs/demo"),
        help="where the runs and the report go (default runs/demo; replaced)",
    )
    p.add_argument(
        "--profile",
        default=DEFAULT_PROFILE,
        help=f"simulator profile (default {DEFAULT_PROFILE}, calibrated)",
    )
    p.add_argument(
        "--workload",
        choices=WORKLOADS,
        default="protocol",
        help="protocol: baseline, spec, prefix and both on scenarios/demo.yaml (default); "
        "interleaved: baseline and spec on simulators whose speculative step flips regime "
        "in time, measured in interleaved blocks (sweep --interleave; "
        "scenarios/interleaved-demo.yaml); mixed: baseline and n-gram drafting on "
        "scenarios/mixed-demo.yaml (code edits, summaries, short questions, open-ended "
        "writing), answered per class",
    )
    p.add_argument(
        "--scenario",
        type=Path,
        default=None,
        help="scenario YAML (default scenarios/demo.yaml, or mixed-demo.yaml with --workload mixed)",
    )
    p.add_argument(
        "--replicates",
        type=int,
        default=DEMO_REPLICATES,
        metavar="N",
        help=f"server starts per condition, interleaved (default {DEMO_REPLICATES})",
    )
    p.add_argument(
        "--conditions",
        default=None,
        metavar="NAME,...",
        help="run only these of the workload's conditions (the baseline is always run), e.g. "
        "'spec' for baseline and spec only: half the time of the protocol's four",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="N",
        help="which simulated hosts the server starts draw (default 0); "
        "benchmarks/demo_decisions.py runs the demo over seeds",
    )
    p.add_argument(
        "--skip-preflight",
        action="store_true",
        help="do not check each simulator (model served, one streamed completion) first",
    )
    p.set_defaults(func=run)


def demo_conditions(profile: str, workload: str = "protocol") -> list:  # type: ignore[type-arg]
    """Baseline, spec, prefix and both, declared as the simulator is started for each; for
    the mixed workload, baseline and n-gram drafting (whose gain depends on the content)."""
    from specload.core.condition import parse_condition

    if workload == "mixed":
        ngram = shlex.join(
            ["--speculative-config", json.dumps(NGRAM_CONFIG, separators=(",", ":"))]
        )
        off = "--no-enable-prefix-caching"
        return [parse_condition(f"baseline={off}"), parse_condition(f"ngram={ngram} {off}")]

    spec = json.dumps(
        SPEC_CONFIGS.get(profile, SPEC_CONFIGS[DEFAULT_PROFILE]), separators=(",", ":")
    )
    spec_flags = shlex.join(["--speculative-config", spec])
    # Prefix caching is said explicitly both ways, as a real vLLM sweep must (vLLM V1 turns
    # it on by default), so each run.json records exactly what its server ran with.
    off, on = "--no-enable-prefix-caching", "--enable-prefix-caching"
    texts = [
        f"baseline={off}",
        f"spec={spec_flags} {off}",
        f"prefix={on}",
        f"both={spec_flags} {on}",
    ]
    if workload == "interleaved":
        texts = texts[:2]
    return [parse_condition(t) for t in texts]


def chosen_conditions(conditions: list, wanted: str | None) -> list:  # type: ignore[type-arg]
    """The baseline and the ``--conditions`` the user named, in the workload's order; a name
    the workload lacks is a ConfigError that lists the ones it has."""
    if not wanted:
        return conditions
    names = {n.strip() for n in wanted.split(",") if n.strip()}
    known = [c.name for c in conditions]
    unknown = sorted(names - set(known))
    if unknown:
        raise ConfigError(
            f"no condition {', '.join(map(repr, unknown))} in this workload; "
            f"expected names from {', '.join(known)}",
            path="--conditions",
        )
    if not names - {known[0]}:  # the baseline alone compares nothing
        raise ConfigError(
            f"name a condition besides the baseline, from {', '.join(known[1:])}",
            path="--conditions",
        )
    return [c for c in conditions if c.name == known[0] or c.name in names]


def _scenario_path(arg: Path | None, workload: str = "protocol") -> Path:
    if arg is not None:
        return arg
    relative = Path("scenarios") / SCENARIOS[workload]
    if relative.is_file():
        return relative
    if (_REPO / relative).is_file():
        return _REPO / relative
    raise ConfigError(
        f"{relative} not found (run from the repository, or give --scenario)",
        path="--scenario",
    )


def _clear_previous(out: Path, names: list[str]) -> None:
    """Remove the previous demo's runs and report in ``out``; nothing else is touched."""
    for name in [*names, "report"]:
        d = out / name
        if d.is_dir() and (
            (d / "run.json").exists() or (d / "server.log").exists() or name == "report"
        ):
            shutil.rmtree(d)


def run(args: argparse.Namespace) -> int:
    from specload.protocol.sweep import planned_runs, run_sweep
    from specload.protocol.sweep_compare import compare_sweep, degraded_lines
    from specload.protocol.sweep_plan import SweepPlan

    profile = _check_profile(args.profile)
    scenario = _scenario_path(args.scenario, args.workload)
    conditions = chosen_conditions(demo_conditions(profile, args.workload), args.conditions)
    interleave = args.workload == "interleaved"
    server_cmd = (
        f"{shlex.quote(sys.executable)} -m specload sim --host 127.0.0.1 "
        f"--port {{port}} --profile {shlex.quote(profile)} "
        + DEMO_HOST_FLAGS.format(seed=args.seed)
        + (f" {REGIME_FLAGS}" if interleave else "")
    )
    plan = SweepPlan(
        scenario=scenario,
        out=args.out,
        conditions=conditions,
        server_cmd=server_cmd,
        health_timeout_s=60.0,
        skip_preflight=args.skip_preflight,
        replicates=1 if interleave else args.replicates,
        interleave=interleave,
    )
    dirs = [d.name for _, _, d in planned_runs(plan)]
    _clear_previous(args.out, [*dirs, *(c.name for c in conditions)])
    how = (
        "one server each, up at once, blocks interleaved"
        if interleave
        else f"{args.replicates} server starts, interleaved"
    )
    print(
        f"specload demo: simulator profile {profile}, scenario {scenario}, "
        f"{len(conditions)} conditions x {how} -> {args.out}"
    )
    try:
        if interleave:
            from specload.protocol.interleaved_sweep import run_interleaved

            results = run_interleaved(plan)
        else:
            results = run_sweep(plan)
    except KeyboardInterrupt:
        print(f"specload demo: interrupted; partial runs are in {args.out}", file=sys.stderr)
        return 130
    bad = [r.condition.name for r in results if r.status not in ("completed", "degraded")]
    if bad:
        print(f"specload demo: runs did not complete: {', '.join(bad)}", file=sys.stderr)
        return 1
    # The calibration table's crossover is where the two TPOT curves cross (no minimum
    # gain); the demo states its crossover the same way so the two can be compared.
    code = compare_sweep(args.out, [r.run_dir for r in results], compare_args=DEMO_COMPARE_ARGS)
    degraded = degraded_lines(results)  # compared all the same, then named last
    for line in degraded:
        print(f"specload demo: {line}", file=sys.stderr)
    return 1 if degraded else code


def _check_profile(name: str) -> str:
    from specload.sim.profiles import list_profiles

    if name not in list_profiles() and not Path(name).is_file():
        raise ConfigError(
            f"no profile {name!r} (bundled: {', '.join(list_profiles())})", path="--profile"
        )
    return name

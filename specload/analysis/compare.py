"""``compare_runs``: run directories in, one ``Comparison`` (plain dataclasses) out.

Lines runs up by condition (run.json ``label``; several run dirs with one label are
replicates: separate server starts, pooled with a hierarchical bootstrap) and by step (target
QPS), then computes per-step statistics, ratios to the baseline with bootstrap CIs, one
classification per (condition, metric, step) by the rule of ``analysis.statistics.effect`` from which
everything else derives (crossovers, verdicts, p50/p95 flags, gates, advice), the four-way
attribution, the output contract, what the replicates disagree on, comparability and CI
gates. Nothing here formats output: ``specload.report`` turns a ``Comparison`` into a
``Report`` and renders it.

The baseline is the condition labelled ``baseline``, else ``baseline=`` when given, else the
first run's label (``core.condition.choose_baseline``: exit 2 when that reads two ways).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from specload.analysis.comparison import (
    CompareNote,
    CompareWarning,
    Comparison,
    ConditionInfo,
    ExecutionsDiffer,
    FeaturesContradicted,
    FellBehind,
    FewSuccesses,
    LoadBelowTarget,
    RepeatsPooled,
    ReplicatesPooled,
    ServerGapNote,
    ShortWarmup,
    SuspectTelemetry,
)
from specload.analysis.decisions.attribution import Attribution, attribute
from specload.analysis.decisions.capacity import (
    Capacity,
    capacity_change,
    capacity_gate,
    find_capacity,
    goodput,
)
from specload.analysis.decisions.classes import ClassAnswer, class_masks, restrict
from specload.analysis.decisions.closed_loop import closed_loop, has_closed_loop, ladder_only
from specload.analysis.decisions.crossover import Crossover, find_crossover
from specload.analysis.decisions.gates import CAPACITY_GATE, Gate, GateResult, evaluate_gates
from specload.analysis.decisions.replicates import (
    PerStart,
    disagreements,
    per_start_effects,
    per_start_steps,
)
from specload.analysis.diagnostics.decode_step import decode_steps
from specload.analysis.diagnostics.quality import (
    check_contract,
    contract_side,
    scenario_temperature,
)
from specload.analysis.diagnostics.regimes import find_regimes
from specload.analysis.diagnostics.samples import output_samples
from specload.analysis.inputs.comparable import differences, not_comparable_message
from specload.analysis.inputs.features import Features, OtherFeatures, features_of, role_of
from specload.analysis.inputs.run_columns import RunColumns, load_runs
from specload.analysis.inputs.server import server_gaps, server_steps
from specload.analysis.inputs.telemetry import TelemetrySuspect, read_telemetry, step_telemetry
from specload.analysis.schedules.batch_schedule import ScheduleOptions
from specload.analysis.schedules.dynamic import analyse_schedules
from specload.analysis.schedules.vllm_schedule_rules import is_dynamic
from specload.analysis.statistics.completeness import Incomplete, error_budget, incomplete_steps
from specload.analysis.statistics.ratios import Flag, RatioRow, p95_flags, step_ratios
from specload.analysis.statistics.stats import Estimate
from specload.analysis.statistics.steps import (
    MIN_TAIL_N,
    StepStats,
    condition_steps,
    looks_of,
    metric_names,
)
from specload.core.condition import choose_baseline
from specload.core.errors import ConfigError
from specload.core.gain import DEFAULT_MIN_GAIN, check_min_gain
from specload.core.records import fell_behind
from specload.core.slo import Slo, slos_from_scenario
from specload.metrics.host import host_differences

__all__ = [
    "CROSSOVER_METRICS",
    "compare_runs",
    "expand_run_dirs",
    "load_conditions",
]

#: Relative spread of per-execution p50 TPOT beyond which repeats are called out.
REPEAT_SPREAD = 0.05
#: Metrics whose crossover is always computed (the chosen ``metric`` is added).
CROSSOVER_METRICS = ("tpot_p50", "tpot_p95", "e2e_p50", "e2e_p95", "ttft_p50")


def expand_run_dirs(paths: list[str | Path]) -> list[Path]:
    """Each path as given, or, for a folder holding run dirs (a sweep's ``--out``), those.

    A folder without ``run.json`` whose direct subfolders have one stands for them (sorted);
    anything else is passed on as is, so the reader can say what is wrong with it.
    """
    out: list[Path] = []
    for p in map(Path, paths):
        inner = sorted(c.parent for c in p.glob("*/run.json")) if p.is_dir() else []
        out.extend(inner if inner and not (p / "run.json").exists() else [p])
    return list(dict.fromkeys(out))


def load_conditions(
    run_dirs: list[str | Path],
) -> tuple[dict[str, list[RunColumns]], list[RunColumns]]:
    """Load run dirs (see ``expand_run_dirs``) and group them by label, in first-seen order."""
    if not run_dirs:
        raise ConfigError("compare needs at least one RUN_DIR")
    runs = load_runs(list(expand_run_dirs(run_dirs)))
    groups: dict[str, list[RunColumns]] = {}
    for run in runs:
        groups.setdefault(run.label, []).append(run)
    return groups, runs


def _pick_baseline(infos: dict[str, ConditionInfo], baseline: str | None) -> str:
    """``core.condition.choose_baseline``'s rule over the runs, in the order given."""
    return choose_baseline({label: i.features.spec_on for label, i in infos.items()}, baseline)


def _lost(run: RunColumns, lost: dict[str, Any]) -> dict[str, Any]:
    """A lost worker placed in its step: its share of that step went unsent from its death
    until the master noticed (``at``) and re-split the load."""
    at = lost.get("at")
    step = next(
        (
            s
            for s in run.steps
            if isinstance(at, (int, float)) and s.get("start", math.inf) <= at < s.get("end", 0.0)
        ),
        None,
    )
    return {
        **lost,
        "run": run.path.name,
        "step": step.get("index") if step else None,
        "target_qps": step.get("target_qps") if step else None,
    }


def _features(runs: list[RunColumns]) -> Features:
    """The condition's features from its first run; other runs that differ are noted."""
    feats = [features_of(r.meta.condition, r.metrics) for r in runs]
    f = feats[0]
    for r, g in zip(runs[1:], feats[1:], strict=False):
        if (g.spec_on, g.prefix_caching) != (f.spec_on, f.prefix_caching):
            f.conflicts.append(OtherFeatures(r.path.name, runs[0].path.name))
    return f


def _info(label: str, runs: list[RunColumns]) -> ConditionInfo:
    f = _features(runs)
    return ConditionInfo(
        label=label,
        role=role_of(f),
        speculative=f.spec_config() or None,
        prefix_caching=f.prefix_caching,
        runs=[str(r.path) for r in runs],
        meta=runs[0].meta,
        lost_workers=[_lost(r, x) for r in runs for x in r.meta.lost_workers],
        features=f,
        statuses=[r.meta.status for r in runs],
    )


def _crossovers(
    label: str,
    base: str,
    rows: dict[str, list[RatioRow]],
    reps: dict[str, Any],
    metrics: list[str],
    min_gain: float,
) -> list[Crossover]:
    out = []
    for m in metrics:
        if not rows.get(m):
            continue
        x = find_crossover(
            m,
            label,
            base,
            [r.target_qps for r in rows[m]],
            [r.ratio for r in rows[m]],
            [r.effect for r in rows[m]],
            reps[m],
            min_gain,
        )
        if x is not None:
            out.append(x)
    return out


def _notes(
    groups: dict[str, list[RunColumns]], steps: dict[str, list[StepStats]]
) -> list[CompareNote]:
    notes: list[CompareNote] = []
    for label, runs in groups.items():
        if len(runs) > 1:
            notes.append(ReplicatesPooled(label, len(runs)))
        reps = [s.executions for s in steps[label] if s.executions > len(runs)]
        if reps:
            notes.append(RepeatsPooled(label, max(reps)))
        for r in runs:
            notes += [ServerGapNote(label, r.path.name, g) for g in server_gaps(r.metrics, r.steps)]
    return notes


def _client_warnings(
    steps: dict[str, list[StepStats]], starts: dict[str, list[PerStart]]
) -> list[CompareWarning]:
    out: list[CompareWarning] = []
    for label, rows in steps.items():
        for s in rows:
            # across server starts, ``disagreements`` judges (with CIs); here repeats in one;
            # interleaved blocks differ by design and their CI is over blocks already
            pooled = not starts.get(label) and not s.blocks
            spread = s.execution_p50.get("tpot") if pooled else None
            if spread and min(spread) > 0 and max(spread) / min(spread) - 1 > REPEAT_SPREAD:
                out.append(ExecutionsDiffer(label, s.target_qps, tuple(spread)))
            if s.n_ok < MIN_TAIL_N:
                out.append(FewSuccesses(label, s.target_qps, s.n_ok))
            if s.achieved_qps is not None and s.achieved_qps < 0.9 * s.target_qps:
                out.append(LoadBelowTarget(label, s.target_qps, s.achieved_qps))
            if fell_behind(s.late_share):
                qd = s.latency["queue_delay_p95"].value
                out.append(FellBehind(label, s.target_qps, s.late_share, qd))
    return out


def _warmup(run: RunColumns) -> tuple[float, str] | None:
    """The warm-up before each measured window of ``run`` and where it is set: per block in
    an interleaved run (``interleave.block_warmup_s``), per step otherwise."""
    inter = run.meta.interleave
    if isinstance(inter, dict) and "block_warmup_s" in inter:
        warm = inter["block_warmup_s"]  # null: derived per block from the cell's E2E
        return (float(warm), "interleave: block_warmup_s") if warm is not None else None
    sc = run.meta.scenario
    if isinstance(sc, dict) and isinstance(sc.get("warmup_s"), (int, float)):
        return float(sc["warmup_s"]), "warmup_s"
    return None


def _warmup_warnings(
    groups: dict[str, list[RunColumns]], steps: dict[str, list[StepStats]]
) -> list[ShortWarmup]:
    """A step whose warm-up is shorter than its requests: an open-loop batch fills for about
    one request's time (E2E) after the load starts, so a window measured sooner reads the
    step below its steady load (seen on the simulator at 20 req/s with 1-s block warm-ups and
    9-s requests: the per-second engine steps climbed through every block). One per
    condition, naming its steps."""
    out = []
    for label, rows in steps.items():
        found = {w for r in groups.get(label, []) if (w := _warmup(r)) is not None}
        if len(found) != 1:
            continue
        (warm, key), short = next(iter(found)), []
        for s in rows:
            e2e = s.latency["e2e_p50"].value
            if s.target_qps > 0 and e2e is not None and e2e > warm:
                short.append((s.target_qps, e2e))
        if short:
            out.append(ShortWarmup(label, warm, key, tuple(short)))
    return out


def _telemetry_warnings(groups: dict[str, list[RunColumns]]) -> list[SuspectTelemetry]:
    """Each step execution whose GPU throttled, whose load generator saturated its cores, or
    whose host's CPU was stolen (``analysis/inputs/telemetry.py``): its timings are suspect.
    One per execution and kind, with how many executions of that step had telemetry
    (``report/compare_words.py`` says each kind once per step, with that count)."""
    found: list[tuple[str, float, int, TelemetrySuspect]] = []
    executions: dict[tuple[str, float, int], int] = {}
    for label, rs in groups.items():
        for r in rs:
            lines = read_telemetry(r.path)
            if not lines:
                continue
            by_index = {int(s["index"]): s for s in r.steps if s.get("index") is not None}
            for index, st in sorted(step_telemetry(lines, r.steps).items()):
                step = by_index.get(index, {})
                n = int(step.get("concurrency") or 0)  # a closed-loop step: by its users
                where = (label, 0.0 if n else float(step.get("target_qps") or 0), n)
                executions[where] = executions.get(where, 0) + 1
                found += [(*where, x) for x in st.suspects()]
    return [SuspectTelemetry(lab, q, n, x, executions[(lab, q, n)]) for lab, q, n, x in found]


def _check_options(metric: str, min_gain: float, bootstrap: int) -> None:
    if metric not in metric_names():
        raise ConfigError(f"--metric {metric!r}: expected one of {', '.join(metric_names())}")
    check_min_gain(min_gain)
    if bootstrap < 1:
        raise ConfigError(f"--bootstrap {bootstrap}: expected a positive number of replicates")


def _all_steps(
    groups: dict[str, list[RunColumns]], bootstrap: int, seed: int
) -> dict[str, list[StepStats]]:
    """Client statistics per condition and step, with the server's figures attached."""
    steps: dict[str, list[StepStats]] = {}
    for label, rs in groups.items():
        steps[label] = condition_steps(label, rs, b=bootstrap, seed=seed)
        server = server_steps((r.metrics, r.steps) for r in rs)
        for s in steps[label]:
            s.server = server.get(s.target_qps)
    return steps


@dataclass(slots=True)
class _Against:
    """Everything measured against the baseline, per non-baseline condition."""

    ratios: dict[str, dict[str, list[RatioRow]]] = field(default_factory=dict)
    reps: dict[str, dict[str, Any]] = field(default_factory=dict)
    crossovers: list[Crossover] = field(default_factory=list)
    flags: list[Flag] = field(default_factory=list)
    #: condition -> target QPS left out -> why (either side incomplete)
    incomplete: dict[str, dict[float, Incomplete]] = field(default_factory=dict)


@dataclass(slots=True)
class _Inputs:
    """What ``_against`` reads: the pooled steps, each condition's incomplete steps, and each
    condition's server starts analysed alone (empty with one start)."""

    steps: dict[str, list[StepStats]]
    incomplete: dict[str, dict[float, Incomplete]]
    starts: dict[str, list[PerStart]]


def _against(inp: _Inputs, base: str, metric: str, min_gain: float) -> _Against:
    out = _Against()
    metrics = list(dict.fromkeys([metric, *CROSSOVER_METRICS]))
    for label, cond_steps in inp.steps.items():
        if label == base:
            continue
        left_out = {**inp.incomplete.get(base, {}), **inp.incomplete.get(label, {})}
        out.incomplete[label] = dict(sorted(left_out.items()))
        rows, out.reps[label] = step_ratios(
            cond_steps, inp.steps[base], min_gain, frozenset(left_out)
        )
        out.ratios[label] = rows
        crossovers = _crossovers(label, base, rows, out.reps[label], metrics, min_gain)
        achieved = {s.target_qps: s.achieved_qps for s in cond_steps}
        for x in crossovers:
            x.achieved = achieved
        if inp.starts.get(label) or inp.starts.get(base):
            for x in crossovers:
                x.starts = per_start_effects(
                    inp.starts.get(label) or [PerStart(label, cond_steps)],
                    inp.starts.get(base, []),
                    inp.steps[base],
                    x.metric,
                    min_gain,
                    frozenset(left_out),
                )
        out.crossovers += crossovers
        out.flags += p95_flags(rows)
    return out


def _capacity(
    c: Comparison, groups: dict[str, list[RunColumns]], slos: list[Slo] | None, gates: list[Gate]
) -> dict[str, Any]:
    """Capacity within the SLOs and goodput per condition, and the capacity gate if asked:
    the comparison's fields they fill, by name."""
    if slos is None:
        slos = slos_from_scenario(groups[c.baseline][0].meta.scenario.get("slo"))
    gate = next((g for g in gates if g.metric == CAPACITY_GATE), None)
    if gate is not None and not slos:
        raise ConfigError(
            "--max-regression capacity: needs an SLO (--slo METRIC=DURATION, or slo: in the "
            "scenario); the gate would check nothing"
        )
    if not slos:
        return {"slos": slos}
    capacity: dict[str, Capacity] = {}
    for label in groups:
        found = find_capacity(label, c.steps[label], slos, set(c.incomplete.get(label, {})))
        if found is not None:
            capacity[label] = found
    base = capacity.get(c.baseline)
    changes = {
        label: capacity_change(cap, base)
        for label, cap in capacity.items()
        if label != c.baseline and base is not None
    }
    return {
        "slos": slos,
        "capacity": capacity,
        "capacity_changes": changes,
        "goodput": {label: goodput(rs, slos) for label, rs in groups.items()},
        "gates": c.gates
        if gate is None
        else capacity_gate(gate, capacity, changes, c.baseline, c.gates),
    }


def _gates(
    gates: list[Gate] | None,
    vs: _Against,
    steps: dict[str, list[StepStats]],
    base: str,
    operating_qps: float | None,
    min_gain: float,
) -> GateResult | None:
    if not gates:
        return None
    step_gates = [g for g in gates if g.metric != CAPACITY_GATE]
    if not step_gates:  # the capacity gate only: checked once capacities are known
        return GateResult(gates=gates, operating_qps=operating_qps, min_gain=min_gain)
    result = evaluate_gates(
        step_gates,
        steps[base],
        {c: steps[c] for c in vs.ratios},
        vs.ratios,
        operating_qps,
        min_gain,
    )
    result.gates = gates
    return result


def compare_runs(
    run_dirs: list[str | Path],
    *,
    baseline: str | None = None,
    metric: str = "tpot_p50",
    min_gain: float = DEFAULT_MIN_GAIN,
    operating_qps: float | None = None,
    force: bool = False,
    gates: list[Gate] | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    schedule: ScheduleOptions | None = None,
    max_error_rate: float | None = None,
    slos: list[Slo] | None = None,
) -> Comparison:
    """Compare run directories; ConfigError (exit 2) on bad input or incomparable runs.

    ``metric`` drives the verdict (crossovers are computed for it and ``CROSSOVER_METRICS``);
    every step is classified by ``analysis.statistics.effect`` with ``min_gain``; ``gates`` apply to
    steps up to ``operating_qps`` req/s (all when None); ``schedule`` tunes the batch-size
    schedule proposal (``analysis.schedules``); ``max_error_rate`` overrides the error budget
    the runs recorded (steps over it are left out of every conclusion); ``slos`` (else the
    baseline scenario's ``slo:``) give each condition's capacity and goodput
    (``analysis.decisions.capacity``).
    """
    _check_options(metric, min_gain, bootstrap)
    groups, runs = load_conditions(run_dirs)
    closed_groups = groups if has_closed_loop(runs) else None
    if closed_groups is not None:  # the QPS ladder alone from here; closed loop at the end
        groups = {label: [ladder_only(r) for r in rs] for label, rs in groups.items()}
        runs = [r for rs in groups.values() for r in rs]
    diffs = differences(runs)
    if diffs and not force:
        raise ConfigError(not_comparable_message(runs))
    infos = {label: _info(label, rs) for label, rs in groups.items()}
    base = _pick_baseline(infos, baseline)
    steps = _all_steps(groups, bootstrap, seed)
    budget = error_budget(runs, max_error_rate)
    inputs = _Inputs(
        steps=steps,
        incomplete={
            label: incomplete_steps(steps[label], infos[label].lost_workers, budget)
            for label in groups
        },
        starts={label: per_start_steps(label, rs, bootstrap, seed) for label, rs in groups.items()},
    )
    vs = _against(inputs, base, metric, min_gain)
    temperature = scenario_temperature(groups[base][0].meta.scenario)
    base_side = contract_side(groups[base])
    contract = [
        check_contract(label, base, contract_side(rs), base_side, temperature)
        for label, rs in groups.items()
        if label != base
    ]
    comparison = Comparison(
        baseline=base,
        metric=metric,
        min_gain=min_gain,
        operating_qps=operating_qps,
        conditions=list(infos.values()),
        steps=steps,
        ratios=vs.ratios,
        crossovers=vs.crossovers,
        flags=vs.flags,
        attribution=_attribution(infos, base, vs.ratios, vs.reps, min_gain),
        contract=contract,
        differences=diffs,
        forced=bool(diffs),
        warnings=[
            *(w for rs in groups.values() for r in rs for w in r.warnings),
            *_client_warnings(steps, inputs.starts),
            *_warmup_warnings(groups, steps),
            *_telemetry_warnings(groups),
            *(
                FeaturesContradicted(c.label, x)
                for c in infos.values()
                for x in c.features.conflicts
            ),
        ],
        notes=_notes(groups, steps),
        gates=_gates(gates, vs, steps, base, operating_qps, min_gain),
        bootstrap=bootstrap,
        seed=seed,
        incomplete=vs.incomplete,
        disagreements=[d for label, st in inputs.starts.items() for d in disagreements(label, st)],
        max_error_rate=budget,
        host_differences=host_differences(
            [r.meta.to_dict() for r in runs], [f"{r.label}/{r.path.name}" for r in runs]
        ),
    )
    # Built in stages, never changed in place: each stage reads the one before it (the
    # classes and schedules read the whole comparison so far; report/verdict_words words it).
    comparison = replace(comparison, **_capacity(comparison, groups, slos, gates or []))
    classes = _class_answers(groups, inputs, comparison)
    loops = closed_loop(closed_groups, base, min_gain, bootstrap, seed) if closed_groups else []
    comparison = replace(comparison, classes=classes, closed_loop=loops)
    base_dirs = [r.path for r in groups[base]]
    samples = {
        label: found
        for label, rs in groups.items()
        if label != base and (found := output_samples(base_dirs, [r.path for r in rs]))
    }
    return replace(
        comparison,
        schedules=analyse_schedules(comparison, schedule),
        decode={
            label: decode_steps(rs, {s.target_qps: s.server for s in steps[label]})
            for label, rs in groups.items()
        },
        regimes=find_regimes(closed_groups or groups, base),
        time_splits=_time_splits(runs),
        looks=looks_of(runs),
        samples=samples,
    )


def _time_splits(runs: list[RunColumns]) -> dict[int, dict[str, float]]:
    """Each interleaved session's wall-time split, once per server start (its conditions'
    run dirs carry the same one)."""
    out: dict[int, dict[str, float]] = {}
    for r in runs:
        split = (r.meta.interleave or {}).get("time_split")
        if isinstance(split, dict):
            out.setdefault(r.meta.replicate or 1, split)
    return out


def _class_capacity(c: Comparison, steps: dict[str, list[StepStats]]) -> dict[str, Capacity]:
    """One class's capacity within the SLOs per condition (``find_capacity`` on its steps):
    a drafting pool for code carries a load of its own."""
    out: dict[str, Capacity] = {}
    for label, st in steps.items() if c.slos else ():
        found = find_capacity(label, st, c.slos, set(c.incomplete.get(label, {})))
        if found is not None:
            out[label] = found
    return out


def _class_answers(
    groups: dict[str, list[RunColumns]], inputs: _Inputs, c: Comparison
) -> list[ClassAnswer]:
    """The comparison per class (``analysis.decisions.classes``): every class's records through the
    same steps, ratios, rule and crossover; steps left out overall stay left out."""
    runs = [r for rs in groups.values() for r in rs]
    scenario = groups[c.baseline][0].meta.scenario
    kind, bounds, masks = class_masks(runs, tuple(scenario.get("class_bounds") or ()))
    out = []
    for name, per_run in masks.items():
        it = iter(per_run)
        sub = {label: [restrict(r, next(it)) for r in rs] for label, rs in groups.items()}
        if any(sum(r.n for r in rs) == 0 for rs in sub.values()):
            continue  # a class one condition never sent: nothing to compare
        steps = _all_steps(sub, c.bootstrap, c.seed)
        starts = {
            label: per_start_steps(label, rs, c.bootstrap, c.seed) for label, rs in sub.items()
        }
        vs = _against(_Inputs(steps, inputs.incomplete, starts), c.baseline, c.metric, c.min_gain)
        answer = ClassAnswer(
            name, kind, {label: sum(r.n for r in rs) for label, rs in sub.items()}, bounds
        )
        answer.ratios, answer.steps = vs.ratios, steps
        answer.capacity = _class_capacity(c, steps)
        answer.incomplete = vs.incomplete
        for label in vs.ratios:
            answer.crossovers[label] = {x.metric: x for x in vs.crossovers if x.condition == label}
        out.append(answer)
    return out


def _attribution(
    infos: dict[str, ConditionInfo],
    base: str,
    ratios: dict[str, dict[str, list[RatioRow]]],
    reps: dict[str, dict[str, Any]],
    min_gain: float,
) -> Attribution | None:
    """Attribution over the four roles, when the runs cover them (see ``attribution``)."""
    labels: dict[str, str] = {"baseline": base}
    for label, info in infos.items():
        # a batch-size schedule is not "the" spec-only condition
        dynamic = is_dynamic(info.features.spec_config() or None)
        if label != base and info.role not in ("baseline", "unknown") and not dynamic:
            labels.setdefault(info.role, label)
    both = labels.get("both")
    if both is not None:  # prefer the spec-only run with the same speculative config
        spec_cfg = infos[both].speculative
        for label, info in infos.items():
            if info.role == "spec" and info.speculative == spec_cfg:
                labels["spec"] = label
                break
    lookup: dict[str, dict[str, dict[float, tuple[Estimate, Any]]]] = {
        label: {
            m: {r.target_qps: (r.ratio, reps[label][m][:, i]) for i, r in enumerate(rows[m])}
            for m in ("ttft_p50", "tpot_p50")
        }
        for label, rows in ratios.items()
    }
    return attribute(labels, lookup, min_gain)

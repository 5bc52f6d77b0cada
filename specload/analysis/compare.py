"""``compare_runs``: run directories in, one ``Comparison`` (plain dataclasses) out.

Lines runs up by condition (run.json ``label``; several run dirs with one label are repeats
and are pooled) and by step (target QPS), then computes per-step statistics, ratios to the
baseline with bootstrap CIs, crossovers, p50/p95 flags, the four-way attribution, the output
contract, comparability and CI gates. Nothing here formats output: ``specload.report`` turns
a ``Comparison`` into a ``Report`` and renders it.

The baseline is ``baseline=`` when given, else the first run whose condition has no
speculative config and no prefix caching, else the first run's label.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specload.analysis.attribution import Attribution, attribute, role_of
from specload.analysis.comparable import differences
from specload.analysis.crossover import Crossover, find_crossover
from specload.analysis.decode_step import DecodeStep, decode_steps
from specload.analysis.dynamic import ScheduleAnalysis, analyse_schedules
from specload.analysis.gates import Gate, GateResult, evaluate_gates
from specload.analysis.load import RunData, load_runs
from specload.analysis.quality import (
    ContractCheck,
    check_contract,
    contract_side,
    scenario_temperature,
)
from specload.analysis.ratios import Flag, RatioRow, p95_flags, step_ratios
from specload.analysis.samples import OutputSample, output_samples
from specload.analysis.schedule import ScheduleOptions
from specload.analysis.server import server_steps
from specload.analysis.stats import Estimate
from specload.analysis.steps import StepStats, condition_steps, metric_names
from specload.analysis.verdict import sentence
from specload.analysis.vllm_schedule import is_dynamic
from specload.errors import ConfigError

__all__ = [
    "CROSSOVER_METRICS",
    "Comparison",
    "ConditionInfo",
    "compare_runs",
    "expand_run_dirs",
    "load_conditions",
]

#: Fewer successful requests than this in a step: its tail percentiles are called out.
MIN_TAIL_N = 40
#: Relative spread of per-execution p50 TPOT beyond which repeats are called out.
REPEAT_SPREAD = 0.05
#: Metrics whose crossover is always computed (the chosen ``metric`` is added).
CROSSOVER_METRICS = ("tpot_p50", "tpot_p95", "e2e_p50", "e2e_p95", "ttft_p50")


@dataclass(slots=True)
class ConditionInfo:
    """One condition: its label, role, declared settings and the run dirs pooled into it."""

    label: str
    role: str
    speculative: dict[str, Any] | None
    prefix_caching: bool | None
    runs: list[str]
    meta: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    #: run.json ``lost_workers`` of every run, each with ``run`` (dir name) and the ``step``
    #: index / ``target_qps`` of the step it was noticed in (None outside the steps).
    lost_workers: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class Comparison:
    """Everything compare found. ``steps``/``ratios`` are keyed by condition label."""

    baseline: str
    metric: str
    min_gain: float
    operating_qps: float | None
    conditions: list[ConditionInfo]
    steps: dict[str, list[StepStats]]
    ratios: dict[str, dict[str, list[RatioRow]]]
    crossovers: list[Crossover]
    flags: list[Flag]
    attribution: Attribution | None
    contract: list[ContractCheck]
    differences: list[str]
    forced: bool
    warnings: list[str]
    notes: list[str]
    verdicts: dict[str, str]
    gates: GateResult | None
    bootstrap: int
    seed: int
    #: Issue 12: crossovers in running-batch terms, schedule proposals, best-of-both checks.
    schedules: ScheduleAnalysis | None = None
    #: condition -> side-by-side output samples against the baseline (``--store-text`` runs)
    samples: dict[str, list[OutputSample]] = field(default_factory=dict)
    #: condition -> decode step time and client means per step (``analysis.decode_step``)
    decode: dict[str, list[DecodeStep]] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        """All conditions' sentences, one per line."""
        return "\n".join(self.verdicts.values()) or "only one condition: nothing to compare"

    def crossover(self, condition: str, metric: str) -> Crossover | None:
        return next(
            (x for x in self.crossovers if x.condition == condition and x.metric == metric), None
        )


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


def load_conditions(run_dirs: list[str | Path]) -> tuple[dict[str, list[RunData]], list[RunData]]:
    """Load run dirs (see ``expand_run_dirs``) and group them by label, in first-seen order."""
    if not run_dirs:
        raise ConfigError("compare needs at least one RUN_DIR")
    runs = load_runs(list(expand_run_dirs(run_dirs)))
    groups: dict[str, list[RunData]] = {}
    for run in runs:
        groups.setdefault(run.label, []).append(run)
    return groups, runs


def _pick_baseline(groups: dict[str, list[RunData]], baseline: str | None) -> str:
    if baseline is not None:
        if baseline not in groups:
            raise ConfigError(
                f"--baseline {baseline!r}: no run has that label (labels: {', '.join(groups)})"
            )
        return baseline
    for label, runs in groups.items():
        if role_of(runs[0].meta.get("condition")) == "baseline":
            return label
    return next(iter(groups))


def _lost(run: RunData, lost: dict[str, Any]) -> dict[str, Any]:
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


def _info(label: str, runs: list[RunData]) -> ConditionInfo:
    cond = runs[0].meta.get("condition") or {}
    return ConditionInfo(
        label=label,
        role=role_of(cond),
        speculative=cond.get("speculative"),
        prefix_caching=cond.get("prefix_caching"),
        runs=[str(r.path) for r in runs],
        meta=runs[0].meta,
        warnings=[w for r in runs for w in r.warnings],
        lost_workers=[_lost(r, x) for r in runs for x in r.meta.get("lost_workers") or []],
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
            reps[m],
            min_gain,
        )
        if x is not None:
            out.append(x)
    return out


def _notes(groups: dict[str, list[RunData]], steps: dict[str, list[StepStats]]) -> list[str]:
    notes = []
    for label, runs in groups.items():
        if len(runs) > 1:
            notes.append(
                f"{label}: {len(runs)} run directories are repeats of one condition; pooled"
            )
        reps = [s.executions for s in steps[label] if s.executions > len(runs)]
        if reps:
            notes.append(f"{label}: up to {max(reps)} executions per step (repeats) pooled")
    return notes


def _client_warnings(steps: dict[str, list[StepStats]]) -> list[str]:
    out = []
    for label, rows in steps.items():
        for s in rows:
            spread = s.execution_p50.get("tpot")
            if spread and min(spread) > 0 and max(spread) / min(spread) - 1 > REPEAT_SPREAD:
                out.append(
                    f"{label} at {s.target_qps:g} req/s: repeats disagree, p50 TPOT "
                    f"{min(spread) * 1000:.2f}–{max(spread) * 1000:.2f} ms across {len(spread)} "
                    "executions (pooled; check for drift between runs)"
                )
            if s.n_ok < MIN_TAIL_N:
                out.append(
                    f"{label} at {s.target_qps:g} req/s: only {s.n_ok} successful requests; "
                    "p95/p99 rest on the top few values (lengthen the step)"
                )
            qd = s.latency["queue_delay_p95"].value
            if s.achieved_qps is not None and s.achieved_qps < 0.9 * s.target_qps:
                out.append(
                    f"{label} at {s.target_qps:g} req/s: achieved only {s.achieved_qps:.3g} req/s"
                )
            if qd is not None and qd > 0.05:
                out.append(
                    f"{label} at {s.target_qps:g} req/s: the client fell behind "
                    f"(p95 queue delay {qd * 1000:.0f} ms; raise max_concurrency or workers)"
                )
    return out


def _check_options(metric: str, min_gain: float, bootstrap: int) -> None:
    if metric not in metric_names():
        raise ConfigError(f"--metric {metric!r}: expected one of {', '.join(metric_names())}")
    if math.isnan(min_gain) or not 0 <= min_gain < 1:
        raise ConfigError(f"--min-gain {min_gain}: expected a fraction in [0, 1), e.g. 0.05")
    if bootstrap < 1:
        raise ConfigError(f"--bootstrap {bootstrap}: expected a positive number of replicates")


def _all_steps(
    groups: dict[str, list[RunData]], bootstrap: int, seed: int
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


def _against(
    steps: dict[str, list[StepStats]], base: str, metric: str, min_gain: float
) -> _Against:
    out = _Against()
    metrics = list(dict.fromkeys([metric, *CROSSOVER_METRICS]))
    for label, cond_steps in steps.items():
        if label == base:
            continue
        rows, out.reps[label] = step_ratios(cond_steps, steps[base], min_gain)
        out.ratios[label] = rows
        out.crossovers += _crossovers(label, base, rows, out.reps[label], metrics, min_gain)
        out.flags += p95_flags(rows, min_gain)
    return out


def _verdicts(
    vs: _Against,
    steps: dict[str, list[StepStats]],
    base: str,
    metric: str,
    min_gain: float,
    contract: list[ContractCheck],
) -> dict[str, str]:
    verdicts = {}
    for label in vs.ratios:
        x = next((c for c in vs.crossovers if c.condition == label and c.metric == metric), None)
        issues = next(c.issues for c in contract if c.condition == label)
        verdicts[label] = sentence(x, vs.ratios[label], steps[label], steps[base], min_gain, issues)
    return verdicts


def _gates(
    gates: list[Gate] | None,
    vs: _Against,
    steps: dict[str, list[StepStats]],
    base: str,
    operating_qps: float | None,
) -> GateResult | None:
    if not gates:
        return None
    flat = {
        c: {m: {r.target_qps: r.ratio for r in rows} for m, rows in ms.items()}
        for c, ms in vs.ratios.items()
    }
    return evaluate_gates(gates, steps[base], {c: steps[c] for c in vs.ratios}, flat, operating_qps)


def compare_runs(
    run_dirs: list[str | Path],
    *,
    baseline: str | None = None,
    metric: str = "tpot_p50",
    min_gain: float = 0.05,
    operating_qps: float | None = None,
    force: bool = False,
    gates: list[Gate] | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    schedule: ScheduleOptions | None = None,
) -> Comparison:
    """Compare run directories; ConfigError (exit 2) on bad input or incomparable runs.

    ``metric`` drives the verdict (crossovers are computed for it and ``CROSSOVER_METRICS``);
    a step helps when the metric is at least ``min_gain`` (fraction) lower than the
    baseline's; ``gates`` apply to steps up to ``operating_qps`` req/s (all when None);
    ``schedule`` tunes the batch-size schedule proposal (``analysis.schedule``).
    """
    _check_options(metric, min_gain, bootstrap)
    groups, runs = load_conditions(run_dirs)
    diffs = differences(runs)
    if diffs and not force:
        raise ConfigError(
            "runs are not comparable (use --force to compare anyway): " + "; ".join(diffs)
        )
    base = _pick_baseline(groups, baseline)
    steps = _all_steps(groups, bootstrap, seed)
    vs = _against(steps, base, metric, min_gain)
    temperature = scenario_temperature(groups[base][0].meta.get("scenario"))
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
        conditions=[_info(label, rs) for label, rs in groups.items()],
        steps=steps,
        ratios=vs.ratios,
        crossovers=vs.crossovers,
        flags=vs.flags,
        attribution=_attribution(groups, base, vs.ratios, vs.reps, min_gain),
        contract=contract,
        differences=diffs,
        forced=bool(diffs),
        warnings=[
            *(w for rs in groups.values() for r in rs for w in r.warnings),
            *_client_warnings(steps),
        ],
        notes=_notes(groups, steps),
        verdicts=_verdicts(vs, steps, base, metric, min_gain, contract),
        gates=_gates(gates, vs, steps, base, operating_qps),
        bootstrap=bootstrap,
        seed=seed,
    )
    comparison.schedules = analyse_schedules(comparison, schedule)
    comparison.decode = {
        label: decode_steps(rs, {s.target_qps: s.server for s in steps[label]})
        for label, rs in groups.items()
    }
    base_dirs = [r.path for r in groups[base]]
    for label, rs in groups.items():
        if label != base and (found := output_samples(base_dirs, [r.path for r in rs])):
            comparison.samples[label] = found
    return comparison


def _attribution(
    groups: dict[str, list[RunData]],
    base: str,
    ratios: dict[str, dict[str, list[RatioRow]]],
    reps: dict[str, dict[str, Any]],
    min_gain: float,
) -> Attribution | None:
    """Attribution over the four roles, when the runs cover them (see ``attribution``)."""
    labels: dict[str, str] = {"baseline": base}
    roles = {label: role_of(rs[0].meta.get("condition")) for label, rs in groups.items()}
    for label, role in roles.items():
        # a batch-size schedule is not "the" spec-only condition (issue 12)
        dynamic = is_dynamic((groups[label][0].meta.get("condition") or {}).get("speculative"))
        if label != base and role != "baseline" and not dynamic:
            labels.setdefault(role, label)
    both = labels.get("both")
    if both is not None:  # prefer the spec-only run with the same speculative config
        spec_cfg = (groups[both][0].meta.get("condition") or {}).get("speculative")
        for label, role in roles.items():
            if (
                role == "spec"
                and (groups[label][0].meta.get("condition") or {}).get("speculative") == spec_cfg
            ):
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

"""``report.json``: every figure of the comparison, machine-readable, in SI units (seconds).

``crossover`` is keyed by condition, then metric, each entry holding ``metric, condition,
baseline, status`` (``always_helps|never_helps|crosses|starts_helping|helps_between|mixed``),
``stops_at`` / ``starts_at`` (``{qps, ci: [lo, hi], ci_beyond}``; a CI bound is null where the
data cannot bound it inside the tested range), ``steps`` (each step's ``effect``),
``replicate_statuses`` and ``decided`` (docs/report.md). ``rule`` states the one
classification rule every part uses. Bootstrap replicates are not written. ``schedules`` (docs/dynamic-schedules.md): ``batch_crossovers``,
``proposals`` (each with the ``speculative_config`` to paste) and ``best_of_both``.
``slo`` lists the latency SLOs (``[{metric, limit_s}]``, empty without any); ``capacity`` is
keyed by condition: ``{qps, beyond, ci, ci_beyond, status, limiting_slo, tested_range, steps,
per_slo, change}`` (``analysis/decisions/capacity.py``; ``change`` against the baseline's, with its CI);
each step carries ``goodput`` (req/s meeting every per-request SLO; null without SLOs).
``regimes`` is keyed by condition, then step label ("8 req/s", "concurrency 1"): whether the
engine step flips between a fast and a slow regime (``analysis/diagnostics/regimes.py``; its ``effect`` and
``telemetry``, and the per-second ``series``); ``regime_sentences`` says it in words.

``schema`` is ``JSON_SCHEMA``, defined beside the one reader of the file as data
(``report/report_json.py``, ``read_report``), so the two change together.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from specload.analysis.diagnostics.quality import ContractSide
from specload.analysis.diagnostics.regime_model import Regime
from specload.analysis.schedules.schedule_results import BestOfBoth, ScheduleAnalysis
from specload.analysis.statistics.ratios import RatioRow
from specload.analysis.statistics.steps import StepStats
from specload.report.attribution_words import attribution_lines
from specload.report.compare_words import (
    comparison_notes,
    comparison_warnings,
    difference_text,
    host_difference_text,
)
from specload.report.contract_words import contract_issues
from specload.report.crossover_words import crossover_dict
from specload.report.finding_words import disagreement_message, flag_message
from specload.report.gate_words import gate_message, skipped_text
from specload.report.model import Report
from specload.report.regime_words import regime_sentence, regime_sentences, regime_step
from specload.report.report_json import JSON_SCHEMA
from specload.report.rule_words import incomplete_text, rule_text
from specload.report.schedule_words import (
    best_of_both_verdict,
    proposal_error_text,
    proposal_note_text,
)
from specload.report.tables import lookup_overall
from specload.report.verdict_words import ci_note

__all__ = ["JSON_SCHEMA", "report_dict"]


def _step(s: StepStats, goodput: dict[float, float | None] | None) -> dict[str, Any]:
    return {
        "target_qps": s.target_qps,
        "n": s.n,
        "n_ok": s.n_ok,
        "executions": s.executions,
        "window_s": s.window_s,
        "achieved_qps": s.achieved_qps,
        "requests_per_s": s.requests_per_s,
        "error_rate": s.error_rate,
        "error_kinds": s.error_kinds,
        "latency_s": {k: v.to_dict() for k, v in s.latency.items()},
        "output_tok_s": s.output_tok_s,
        "tokens_per_chunk": s.tokens_per_chunk,
        "output_tokens_p50": s.output_tokens_p50,
        "late_share": s.late_share,
        "lookup_match_rate": s.lookup_match_rate,
        "lookup_n": s.lookup_n,
        "execution_p50_s": s.execution_p50,
        "server": asdict(s.server) if s.server is not None else None,
        "goodput": None if goodput is None else goodput.get(s.target_qps),
    }


def _side(s: ContractSide) -> dict[str, Any]:
    return {
        "n": s.n,
        "finish_reasons": s.finish_reasons,
        "output_tokens": s.output_tokens,
        "json_valid": s.json_valid,
        "tool_call_share": s.tool_call_share,
    }


def _contract(report: Report) -> list[dict[str, Any]]:
    out = []
    for chk in report.comparison.contract:
        side, base = _side(chk.side), _side(chk.base)
        out.append(
            {
                "condition": chk.condition,
                "baseline": chk.baseline,
                "passed": chk.passed,
                "issues": contract_issues(chk),
                "temperature": chk.temperature,
                "exact_match": chk.exact_match,
                "compared": chk.compared,
                "baseline_self_match": chk.baseline_self_match,
                "condition_figures": side,
                "baseline_figures": base,
            }
        )
    return out


def _attribution(report: Report) -> dict[str, Any] | None:
    att = report.comparison.attribution
    if att is None:
        return None
    return {
        "labels": att.labels,
        "summary": attribution_lines(att),
        "steps": [
            {
                "target_qps": s.target_qps,
                "ratios": {
                    f: {r: e.to_dict() for r, e in roles.items()} for f, roles in s.ratios.items()
                },
                "interaction": {f: e.to_dict() for f, e in s.interaction.items()},
                "adds_up": s.adds_up,
            }
            for s in att.steps
        ],
    }


def _gates(report: Report) -> dict[str, Any] | None:
    g = report.comparison.gates
    if g is None:
        return None
    return {
        "passed": g.passed,
        "checked": g.checked,
        "skipped": [skipped_text(s) for s in g.skipped],
        "operating_qps": g.operating_qps,
        "gates": [asdict(x) for x in g.gates],
        "failures": [{**asdict(f), "message": gate_message(f)} for f in g.failures],
        "possible_regressions": [{**asdict(f), "message": gate_message(f)} for f in g.possible],
    }


def _ratio(r: RatioRow) -> dict[str, Any]:
    """A ratio with its effect; an undecided one with its ``to_decide_s``; from three
    server starts, the interval about this config beside it (``config``: value, lo, hi and
    its effect, never deciding)."""
    out: dict[str, Any] = {**r.ratio.to_dict(), "effect": r.effect}
    if r.to_decide_s is not None:
        out["to_decide_s"] = r.to_decide_s
    if r.config_ratio is not None:
        out["config"] = {**r.config_ratio.to_dict(), "effect": r.config_effect}
    return out


def _ratios(ratios: dict[str, dict[str, list[RatioRow]]]) -> dict[str, Any]:
    return {
        label: {
            m: [{"target_qps": r.target_qps, **_ratio(r)} for r in rows] for m, rows in ms.items()
        }
        for label, ms in ratios.items()
    }


def _classes(report: Report) -> dict[str, Any]:
    """``classes``: per class, the top level's shapes (verdict, crossover, steps, ratios)."""
    return {
        a.name: {
            "kind": a.kind,
            "bounds": a.bounds,
            "n": a.n,
            "verdict": report.class_verdicts[a.name],
            "crossover": {
                label: {m: crossover_dict(x) for m, x in xs.items()}
                for label, xs in a.crossovers.items()
            },
            "steps": {label: [_step(s, None) for s in steps] for label, steps in a.steps.items()},
            "ratios": _ratios(a.ratios),
            "capacity": {label: cap.to_dict() for label, cap in a.capacity.items()},
        }
        for a in report.comparison.classes
    }


def _regime(r: Regime) -> dict[str, Any]:
    """One condition's regimes at one step: its figures, named, with their sentence."""
    figures = r.to_dict()
    named = {"condition": figures.pop("condition"), "step": regime_step(r.key)}
    return named | figures | {"sentence": regime_sentence(r)}


def _best_of_both(b: BestOfBoth) -> dict[str, Any]:
    """A best-of-both check's figures with its verdict in words, before its steps."""
    out = b.to_dict()
    steps = out.pop("steps")
    return out | {"verdict": best_of_both_verdict(b), "steps": steps}


def _schedules(s: ScheduleAnalysis) -> dict[str, Any]:
    """Batch crossovers, proposals (their notes and errors in words) and best-of-both checks."""
    return {
        "batch_crossovers": [b.to_dict() for b in s.batch_crossovers],
        "proposals": [
            p.to_dict()
            | {
                "notes": [proposal_note_text(n) for n in p.notes],
                "errors": [proposal_error_text(e) for e in p.errors],
            }
            for p in s.proposals
        ],
        "best_of_both": [_best_of_both(b) for b in s.best_of_both],
    }


def report_dict(report: Report) -> dict[str, Any]:
    """The whole report as JSON-ready data."""
    c = report.comparison
    crossover: dict[str, dict[str, Any]] = {}
    for x in c.crossovers:
        crossover.setdefault(x.condition, {})[x.metric] = crossover_dict(x)
    return {
        "schema": JSON_SCHEMA,
        "generated_at": report.generated_at,
        "specload_version": report.specload_version,
        "baseline": c.baseline,
        "metric": c.metric,
        "min_gain": c.min_gain,
        "operating_qps": c.operating_qps,
        "headline": report.headline,
        "verdict": report.verdicts,
        "exit_code": report.exit_code,
        "conditions": [
            {
                "label": i.label,
                "role": i.role,
                "speculative": i.speculative,
                "speculation_on": i.features.spec_on,
                "prefix_caching": i.prefix_caching,
                "features_source": i.features.source,
                "runs": i.runs,
                "server_starts": i.starts,
                "ci_scope": c.ci_scope(i.label),
                "ci_note": ci_note(c, i.label),
                "config_ci": "between_starts" if c.config_ci(i.label) else None,
                "target": i.meta.target,
                "status": i.meta.status,
                "scenario": i.meta.scenario,
                "lookup_method": i.meta.lookup_method,
                "lookup_match_rate": lookup_overall(c.steps.get(i.label, [])),
            }
            for i in c.conditions
        ],
        "steps": {
            label: [_step(s, c.goodput.get(label)) for s in steps]
            for label, steps in c.steps.items()
        },
        "slo": [s.to_dict() for s in c.slos],
        "capacity": {
            label: {
                **cap.to_dict(),
                "change": c.capacity_changes[label].to_dict()
                if label in c.capacity_changes
                else None,
            }
            for label, cap in c.capacity.items()
        },
        "decode_step": {label: [d.to_dict() for d in steps] for label, steps in c.decode.items()},
        "regimes": {
            label: {regime_step(key): _regime(r) for key, r in steps.items()}
            for label, steps in c.regimes.by_condition.items()
        },
        "time_split": {str(k): v for k, v in sorted(c.time_splits.items())},
        "regime_sentences": regime_sentences(c.regimes),
        "ratios": _ratios(c.ratios),
        "classes": _classes(report),
        "closed_loop": [
            {
                "concurrency": level.concurrency,
                "steps": {label: _step(s, None) for label, s in level.steps.items()},
                "ratios": {
                    label: {m: _ratio(r) for m, r in rows.items()}
                    for label, rows in level.ratios.items()
                },
                "lockstep_share": dict(level.lockstep),
            }
            for level in c.closed_loop
        ],
        "rule": rule_text("the latency", c.min_gain),
        "max_error_rate": c.max_error_rate,
        "incomplete": {
            label: [{"target_qps": q, "reason": incomplete_text(why)} for q, why in steps.items()]
            for label, steps in c.incomplete.items()
            if steps
        },
        "replicates_disagree": [
            {
                "condition": d.condition,
                "metric": d.metric,
                "target_qps": d.target_qps,
                "per_start": [{"run": run, **e.to_dict()} for run, e in d.figures],
                "message": disagreement_message(d),
            }
            for d in c.disagreements
        ],
        "crossover": crossover,
        "flags": [
            {
                "condition": f.condition,
                "family": f.family,
                "target_qps": f.target_qps,
                "p50_ratio": f.p50.to_dict(),
                "p95_ratio": f.p95.to_dict(),
                "message": flag_message(f),
            }
            for f in c.flags
        ],
        "attribution": _attribution(report),
        "contract": _contract(report),
        "comparability": {
            "differences": [difference_text(d) for d in c.differences],
            "forced": c.forced,
            "host_differences": [host_difference_text(d) for d in c.host_differences],
        },
        "gates": _gates(report),
        "findings": report.findings,
        "advice": [
            {"kind": a.kind, "condition": a.condition, "text": a.text, "figures": a.figures}
            for a in report.advice
        ],
        "warnings": comparison_warnings(c),
        "notes": comparison_notes(c),
        "bootstrap": {"replicates": c.bootstrap, "seed": c.seed, "ci_level": 0.95},
        "schedules": _schedules(c.schedules) if c.schedules is not None else None,
    }

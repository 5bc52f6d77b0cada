"""The comparison's warnings and notes in words: the one place that turns them into sentences.

``analysis/compare.py`` finds them as facts (``analysis.comparison.CompareWarning`` and
``CompareNote``: which condition, which step, the figures); the findings (``report/model.py``),
the runs section's notes (``report/sections.py``) and report.json's ``warnings`` and ``notes``
(``report/jsonout.py``) all read ``comparison_warnings`` and ``comparison_notes``, so the
terminal, report.md, report.html and report.json say the same. The run readers' warnings
(``analysis.inputs.run_columns.ReadWarning``: a line skipped, a run not completed, ...) are
among the comparison's and worded here too (``reader_text``). The closed-loop levels whose
users ran in lockstep (``ClosedLoop.in_lockstep``) are warned of here too, after the rest.
"""

from __future__ import annotations

import math

from specload.analysis.comparison import (
    CompareNote,
    CompareWarning,
    Comparison,
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
from specload.analysis.decisions.closed_loop import LOCKSTEP_S, ClosedLoop
from specload.analysis.inputs.comparable import (
    ConditionsDiffer,
    RunDifference,
    ValueDiffers,
    shown_value,
)
from specload.analysis.inputs.features import OtherFeatures, ServerSaysOtherwise
from specload.analysis.inputs.run_columns import (
    BadLine,
    NewerSchema,
    ReadWarning,
    RunNotCompleted,
    StepsUnreadable,
    Unrecorded,
)
from specload.analysis.inputs.server import ServerGap
from specload.analysis.inputs.telemetry import (
    CpuStolen,
    GpuThrottled,
    LoadgenSaturated,
    TelemetrySuspect,
)
from specload.core.records import behind_words
from specload.metrics.host import HostDifference
from specload.recorder.run_json import not_completed_text, unrecorded_text
from specload.report.wording import step_name

__all__ = [
    "comparison_notes",
    "comparison_warnings",
    "difference_text",
    "host_difference_text",
    "lockstep_warnings",
    "note_text",
    "reader_text",
    "server_gap_text",
    "suspect_text",
    "warning_text",
]


def comparison_warnings(c: Comparison) -> list[str]:
    """The comparison's warnings (the runs', the client's, the warm-up's, the telemetry's),
    then each closed-loop level's lockstep warnings: for the findings and report.json."""
    lines: list[str] = []
    telemetry: list[SuspectTelemetry] = []
    at = None  # where the telemetry's lines go: where its first fact was found
    for w in c.warnings:
        if isinstance(w, SuspectTelemetry):
            at = len(lines) if at is None else at
            telemetry.append(w)
        else:
            lines.append(warning_text(w))
    if at is not None:
        lines[at:at] = telemetry_lines(telemetry)
    return [*lines, *(w for level in c.closed_loop for w in lockstep_warnings(level))]


def comparison_notes(c: Comparison) -> list[str]:
    """The comparison's notes: what was pooled, which steps lack server figures."""
    return [note_text(n) for n in c.notes]


def _at(condition: str, target_qps: float) -> str:
    return f"{condition} at {target_qps:g} req/s"


def warning_text(w: CompareWarning) -> str:
    """One warning as a sentence (a telemetry fact alone: ``telemetry_lines`` joins the
    executions of a step that showed it)."""
    match w:
        case BadLine() | NewerSchema() | RunNotCompleted() | Unrecorded() | StepsUnreadable():
            return reader_text(w)
        case ExecutionsDiffer(condition=c, target_qps=q, tpot_p50_s=p50):
            return (
                f"{_at(c, q)}: executions differ, p50 TPOT {min(p50) * 1000:.2f}–"
                f"{max(p50) * 1000:.2f} ms across {len(p50)} step executions "
                "(pooled; check for drift)"
            )
        case FewSuccesses(condition=c, target_qps=q, n_ok=n):
            return (
                f"{_at(c, q)}: only {n} successful requests; p95/p99 rest on the top few "
                "values (lengthen the step)"
            )
        case LoadBelowTarget(condition=c, target_qps=q, achieved_qps=a):
            return f"{_at(c, q)}: achieved only {a:.3g} req/s"
        case FellBehind(condition=c, target_qps=q, late_share=late, queue_delay_p95_s=qd):
            return (
                f"{_at(c, q)}: the client fell behind ({behind_words(late, qd)}; raise "
                "max_concurrency or workers)"
            )
        case ShortWarmup():
            return _short_warmup_text(w)
        case SuspectTelemetry():
            return suspect_text(_where(w), w.suspect)
        case FeaturesContradicted():
            return features_contradicted_text(w)


#: A feature as run.json and vLLM's flags name it.
_FEATURE_NAMES = {"speculative": "speculative decoding", "prefix_caching": "prefix caching"}


def features_contradicted_text(w: FeaturesContradicted) -> str:
    """What contradicts a condition's features, and which view the report keeps."""
    match w.conflict:
        case ServerSaysOtherwise(feature=f, declared=declared):
            said, seen = ("on", "off") if declared else ("off", "on")
            return (
                f"{w.condition}: run.json declares {_FEATURE_NAMES[f]} {said}, but the server's "
                f"/metrics show it {seen}; the report keeps the declaration (check the server "
                "command)"
            )
        case OtherFeatures(run=run, first=first):
            return (
                f"{w.condition}: run {run} ran with other features (speculative decoding or "
                f"prefix caching) than {first}; the condition takes {first}'s"
            )


#: Why a line was skipped, after its file and number.
_LINE_FAULTS = {
    "not_json": "not valid JSON, skipped",
    "partial": "partial trailing line ignored (writer was interrupted?)",
}


def reader_text(w: ReadWarning) -> str:
    """What a run reader found wrong with a run directory, naming the file or the run. The
    run's status and its unrecorded requests read as ``recorder.read_run`` says them (the
    words are ``recorder.run_json``'s, for both readers)."""
    match w:
        case BadLine(path=path, line=n, fault=fault):
            return f"{path}: line {n}: {_LINE_FAULTS[fault]}"
        case NewerSchema(path=path, version=v, known=known):
            return f"{path}: schema_version {v} is newer than {known}; extra fields ignored"
        case RunNotCompleted(run=run, status=status):
            return not_completed_text(run, status)
        case Unrecorded(run=run, requests=n):
            return unrecorded_text(run, n)
        case StepsUnreadable(path=path, problem=problem):
            return f"{path}: {problem}; achieved QPS estimated from record times"


def _short_warmup_text(w: ShortWarmup) -> str:
    where = ", ".join(f"{q:g} req/s ({e:.1f} s)" for q, e in w.steps)
    need = math.ceil(max(e for _, e in w.steps))
    return (
        f"{w.condition}: the warm-up ({w.warmup_s:g} s) is shorter than a request (p50 E2E) "
        f"at {where}: measuring began while the batch was still filling, below the step's "
        f"steady load (lengthen {w.setting} to at least {need} s)"
    )


def _where(w: SuspectTelemetry) -> str:
    return f"{w.condition} at {step_name(w.target_qps, w.concurrency)}"


def suspect_text(where: str, x: TelemetrySuspect) -> str:
    """What in a step's telemetry makes its timings suspect, after ``where`` (the step)."""
    match x:
        case GpuThrottled(clock_events=events, sm_clock_mhz_min=lo, sm_clock_mhz_median=mid):
            return (
                f"{where}: GPU throttled ({', '.join(events)}; SM clock down to {lo:.0f} MHz "
                f"from {mid:.0f})"
            )
        case LoadgenSaturated(share=share, cores=cores):
            return (
                f"{where}: the load generator used {share:.0%} of its {cores} cores (its own "
                "lag is in the timings: add --processes or a bigger host)"
            )
        case CpuStolen(steal_pct=steal):
            return f"{where}: {steal:.0f} % of the host's CPU was stolen (steal)"


def telemetry_lines(facts: list[SuspectTelemetry]) -> list[str]:
    """One line per step and kind of suspect its telemetry showed, the first execution's
    figures, with how many of the step's executions showed it where it had more than one."""
    seen: dict[tuple[str, str], list[str]] = {}
    executions: dict[str, int] = {}
    for w in facts:
        where = _where(w)
        executions[where] = w.executions
        seen.setdefault((where, type(w.suspect).__name__), []).append(
            suspect_text(where, w.suspect)
        )
    out = []
    for (where, _), lines in seen.items():
        n = executions[where]
        out.append(lines[0] + (f" [in {len(lines)} of {n} executions]" if n > 1 else ""))
    return out


def difference_text(d: RunDifference) -> str:
    """What makes two runs not comparable, with their full paths: a forced report's record
    (its findings, report.json's ``comparability.differences``)."""
    match d:
        case ValueDiffers(run=run, label=label, first=first, first_label=first_label, key=key):
            return (
                f"{run} ({label}) vs {first} ({first_label}): {key} "
                f"{shown_value(key, d.value)} != {shown_value(key, d.first_value)}"
            )
        case ConditionsDiffer(run=run, first=first, label=label):
            return (
                f"{run} and {first} share label {label!r} but declare different "
                f"conditions ({d.condition!r} vs {d.first_condition!r})"
            )


def host_difference_text(d: HostDifference) -> str:
    """A field in which the runs' hosts (or server versions) differ, each value with its
    runs: a finding, and report.json's ``comparability.host_differences``."""
    values = " vs ".join(f"{v} ({', '.join(runs)})" for v, runs in d.values)
    return f"runs come from different {d.kind}: {d.field} {values}"


def server_gap_text(gap: ServerGap) -> str:
    """Why a step of a run lacks its server figures, or some of them."""
    where = f"the step at {gap.target_qps:g} req/s"
    if gap.restarted:
        return (
            f"the server restarted during {where} (its counters went back); "
            "that step's server counters are left out"
        )
    return f"server figures for {where} are incomplete: {gap.why}"


def note_text(n: CompareNote) -> str:
    """One note as a sentence."""
    match n:
        case ReplicatesPooled(condition=c, runs=runs):
            return (
                f"{c}: {runs} run directories are replicates (server starts) of one "
                "condition; pooled, with CIs that include the variance between starts"
            )
        case RepeatsPooled(condition=c, executions=k):
            return f"{c}: up to {k} executions per step (repeats within a server start) pooled"
        case ServerGapNote(condition=c, run=run, gap=gap):
            return f"{c} ({run}): {server_gap_text(gap)}"


def lockstep_warnings(level: ClosedLoop) -> list[str]:
    """One sentence per condition whose users ran in lockstep at this level."""
    return [
        f"{label} at {step_name(0.0, level.concurrency)}: {share:.0%} of sends came within "
        f"{LOCKSTEP_S * 1000:.0f} ms of another (users in lockstep): its TTFT there "
        f"measures bursts of {level.concurrency} simultaneous prefills"
        for label, share in level.in_lockstep.items()
    ]

"""The comparison model: ``ConditionInfo`` and ``Comparison``, what ``compare_runs`` returns.

The comparison's warnings and notes are facts (``CompareWarning``, ``CompareNote``: which
condition, which step, the figures); ``report/compare_words.py`` writes their sentences.

Plain dataclasses, apart from the code that fills them (``analysis/compare.py``) so that the
parts of the analysis that read a finished comparison (the dynamic-schedule checks,
``analysis/schedules/dynamic.py`` and ``analysis/schedules/batch_schedule.py``) and the report depend on the
model, not on compare, and compare depends on them: no import cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specload.analysis.decisions.attribution import Attribution
from specload.analysis.decisions.capacity import Capacity, CapacityChange
from specload.analysis.decisions.classes import ClassAnswer
from specload.analysis.decisions.closed_loop import ClosedLoop
from specload.analysis.decisions.crossover import Crossover
from specload.analysis.decisions.gates import GateResult
from specload.analysis.decisions.replicates import Disagreement
from specload.analysis.diagnostics.decode_step import DecodeStep
from specload.analysis.diagnostics.quality import ContractCheck
from specload.analysis.diagnostics.regime_model import Regimes
from specload.analysis.diagnostics.samples import OutputSample
from specload.analysis.inputs.comparable import RunDifference
from specload.analysis.inputs.features import FeatureConflict, Features
from specload.analysis.inputs.run_columns import ReadWarning
from specload.analysis.inputs.server import ServerGap
from specload.analysis.inputs.telemetry import TelemetrySuspect
from specload.analysis.schedules.schedule_results import ScheduleAnalysis
from specload.analysis.statistics.completeness import Incomplete
from specload.analysis.statistics.ratios import Flag, RatioRow
from specload.analysis.statistics.stats import MIN_STARTS_FOR_CONFIG
from specload.analysis.statistics.steps import StepStats
from specload.core.slo import Slo
from specload.metrics.host import HostDifference
from specload.recorder.rundir import RunMeta

__all__ = [
    "CompareNote",
    "CompareWarning",
    "Comparison",
    "ConditionInfo",
    "ExecutionsDiffer",
    "FeaturesContradicted",
    "FellBehind",
    "FewSuccesses",
    "LoadBelowTarget",
    "RepeatsPooled",
    "ReplicatesPooled",
    "ServerGapNote",
    "ShortWarmup",
    "SuspectTelemetry",
]


@dataclass(frozen=True, slots=True)
class ExecutionsDiffer:
    """Repeats of a step within one server start whose p50 TPOT differs by more than
    ``compare.REPEAT_SPREAD``: pooled all the same (check for drift)."""

    condition: str
    target_qps: float
    #: each execution's p50 TPOT (s)
    tpot_p50_s: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class FewSuccesses:
    """A step with fewer than ``steps.MIN_TAIL_N`` successful requests: its p95/p99 rest on
    the top few values."""

    condition: str
    target_qps: float
    n_ok: int


@dataclass(frozen=True, slots=True)
class LoadBelowTarget:
    """A step whose achieved load fell below 90 % of its target."""

    condition: str
    target_qps: float
    achieved_qps: float


@dataclass(frozen=True, slots=True)
class FellBehind:
    """A step where the client fell behind its schedule (``core.records.fell_behind``)."""

    condition: str
    target_qps: float
    late_share: float
    queue_delay_p95_s: float | None


@dataclass(frozen=True, slots=True)
class ShortWarmup:
    """A condition whose warm-up is shorter than a request (p50 E2E) at some steps: those
    windows were measured while the batch was still filling, below the step's steady load."""

    condition: str
    warmup_s: float
    #: the run.json setting that sets it (``warmup_s`` or ``interleave: block_warmup_s``)
    setting: str
    #: (target QPS, p50 E2E in s) of each step whose request outlasts the warm-up
    steps: tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True)
class SuspectTelemetry:
    """One step execution whose telemetry makes its timings suspect (a throttled GPU, a
    saturated load generator, stolen CPU), with how many executions that step had in all."""

    condition: str
    target_qps: float
    concurrency: int
    suspect: TelemetrySuspect
    #: executions of this condition's step that had telemetry
    executions: int


@dataclass(frozen=True, slots=True)
class FeaturesContradicted:
    """A condition whose features something contradicts (``Features.conflicts``): the server's
    /metrics against run.json's declaration, or one of its runs against its first run. The
    condition keeps its declaration (its first run's), so the report says so: a typo in a
    declaration would otherwise turn the advice silently wrong."""

    condition: str
    conflict: FeatureConflict


#: What the comparison warns of, in the order found (``report/compare_words.py`` words it):
#: the run readers' warnings (``analysis.inputs.run_columns.ReadWarning``), then its own.
CompareWarning = (
    ReadWarning
    | ExecutionsDiffer
    | FewSuccesses
    | LoadBelowTarget
    | FellBehind
    | ShortWarmup
    | SuspectTelemetry
    | FeaturesContradicted
)


@dataclass(frozen=True, slots=True)
class ReplicatesPooled:
    """Several run directories (server starts) of one condition, pooled."""

    condition: str
    runs: int


@dataclass(frozen=True, slots=True)
class RepeatsPooled:
    """Step executions repeated within a server start, pooled (the most at any step)."""

    condition: str
    executions: int


@dataclass(frozen=True, slots=True)
class ServerGapNote:
    """A step of one run (its directory's name) whose server figures are missing or
    incomplete."""

    condition: str
    run: str
    gap: ServerGap


#: What the comparison notes about how it pooled and what it lacks (``report/compare_words.py``).
CompareNote = ReplicatesPooled | RepeatsPooled | ServerGapNote


@dataclass(slots=True)
class ConditionInfo:
    """One condition: its label, role, declared settings and the run dirs pooled into it."""

    label: str
    role: str
    #: the speculative config when known (on/off/unknown: ``features.spec_on``)
    speculative: dict[str, Any] | None
    prefix_caching: bool | None
    runs: list[str]
    meta: RunMeta
    #: run.json ``lost_workers`` of every run, each with ``run`` (dir name) and the ``step``
    #: index / ``target_qps`` of the step it was noticed in (None outside the steps).
    lost_workers: list[dict[str, Any]] = field(default_factory=list)
    #: what the server had on and where that is known from (``analysis.inputs.features``)
    features: Features = field(default_factory=lambda: Features(None, None))

    #: run.json ``status`` of each run
    statuses: list[str] = field(default_factory=list)

    @property
    def starts(self) -> int:
        """Replicates: server starts (run dirs) pooled into this condition."""
        return len(self.runs)


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
    #: what makes the runs not comparable (kept when compared with ``force``)
    differences: list[RunDifference]
    forced: bool
    #: facts, worded by ``report/compare_words.py`` (with the closed-loop lockstep warnings)
    warnings: list[CompareWarning]
    notes: list[CompareNote]
    gates: GateResult | None
    bootstrap: int
    seed: int
    #: Dynamic schedules: crossovers in running-batch terms, schedule proposals, best-of-both checks.
    schedules: ScheduleAnalysis | None = None
    #: condition -> side-by-side output samples against the baseline (``--store-text`` runs)
    samples: dict[str, list[OutputSample]] = field(default_factory=dict)
    #: condition -> decode step time and client means per step (``analysis.diagnostics.decode_step``)
    decode: dict[str, list[DecodeStep]] = field(default_factory=dict)
    #: condition -> target QPS left out of every conclusion -> why (``analysis.statistics.completeness``)
    incomplete: dict[str, dict[float, Incomplete]] = field(default_factory=dict)
    #: steps where a condition's server starts disagree beyond their within-start CIs
    disagreements: list[Disagreement] = field(default_factory=list)
    #: the error budget the incomplete steps were judged by
    max_error_rate: float = 0.05
    #: fields in which the runs' hosts differ (run.json ``host``; ``specload.metrics.host``)
    host_differences: list[HostDifference] = field(default_factory=list)
    #: the latency SLOs capacity and goodput were judged by (``--slo`` or the scenario's)
    slos: list[Slo] = field(default_factory=list)
    #: condition -> its capacity within ``slos`` (``analysis.decisions.capacity``)
    capacity: dict[str, Capacity] = field(default_factory=dict)
    #: non-baseline condition -> its capacity against the baseline's (cond / base - 1)
    capacity_changes: dict[str, CapacityChange] = field(default_factory=dict)
    #: condition -> target QPS -> goodput (req/s meeting every per-request SLO)
    goodput: dict[str, dict[float, float | None]] = field(default_factory=dict)
    #: the comparison per class of request (``analysis.decisions.classes``), empty without classes
    classes: list[ClassAnswer] = field(default_factory=list)
    #: closed-loop ``{concurrency: N}`` steps, compared level by level (``analysis.decisions.closed_loop``)
    closed_loop: list[ClosedLoop] = field(default_factory=list)
    #: per condition and step: whether the engine step flips between a fast and a slow
    #: regime in time, its effect and likely cause (``analysis.diagnostics.regimes``)
    regimes: Regimes = field(default_factory=Regimes)
    #: each interleaved session's wall time by phase (run.json ``interleave.time_split``),
    #: by server start (``replicate``); empty outside ``sweep --interleave``
    time_splits: dict[int, dict[str, float]] = field(default_factory=dict)
    #: looks at the data its sweep planned (``sweep --until-decided``; 1 otherwise): every
    #: interval is widened for them (``stats.for_looks``)
    looks: int = 1

    def starts_per_step(self, label: str) -> int:
        """The fewest server starts (run dirs) behind any of ``label``'s steps: what its CIs
        cover. Runs of different ladders (``sweep --refine`` passes) add steps, not starts."""
        return min((s.runs for s in self.steps.get(label, [])), default=1)

    def blocks_per_step(self, label: str) -> int:
        """The fewest interleaved blocks behind any of ``label``'s steps (0: not interleaved)."""
        return min((s.blocks for s in self.steps.get(label, [])), default=0)

    def slices_per_step(self, label: str) -> int:
        """The fewest time slices behind any of ``label``'s steps (0: some step not cut)."""
        return min((s.slices for s in self.steps.get(label, [])), default=0)

    def starts(self, label: str) -> int:
        """The server starts the CIs of ``label`` vs the baseline are about: both sides'
        fewest at any step."""
        return min(self.starts_per_step(label), self.starts_per_step(self.baseline))

    def config_ci(self, label: str) -> bool:
        """Whether ``label`` vs the baseline has, beside the deciding interval, one about
        this config over the starts (``stats.MIN_STARTS_FOR_CONFIG`` or more on both sides
        at every step; ``RatioRow.config_ratio``)."""
        return self.starts(label) >= MIN_STARTS_FOR_CONFIG

    def ci_scope(self, label: str) -> str:
        """What the deciding CIs of ``label`` vs the baseline are about (report.json's
        ``ci_scope``): ``these_starts`` (two or more server starts, their units pooled), or
        one start: ``blocks_within_start`` (interleaved blocks), ``slices_within_start``
        (time slices of a contiguous run) or ``within_start`` (its requests: steps too short
        to cut). The interval about this config, from three starts, is ``config_ci``."""
        if not self.single_start(label):
            return "these_starts"
        if self.units_per_step(label)[0] == "requests":
            return "within_start"
        return "blocks_within_start" if self.blocks_per_step(label) else "slices_within_start"

    def units_per_step(self, label: str) -> tuple[str, int]:
        """What the deciding CIs of ``label`` vs the baseline are over and how many per step
        (both sides' fewest, every start's units counted): ``("blocks", n)`` with two or more interleaved
        blocks, else ``("slices", n)`` with time slices, else ``("requests", 0)``."""
        blocks = min(self.blocks_per_step(label), self.blocks_per_step(self.baseline))
        if blocks >= 2:
            return "blocks", blocks
        slices = min(self.slices_per_step(label), self.slices_per_step(self.baseline))
        return ("slices", slices) if slices else ("requests", 0)

    def single_start(self, label: str) -> bool:
        """True when the CIs of ``label`` vs the baseline cover one server start only (at
        some step)."""
        return min(self.starts_per_step(label), self.starts_per_step(self.baseline)) < 2

    def crossover(self, condition: str, metric: str) -> Crossover | None:
        return next(
            (x for x in self.crossovers if x.condition == condition and x.metric == metric), None
        )

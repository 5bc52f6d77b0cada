"""What dynamic speculation schedules add to a comparison, as data (no analysis here).

The results of ``analysis/schedules/batch_schedule.py`` (each crossover as a running batch, a proposed
``num_speculative_tokens_per_batch_size`` per speculative condition) and of
``analysis/schedules/dynamic.py`` (the best-of-both check of a condition that ran a schedule), gathered
in ``ScheduleAnalysis``, which ``Comparison`` carries. Kept apart from the code that computes
them so that the comparison model depends on data only. That code reads a comparison through
``ComparisonView``, the part of ``Comparison`` it needs, so that this room sits below the model
that carries its results.

Facts only: a proposal's notes and errors and a best-of-both check's outcome are dataclasses
and figures, which ``report/schedule_words.py`` words for every output.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from specload.analysis.schedules.vllm_schedule_rules import SCHEDULE_KEY, RuleError
from specload.analysis.statistics.stats import Estimate

if TYPE_CHECKING:
    from specload.analysis.decisions.crossover import Crossover
    from specload.analysis.statistics.ratios import RatioRow
    from specload.analysis.statistics.steps import StepStats

__all__ = [
    "BETTER",
    "COSTS",
    "DELIVERED",
    "NONE",
    "BatchCrossover",
    "BatchFromClient",
    "BestOfBoth",
    "BestOfBothRow",
    "ComparisonView",
    "ConditionView",
    "HelpsApart",
    "HelpsAtTop",
    "KeptBelow",
    "NeverHelped",
    "NoPositionKept",
    "NoRunningBatch",
    "NoSpeculativeTokens",
    "NothingDecided",
    "PositionsDropped",
    "ProposalError",
    "ScatteredHelp",
    "ScheduleAnalysis",
    "ScheduleNote",
    "ScheduleProposal",
    "StartsDisagree",
    "ThinMargin",
]


class ConditionView(Protocol):
    """A compared condition as the schedules read it (``comparison.ConditionInfo`` is one)."""

    @property
    def label(self) -> str: ...
    @property
    def speculative(self) -> dict[str, Any] | None: ...
    @property
    def prefix_caching(self) -> bool | None: ...


class ComparisonView(Protocol):
    """A comparison as the schedules read it (``comparison.Comparison`` is one)."""

    @property
    def baseline(self) -> str: ...
    @property
    def metric(self) -> str: ...
    @property
    def min_gain(self) -> float: ...
    @property
    def conditions(self) -> Sequence[ConditionView]: ...
    @property
    def steps(self) -> Mapping[str, list[StepStats]]: ...
    @property
    def ratios(self) -> Mapping[str, Mapping[str, list[RatioRow]]]: ...
    @property
    def crossovers(self) -> Sequence[Crossover]: ...
    def crossover(self, condition: str, metric: str) -> Crossover | None: ...


#: best-of-both statuses and per-step verdicts
DELIVERED, COSTS, BETTER, NONE = "delivered", "costs", "better", "n/a"


@dataclass(slots=True)
class BatchCrossover:
    """A crossover also in running-batch terms (requests running at the crossover load)."""

    condition: str
    metric: str
    status: str
    qps: float | None
    qps_ci: tuple[float | None, float | None]
    running: float | None
    running_ci: tuple[float | None, float | None]
    source: str  # "server" (vllm:num_requests_running), "client" (Little's law) or ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "condition": self.condition,
            "metric": self.metric,
            "status": self.status,
            "qps": self.qps,
            "qps_ci": list(self.qps_ci),
            "running": self.running,
            "running_ci": list(self.running_ci),
            "source": self.source,
        }


# -- a proposal's notes: what shaped its ranges (report/schedule_words.py words them) ------


@dataclass(frozen=True, slots=True)
class NeverHelped:
    """Speculation helped at no tested load: k = 0 everywhere."""


@dataclass(frozen=True, slots=True)
class HelpsApart:
    """Speculation helps at ``helping`` (req/s) only, not (or it hurts) at loads below or
    between: no k-by-batch range expresses it, so k = 0 everywhere."""

    helping: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class KeptBelow:
    """No help shown at the lowest step (``lowest`` req/s) but at ``helping``: k is kept
    below, where it was not shown to help."""

    lowest: float
    helping: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class HelpsAtTop:
    """Still helps at the highest tested load (``highest`` req/s): no k = 0 range."""

    highest: float


@dataclass(frozen=True, slots=True)
class ThinMargin:
    """The gain fell below ``gain_share`` of its best from ``from_qps`` (batch > ``batch``):
    positions accepted less than ``acceptance`` of the time dropped there (``k`` left)."""

    gain_share: float
    from_qps: float
    batch: int
    acceptance: float
    k: int


@dataclass(frozen=True, slots=True)
class PositionsDropped:
    """Draft positions ``first``..``last`` (1-based) accepted less than ``min_acceptance``
    of the time: dropped everywhere (``k`` left)."""

    first: int
    last: int
    min_acceptance: float
    k: int


@dataclass(frozen=True, slots=True)
class NoPositionKept:
    """No draft position is accepted often enough to keep."""


@dataclass(frozen=True, slots=True)
class BatchFromClient:
    """No ``vllm:num_requests_running``: batch sizes from the client's figures (Little's law)."""


ScheduleNote = (
    NeverHelped | HelpsApart | KeptBelow | HelpsAtTop | ThinMargin | PositionsDropped
    | NoPositionKept | BatchFromClient
)  # fmt: skip


# -- why no schedule was proposed -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NoSpeculativeTokens:
    """The config has no ``num_speculative_tokens`` >= 1 to schedule."""


@dataclass(frozen=True, slots=True)
class StartsDisagree:
    """The server starts disagree on where speculation helps."""


@dataclass(frozen=True, slots=True)
class NothingDecided:
    """No step is decided where speculation would be scheduled; ``undecided`` (req/s)."""

    undecided: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class ScatteredHelp:
    """Speculation helps at ``helping`` (req/s) only, with loads between where it does not."""

    helping: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class NoRunningBatch:
    """The crossover cannot be placed in batch terms: no running-batch figures there."""


#: why a proposal has no schedule: its own reasons, or vLLM's rules refusing the result
ProposalError = (
    NoSpeculativeTokens | StartsDisagree | NothingDecided | ScatteredHelp | NoRunningBatch
    | RuleError
)  # fmt: skip


@dataclass(slots=True)
class ScheduleProposal:
    """The proposed schedule for one speculative condition, ready to paste."""

    condition: str
    baseline: str
    metric: str
    status: str
    k_max: int
    ranges: list[list[int]]
    config: dict[str, Any]
    batch: BatchCrossover
    acceptance: list[float] = field(default_factory=list)
    notes: list[ScheduleNote] = field(default_factory=list)
    errors: list[ProposalError] = field(default_factory=list)

    def config_json(self) -> str:
        """The ``--speculative-config`` value, compact JSON (keys in the run's order)."""
        return json.dumps(self.config, separators=(",", ":"))

    def flag(self) -> str:
        return f"--speculative-config '{self.config_json()}'"

    def to_dict(self) -> dict[str, Any]:
        """The figures; its notes and errors are facts, worded by ``report/jsonout.py``."""
        return {
            "condition": self.condition,
            "baseline": self.baseline,
            "metric": self.metric,
            "status": self.status,
            "k_max": self.k_max,
            SCHEDULE_KEY: self.ranges,
            "speculative_config": self.config,
            "flag": self.flag(),
            "batch_crossover": self.batch.to_dict(),
            "acceptance_per_position": self.acceptance,
        }


@dataclass(slots=True)
class BestOfBothRow:
    """One step: the dynamic condition against the better fixed condition (seconds)."""

    target_qps: float
    dynamic: Estimate
    best: Estimate
    best_of: str
    ratio: Estimate
    verdict: str
    drafts_dynamic: float | None = None
    drafts_static: float | None = None
    running_dynamic: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "target_qps": self.target_qps,
            "dynamic_s": self.dynamic.to_dict(),
            "best_s": self.best.to_dict(),
            "best_of": self.best_of,
            "ratio": self.ratio.to_dict(),
            "verdict": self.verdict,
            "drafts_dynamic": self.drafts_dynamic,
            "drafts_static": self.drafts_static,
            "running_dynamic": self.running_dynamic,
        }


@dataclass(slots=True)
class BestOfBoth:
    """The check for one dynamic condition; ``status`` is ``delivered``, ``costs`` or ``n/a``
    (no static condition or no common step to judge it by)."""

    condition: str
    static: str | None
    baseline: str
    metric: str
    schedule: list[Any]
    rows: list[BestOfBothRow] = field(default_factory=list)
    status: str = DELIVERED
    cost_low: float | None = None
    cost_high: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The figures; the verdict in words is ``report/schedule_words.py``'s."""
        return {
            "condition": self.condition,
            "static": self.static,
            "baseline": self.baseline,
            "metric": self.metric,
            SCHEDULE_KEY: self.schedule,
            "status": self.status,
            "cost_low_load": self.cost_low,
            "cost_high_load": self.cost_high,
            "steps": [r.to_dict() for r in self.rows],
        }


@dataclass(slots=True)
class ScheduleAnalysis:
    """Dynamic speculation schedules in one place: crossovers as running batches, proposals, best-of-both checks."""

    batch_crossovers: list[BatchCrossover] = field(default_factory=list)
    proposals: list[ScheduleProposal] = field(default_factory=list)
    best_of_both: list[BestOfBoth] = field(default_factory=list)

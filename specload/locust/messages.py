"""Typed master/worker messages, and how a step's rate is split over the workers.

Locust's ``runner.send_message(type, data)`` carries msgpack-able data; every specload
message is a frozen dataclass with ``to_wire()`` / ``from_wire()`` so neither side handles
untyped dicts. The same messages flow in a local run (``LocalRunner.send_message`` calls the
listener in-process), so one code path is tested for both.

Master → workers: ``RunStart`` (scenario, model, run id), ``StepChange`` (a step's rate and
window, and this worker's share), ``Drain`` (no more arrivals: finish and report).
Workers → master: ``WorkerReady`` (prompts taken, client built), ``RecordBatch`` (records + cumulative
counts), ``FinalCounts`` (after the drain). This module imports nothing from Locust.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from typing_extensions import Self

__all__ = [
    "Drain",
    "FinalCounts",
    "RecordBatch",
    "RunStart",
    "StepChange",
    "WorkerReady",
    "split_slots",
]

M = TypeVar("M", bound="_Wire")


class _Wire:
    """``to_wire`` / ``from_wire`` for dataclass messages; ``TYPE`` is the Locust message type."""

    __slots__ = ()
    TYPE: ClassVar[str]

    def to_wire(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload, no-any-return]

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Self:
        """Build from wire data; keys from a newer sender are ignored, not fatal."""
        known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True, slots=True)
class RunStart(_Wire):
    """A run begins: what every process needs to build its prompts and clients.

    ``scenario`` is ``Scenario.to_dict()`` so workers on other hosts need no scenario file;
    ``model`` is resolved by the master (the scenario may leave it to ``/v1/models``);
    ``prompts`` is the prompt set the master built once (``PromptSet.to_wire()``, with its
    hash), so every process sends the same prompts and none calls ``/tokenize``.
    """

    TYPE: ClassVar[str] = "specload_run_start"
    run_id: str
    scenario: dict[str, Any]
    scenario_path: str | None
    model: str
    base_url: str
    store_text: bool = False
    prompts: dict[str, Any] | None = None
    #: an interleaved session (``sweep --interleave``): each condition's server URL and the
    #: model it serves; a block's ``StepChange.condition`` says which one gets its load
    targets: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StepChange(_Wire):
    """One step, and this worker's share of it from ``begin_at`` on (unix seconds).

    A step's window is ``[start, end)``; arrivals before ``warmup_end`` are warm-up. The
    worker draws arrivals at ``target_qps / slots`` as share ``slot``; when the set of
    workers changes mid-step the master sends the same step again with a higher ``epoch``
    and a later ``begin_at``: the old share stops and the new one starts there, so no
    arrival is drawn twice and none is skipped by a live worker. A worker left out of the
    new split gets ``slots == 0``: an empty share, so it stops drawing arrivals.
    """

    TYPE: ClassVar[str] = "specload_step"
    run_id: str
    index: int
    repeat: int
    target_qps: float
    start: float
    warmup_end: float
    end: float
    begin_at: float
    epoch: int = 0
    slot: int = 0
    slots: int = 1
    prompt_offset: int = 0
    #: a closed-loop step: requests in flight over all workers (0: open loop at target_qps)
    concurrency: int = 0
    #: an interleaved block: its condition (``RunStart.targets``) and number in the session
    condition: str = ""
    block: int | None = None
    #: the block's load goes on past ``end``, unmeasured (``cooldown``), until a later share
    #: takes over: the master sends the next block once this one's measured requests are in
    open_end: bool = False
    #: the arrival draw's seed (None: derived from the scenario's seed and the step)
    seed: int | None = None
    #: where the arrival draw starts (None: at ``begin_at``); a block's is its warm-up end
    #: minus its planned warm-up, so a block held longer keeps its draw's place in the window
    origin: float | None = None
    #: a block that takes over the load of block ``continues`` (same server and cell, no
    #: warm-up): that block's closed-loop requests in flight are this one's, refilled as its own
    continues: int | None = None

    @property
    def name(self) -> str:
        """The Locust row name for this step, e.g. ``chat @ 4 qps`` or ``chat @ c=1``."""
        where = f"{self.condition} " if self.condition else ""
        if self.concurrency:
            return f"{where}chat @ c={self.concurrency}"
        return f"{where}chat @ {self.target_qps:g} qps"


@dataclass(frozen=True, slots=True)
class Drain(_Wire):
    """No more arrivals: finish in-flight requests (or, with ``abort``, cancel them) and
    report counts. Sent after the last step, and with ``abort`` when the run is stopped."""

    TYPE: ClassVar[str] = "specload_drain"
    run_id: str
    abort: bool = False


@dataclass(frozen=True, slots=True)
class WorkerReady(_Wire):
    """A worker took the run's prompt set and built its client: it can take steps."""

    TYPE: ClassVar[str] = "specload_ready"
    run_id: str
    worker: str
    lookup_method: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class RecordBatch(_Wire):
    """Records (``RequestRecord.to_dict()``) and the worker's cumulative counts so far.

    Counts ride on every batch so a worker that dies has still told the master how many
    requests it sent: the gap between ``sent`` and records received is the loss.
    ``sent_in_window`` maps step index → non-warm-up requests that count as load
    (``records.counts_as_load``) sent inside the step's window (for achieved QPS before every
    in-flight record is back). ``due`` maps step index → measured (non-warm-up) arrivals put
    on the queue so far: each ends as exactly one record of that step with ``warmup`` false,
    so a step has all its records when their count reaches ``due`` (``StepTally.settled``).
    """

    TYPE: ClassVar[str] = "specload_records"
    run_id: str
    worker: str
    records: list[dict[str, Any]] = field(default_factory=list)
    sent: int = 0
    sent_in_window: dict[int, int] = field(default_factory=dict)
    due: dict[int, int] = field(default_factory=dict)
    #: step index -> every arrival put on the queue so far (warm-up and cool-down too): the
    #: step has nothing left in flight when its records reach this count
    queued: dict[int, int] = field(default_factory=dict)
    #: condition -> requests sent to its server (an interleaved session's per-condition count)
    sent_by: dict[str, int] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        # Not asdict(): it deep-copies every record dict (and its ITL list) once more, which
        # costs ~3 % of a load process's CPU at 128 req/s. The records are already wire dicts.
        return {
            "run_id": self.run_id,
            "worker": self.worker,
            "records": self.records,
            "sent": self.sent,
            "sent_in_window": dict(self.sent_in_window),
            "due": dict(self.due),
            "queued": dict(self.queued),
            "sent_by": dict(self.sent_by),
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> RecordBatch:
        return cls(
            run_id=data["run_id"],
            worker=data["worker"],
            records=list(data.get("records") or []),
            sent=int(data.get("sent", 0)),
            sent_in_window=_step_counts(data.get("sent_in_window")),
            due=_step_counts(data.get("due")),
            queued=_step_counts(data.get("queued")),
            sent_by={str(k): int(v) for k, v in (data.get("sent_by") or {}).items()},
        )


def _step_counts(raw: dict[Any, Any] | None) -> dict[int, int]:
    """``{step: count}`` as sent: msgpack may hand integer keys back as ints or strings
    depending on the sender."""
    return {int(k): int(v) for k, v in (raw or {}).items()}


@dataclass(frozen=True, slots=True)
class FinalCounts(_Wire):
    """A worker drained: it sent ``sent`` requests and produced ``recorded`` records."""

    TYPE: ClassVar[str] = "specload_final"
    run_id: str
    worker: str
    sent: int
    recorded: int


def split_slots(workers: list[str]) -> dict[str, tuple[int, int]]:
    """``{worker: (slot, slots)}``: each worker's share of a step, in a stable order.

    Sorted by id so that master and tests agree, and so the same set always gives the same
    assignment (a re-split changes only what the set change forces).
    """
    ordered = sorted(set(workers))
    return {w: (i, len(ordered)) for i, w in enumerate(ordered)}

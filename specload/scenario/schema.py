"""The validated scenario: what must stay fixed for two runs to be comparable.

A ``Scenario`` is a frozen dataclass with every default filled. It is built only by
``specload.scenario.parse`` (from YAML or a dict), which validates every key and names the
key path of anything wrong. ``Scenario.schedule()`` expands the QPS ladder and its repeats
into ``StepPlan``s, the unit the Locust shape (master) walks through.

Repeats replay the **whole ladder**: with steps ``[1, 4, 8]`` and ``repeats: 2`` the run is
1, 4, 8, 1, 4, 8. That spreads slow drift of the server (thermal, fragmentation) over every
step instead of piling it on the last ones. ``StepPlan.index`` counts all steps of the run
across repeats (it is the ``step`` field of every record).

Each step runs ``warmup_s + duration_s`` seconds: the first ``warmup_s`` seconds of every
step are warm-up (records flagged ``warmup: true``, excluded from figures) so queues settle
at the new rate before anything is measured.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from specload.core.pacer import ARRIVALS as PACER_ARRIVALS
from specload.scenario.conversation import ConversationSpec
from specload.scenario.lengths import LengthDist

__all__ = [
    "ARRIVALS",
    "CLIENTS",
    "FIRST_BLOCK_WARMUP_S",
    "ContractSpec",
    "InterleaveSpec",
    "PromptSpec",
    "Scenario",
    "StepPlan",
]

#: Arrival processes the pacer knows (defined there, once).
ARRIVALS = PACER_ARRIVALS
#: Client implementations: ``fast`` (geventhttpclient) or ``openai`` (official SDK).
CLIENTS = ("fast", "openai")


@dataclass(frozen=True, slots=True)
class PromptSpec:
    """Where prompts come from: ``kind`` is ``synthetic`` or ``file``.

    Synthetic: ``count`` prompts of ``input_tokens`` prompt tokens each (as the server counts
    them for the chat request, template included, when the server has ``/tokenize``), whose
    first ``shared_prefix_tokens`` content tokens are identical across prompts (prefix
    caching), and whose body repeats itself to the degree ``repetition`` (0 = no repeated
    lines, 1 = the body is one short block repeated: the continuation copies the input,
    which is where n-gram / suffix drafting wins).
    File: ``file`` is the absolute path of a JSONL file of ``{"messages": [...]}`` objects;
    ``count`` (0 = all) limits how many lines are used.
    ``exact_tokens`` (synthetic): the run fails, with one line, unless the server's
    ``/tokenize`` counted every prompt; by default a missing or failing ``/tokenize`` falls
    back to the estimate, with a warning in run.json.
    """

    kind: str = "synthetic"
    input_tokens: int = 512
    shared_prefix_tokens: int = 0
    repetition: float = 0.0
    count: int = 200
    file: str | None = None
    exact_tokens: bool = False
    #: ``input_tokens`` as a distribution (``scenario/lengths.py``); ``input_tokens`` is its mean
    input_dist: LengthDist | None = None


@dataclass(frozen=True, slots=True)
class ContractSpec:
    """The output contract checked per request: JSON validity, required fields, tool calls.

    ``tools`` is passed to the server verbatim (OpenAI tool definitions) when not None.
    """

    json: bool = False
    required_fields: tuple[str, ...] = ()
    tools: tuple[dict[str, Any], ...] | None = None


#: ``interleave.order``'s values (``InterleaveSpec.order``)
INTERLEAVE_ORDERS = ("spread", "grouped")

#: A block's warm-up when no request is known yet (``InterleaveSpec``): 5 s
#: outlasts one 256-token request at an H200's slow speculative regime (20 ms a step).
FIRST_BLOCK_WARMUP_S = 5.0


@dataclass(frozen=True, slots=True)
class InterleaveSpec:
    """How ``specload sweep --interleave`` splits each (condition, step) cell's measured time.

    Each cell's ``step_duration_s`` becomes ``blocks`` blocks of ``step_duration_s / blocks``
    seconds, each after its own ``block_warmup_s`` warm-up, run in a seeded, balanced order
    (``order``) with every condition's servers up at once (``protocol/interleave.py``). Why:
    on an H200 the draft-model step flipped between a fast and a slow regime in windows of
    2-10 s; one contiguous window per cell let the share of slow seconds it happened to catch
    decide the ratio. Blocks paired with the other condition's neighbour cut that share into
    many samples, so it averages out and the spread between blocks is measured instead of
    hidden. Defaults (docs/scenarios.md):
    6 blocks keep a 60-s cell's blocks at 10 s, about one regime window, and give a
    block-level interval 5 degrees of freedom. ``block_warmup_s`` None (the default) derives
    each block's warm-up from its cell: the largest p50 E2E the cell's blocks have shown so
    far (for a cell's first block, any cell's), at least 1 s (``locust/blocks.py``), and
    ``FIRST_BLOCK_WARMUP_S`` for the session's first block, before any is known: an open-loop
    batch fills for about one request's time, and a fixed 5 s would be twice that on an H200
    at 512/256 tokens, half the block's wall time.
    """

    blocks: int = 6
    block_warmup_s: float | None = None
    #: the order's seed; None: the scenario's ``seed``
    seed: int | None = None
    #: ``spread``: every step's pairs of blocks spread over the session in a random order;
    #: ``grouped``: a step's pairs run back to back in mirrored order (A B, B A, A B, ...), so
    #: a server runs two blocks of one step in a row and the second needs no warm-up, the
    #: first no cool-down (``INTERLEAVE_ORDERS``; docs/scenarios.md says what each trades)
    order: str = "spread"


@dataclass(frozen=True, slots=True)
class StepPlan:
    """One step of the executed schedule.

    ``index`` counts steps over the whole run (all repeats); ``repeat`` is 0-based.
    The step lasts ``warmup_s + duration_s`` seconds; only the last ``duration_s`` count.
    """

    index: int
    repeat: int
    target_qps: float
    duration_s: float
    warmup_s: float
    #: a closed-loop step: this many requests in flight, the next sent when one returns
    #: (``target_qps`` is 0); 0 for an open-loop QPS step
    concurrency: int = 0

    @property
    def total_s(self) -> float:
        """Wall-clock length of the step, warm-up included (seconds)."""
        return self.warmup_s + self.duration_s


@dataclass(frozen=True, slots=True)
class Scenario:
    """A validated scenario with defaults filled. Build it with ``load_scenario``.

    Units: seconds for every ``*_s``, requests per second for ``steps``. ``model`` None means
    the first model the server lists at ``/v1/models``. ``min_tokens`` together with
    ``max_tokens`` and ``ignore_eos`` fixes the output length (vLLM's own benchmark does the
    same), so conditions are compared on equal work.
    """

    name: str
    steps: tuple[float, ...]
    #: ``{concurrency: N}`` entries of ``steps``: closed-loop steps, run first in each repeat
    #: (the single-request case practitioners record apart from concurrent load)
    concurrency_steps: tuple[int, ...] = ()
    model: str | None = None
    description: str = ""
    temperature: float = 0.0
    max_tokens: int = 256
    #: ``max_tokens`` as a distribution, drawn per prompt; ``max_tokens`` is its mean
    max_tokens_dist: LengthDist | None = None
    min_tokens: int | None = 256
    ignore_eos: bool = True
    stop: tuple[str, ...] | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    arrival: str = "poisson"
    #: ``arrival: gamma`` only: the gamma shape; gaps' coefficient of variation is
    #: ``1/sqrt(burstiness)`` (vLLM ``bench serve --burstiness``; 1 = Poisson)
    burstiness: float = 1.0
    step_duration_s: float = 60.0
    warmup_s: float = 10.0
    repeats: int = 1
    #: server starts per condition for ``specload sweep`` (each its own run dir, interleaved
    #: across conditions); unlike ``repeats``, which re-walk the ladder on one server start
    replicates: int = 1
    max_concurrency: int = 256
    metrics_interval_s: float = 5.0
    request_timeout_s: float = 120.0
    seed: int = 0
    client: str = "fast"
    record_itl: bool = True
    stream: bool = True
    prompts: PromptSpec = field(default_factory=PromptSpec)
    contract: ContractSpec | None = None
    #: latency SLOs, ``{"tpot_p95": "25ms", ...}`` (``specload/core/slo.py``), for compare
    slo: dict[str, str] = field(default_factory=dict)
    #: prompt-length bounds of compare's per-class answer when prompts carry no category
    #: (``analysis/decisions/classes.py``; default: short/long at the median)
    class_bounds: tuple[int, ...] = ()
    #: ``arrival: trace``: the trace file (absolute), its base speedup, and what it holds
    #: (``{format, count, span_s}``, so a worker's copy needs no file); ``steps`` are speedups
    #: multi-turn conversations (``scenario/conversation.py``); ``steps`` then count
    #: conversation starts per second
    conversation: ConversationSpec | None = None
    trace: str | None = None
    trace_speedup: float = 1.0
    trace_info: dict[str, Any] | None = None
    source: str | None = None  # the file it was loaded from, if any
    #: ``specload sweep --interleave``'s blocks (None: the defaults of ``InterleaveSpec``)
    interleave: InterleaveSpec | None = None

    @property
    def trace_rate_qps(self) -> float:
        """A trace's mean arrival rate at 1x (0 without a trace)."""
        info = self.trace_info or {}
        return float(info.get("count", 0)) / float(info.get("span_s", 1.0))

    def schedule(self) -> list[StepPlan]:
        """The run's steps in order: the whole ladder once per repeat. With a trace, each step
        replays it once at its speedup (``steps`` x ``trace_speedup``): it lasts the trace's
        span over that speedup, and its target QPS is the trace's mean rate times it."""
        plans: list[StepPlan] = []
        for repeat in range(self.repeats):
            for c in self.concurrency_steps:
                plans.append(
                    StepPlan(
                        index=len(plans),
                        repeat=repeat,
                        target_qps=0.0,
                        duration_s=self.step_duration_s,
                        warmup_s=self.warmup_s,
                        concurrency=c,
                    )
                )
            for x in self.steps:
                qps, duration = x, self.step_duration_s
                if self.trace_info is not None:
                    speed = x * self.trace_speedup
                    qps = self.trace_rate_qps * speed
                    duration = float(self.trace_info["span_s"]) / speed - self.warmup_s
                plans.append(
                    StepPlan(
                        index=len(plans),
                        repeat=repeat,
                        target_qps=qps,
                        duration_s=duration,
                        warmup_s=self.warmup_s,
                    )
                )
        return plans

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict, defaults filled; ``load.parse_scenario`` reads it back."""
        d = asdict(self)
        d.pop("max_tokens_dist")
        if self.max_tokens_dist is not None:  # as written: the mapping, read back the same
            d["max_tokens"] = self.max_tokens_dist.to_dict()
        d.pop("concurrency_steps")
        d["steps"] = [{"concurrency": c} for c in self.concurrency_steps] + list(self.steps)
        d["class_bounds"] = list(self.class_bounds)
        if self.trace is None:
            for key in ("trace", "trace_speedup", "trace_info"):
                d.pop(key)
        if self.conversation is not None:
            d["conversation"] = self.conversation.to_dict()
        if self.stop is not None:
            d["stop"] = list(self.stop)
        p = d["prompts"]
        kind = p.pop("kind")
        p.pop("input_dist")
        if self.prompts.input_dist is not None:
            p["input_tokens"] = self.prompts.input_dist.to_dict()
        if kind == "trace":  # the prompts come from the trace
            d.pop("prompts")
        elif kind == "file":
            d["prompts"] = {"file": p["file"], "count": p["count"]}
        else:
            p.pop("file")
            d["prompts"] = {"synthetic": p}
        if self.contract is not None:
            c = d["contract"]
            c["required_fields"] = list(self.contract.required_fields)
            c["tools"] = None if self.contract.tools is None else list(self.contract.tools)
        return d

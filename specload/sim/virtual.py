"""Virtual-time driver: run the engine against a seeded Poisson arrival list, no sockets.

The engine model is the same object the HTTP server runs; here the clock jumps from step end
to step end, so a whole calibration sweep (1..64 req/s, hundreds of requests each) takes
seconds. Per-request results use vLLM ``bench serve``'s definitions: TTFT to the first token,
TPOT = (E2E - TTFT) / (output - 1), ITL per chunk gap.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from specload.sim.engine import Engine, EngineConfig
from specload.sim.kvcache import block_hashes
from specload.sim.metrics import SimMetrics
from specload.sim.request import Request
from specload.sim.spec import NgramIndex
from specload.sim.textgen import OutputText

__all__ = ["RequestResult", "VirtualRun", "random_prompt", "run_poisson", "run_requests"]


@dataclass(slots=True)
class RequestResult:
    """One request's timeline on the virtual clock (seconds)."""

    arrival: float
    first_token_at: float = 0.0
    done_at: float = 0.0
    output_tokens: int = 0
    chunk_times: list[float] = field(default_factory=list)

    @property
    def ttft_s(self) -> float:
        return self.first_token_at - self.arrival

    @property
    def e2e_s(self) -> float:
        return self.done_at - self.arrival

    @property
    def tpot_s(self) -> float | None:
        if self.output_tokens < 2:
            return None
        return (self.done_at - self.first_token_at) / (self.output_tokens - 1)


class _RecordSink:
    __slots__ = ("res",)

    def __init__(self, res: RequestResult) -> None:
        self.res = res

    def push(self, req: Request, text: str, n_tokens: int, finish: str | None, now: float) -> None:
        res = self.res
        if not res.chunk_times:
            res.first_token_at = now
        res.chunk_times.append(now)
        res.output_tokens += n_tokens
        if finish is not None:
            res.done_at = now


@dataclass
class VirtualRun:
    """Results of one virtual run plus the engine's counters."""

    results: list[RequestResult]
    metrics: SimMetrics
    duration_s: float
    max_running: int


def random_prompt(rng: random.Random, n_tokens: int) -> list[str]:
    """A prompt of exactly ``n_tokens`` random word tokens (vLLM's ``random`` dataset analogue)."""
    return [f" w{rng.randrange(100_000)}" for _ in range(n_tokens)]


def run_poisson(
    cfg: EngineConfig,
    rate_rps: float,
    num_requests: int,
    input_len: int = 512,
    output_len: int = 256,
    seed: int = 0,
) -> VirtualRun:
    """Send ``num_requests`` Poisson arrivals at ``rate_rps`` (ignore_eos, fixed lengths)."""
    rng = random.Random(seed)
    t_arr, arrivals = 0.0, []
    for _ in range(num_requests):
        t_arr += rng.expovariate(rate_rps)
        arrivals.append(t_arr)
    prompts = [random_prompt(rng, input_len) for _ in range(num_requests)]
    return run_requests(cfg, prompts, arrivals, output_len, seed=seed, repetition=0.0)


def run_requests(
    cfg: EngineConfig,
    prompts: list[list[str]],
    arrivals: list[float],
    output_len: int,
    seed: int = 0,
    repetition: float | None = None,
) -> VirtualRun:
    """Run the given prompts arriving at the given (sorted) times; all produce ``output_len``.

    ``repetition`` None measures each prompt's repetition (as the server does); a number
    fixes it (faster for random prompts).
    """
    metrics = SimMetrics("virtual", cfg.spec.max_k if cfg.spec else 0)
    engine = Engine(cfg, metrics)
    delay = cfg.profile.frontend_delay_s
    bs = engine.kv.block_size
    results: list[RequestResult] = []
    t, nxt, max_running = 0.0, 0, 0
    while nxt < len(arrivals) or engine.has_work:
        while nxt < len(arrivals) and arrivals[nxt] + delay <= t:
            results.append(RequestResult(arrival=arrivals[nxt]))
            engine.add(
                _request(
                    cfg,
                    str(nxt),
                    prompts[nxt],
                    arrivals[nxt],
                    output_len,
                    seed,
                    repetition,
                    results[-1],
                    bs,
                )
            )
            nxt += 1
        if not engine.has_work:
            t = arrivals[nxt] + delay
            continue
        plan = engine.plan(t)
        max_running = max(max_running, len(engine.running))
        if not plan.items:
            raise RuntimeError("virtual run stalled: a request can never fit the KV cache")
        t += plan.duration
        engine.complete(plan, t)
    return VirtualRun(results, metrics, t, max_running)


def _request(
    cfg: EngineConfig,
    rid: str,
    prompt: list[str],
    arrival: float,
    output_len: int,
    seed: int,
    repetition: float | None,
    res: RequestResult,
    bs: int,
) -> Request:
    req = Request(
        rid=rid,
        prompt=prompt,
        text=OutputText(prompt, seed, rep=repetition),
        target_len=output_len,
        finish_reason="length",
        sink=_RecordSink(res),
        arrival=arrival,
    )
    if cfg.prefix_caching:
        req.block_hashes = block_hashes(prompt, bs)
    if cfg.spec is not None and cfg.spec.is_ngram:
        req.ngram = NgramIndex(prompt, cfg.spec.lookup_min, cfg.spec.lookup_max)
    return req

"""Virtual-time driver: run the simulator's engine against seeded arrivals or a closed loop,
no sockets. The benchmarks and the simulator's tests use it (``from virtual import ...`` with
``benchmarks/`` on ``sys.path``); the installed simulator does not.

The engine model is the same object the HTTP server runs; here the clock jumps from step end
to step end, so a whole calibration sweep (1..64 req/s, hundreds of requests each) takes
seconds. Per-request results use vLLM ``bench serve``'s definitions: TTFT to the first token,
TPOT = (E2E - TTFT) / (output - 1), ITL per chunk gap.

The clock is session time (seconds since the server start, the host's and the time regime's
``t``): a run can start at ``t0`` so that a block of load simulated alone meets the regime
those seconds had in a longer session (``run_poisson``, ``run_requests``, ``run_closed``).
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from specload.sim.engine import Engine, EngineConfig
from specload.sim.host import HostDraw
from specload.sim.kvcache import block_hashes
from specload.sim.metrics import SimMetrics
from specload.sim.request import Request
from specload.sim.spec import NgramIndex
from specload.sim.textgen import OutputText

__all__ = [
    "RequestResult",
    "VirtualRun",
    "random_prompt",
    "run_closed",
    "run_poisson",
    "run_requests",
]


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
    __slots__ = ("done", "res")

    def __init__(self, res: RequestResult, done: list[RequestResult]) -> None:
        self.res, self.done = res, done

    def push(self, req: Request, text: str, n_tokens: int, finish: str | None, now: float) -> None:
        res = self.res
        if not res.chunk_times:
            res.first_token_at = now
        res.chunk_times.append(now)
        res.output_tokens += n_tokens
        if finish is not None:
            res.done_at = now
            self.done.append(res)


@dataclass
class VirtualRun:
    """Results of one virtual run plus the engine's counters; ``duration_s`` from ``t0`` (the
    session second the run started at) to the last step's end."""

    results: list[RequestResult]
    metrics: SimMetrics
    duration_s: float
    max_running: int
    t0: float = 0.0

    @property
    def end_s(self) -> float:
        """The session second the last step ended."""
        return self.t0 + self.duration_s


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
    *,
    t0: float = 0.0,
    host: HostDraw | None = None,
) -> VirtualRun:
    """Send ``num_requests`` Poisson arrivals at ``rate_rps`` (ignore_eos, fixed lengths),
    from session second ``t0`` on (see ``run_requests``)."""
    rng = random.Random(seed)
    t_arr, arrivals = 0.0, []
    for _ in range(num_requests):
        t_arr += rng.expovariate(rate_rps)
        arrivals.append(t_arr)
    prompts = [random_prompt(rng, input_len) for _ in range(num_requests)]
    return run_requests(
        cfg, prompts, arrivals, output_len, seed=seed, repetition=0.0, t0=t0, host=host
    )


def run_requests(
    cfg: EngineConfig,
    prompts: list[list[str]],
    arrivals: list[float],
    output_len: int,
    seed: int = 0,
    repetition: float | None = None,
    *,
    t0: float = 0.0,
    host: HostDraw | None = None,
) -> VirtualRun:
    """Run the given prompts arriving at the given (sorted) times; all produce ``output_len``.

    ``repetition`` None measures each prompt's repetition (as the server does); a number
    fixes it (faster for random prompts). The clock is session time, seconds since the
    server start: it starts at ``t0``, ``arrivals`` are seconds after ``t0``, and every time
    in the results is a session second, so a block of load run at ``t0`` meets the host's
    regime and slow window of those seconds. ``host`` (default ``cfg.host``) replaces the
    config's host draw.
    """
    pending = deque((t0 + a, p) for a, p in zip(arrivals, prompts, strict=False))
    return _Driver(_config(cfg, host), output_len, seed, repetition, t0).run(pending)


def run_closed(
    cfg: EngineConfig,
    concurrency: int,
    *,
    duration_s: float | None = None,
    num_requests: int | None = None,
    input_len: int = 512,
    output_len: int = 256,
    seed: int = 0,
    t0: float = 0.0,
    host: HostDraw | None = None,
) -> VirtualRun:
    """A closed loop: ``concurrency`` users send at ``t0``, each sending its next request the
    moment its last one finished (specload's ``{concurrency: N}`` steps), until session second
    ``t0 + duration_s`` or ``num_requests`` sent (at least one of the two); requests in flight
    then finish. Random prompts of ``input_len`` tokens, ``output_len`` out (ignore_eos).
    """
    if concurrency < 1:
        raise ValueError(f"concurrency {concurrency}: expected at least 1 user")
    if duration_s is None and num_requests is None:
        raise ValueError("run_closed: give duration_s, num_requests or both")
    rng = random.Random(seed)
    end = math.inf if duration_s is None else t0 + duration_s
    cap = math.inf if num_requests is None else num_requests
    sent = 0

    def next_request(t: float) -> tuple[float, list[str]] | None:
        nonlocal sent
        if t >= end or sent >= cap:
            return None
        sent += 1
        return t, random_prompt(rng, input_len)

    first = (next_request(t0) for _ in range(concurrency))
    pending = deque(r for r in first if r is not None)
    driver = _Driver(_config(cfg, host), output_len, seed, 0.0, t0)
    return driver.run(pending, next_request)


def _config(cfg: EngineConfig, host: HostDraw | None) -> EngineConfig:
    return cfg if host is None else dataclasses.replace(cfg, host=host)


class _Driver:
    """The virtual clock around one engine: admit arrivals, plan a step, jump to its end."""

    def __init__(
        self,
        cfg: EngineConfig,
        output_len: int,
        seed: int,
        repetition: float | None,
        t0: float,
    ) -> None:
        self.cfg, self.output_len, self.seed, self.repetition = cfg, output_len, seed, repetition
        self.metrics = SimMetrics("virtual", cfg.spec.max_k if cfg.spec else 0)
        self.engine = Engine(cfg, self.metrics)  # engine.t0 = 0: its clock is session time
        self.t0 = t0
        self.results: list[RequestResult] = []
        self.finished: list[RequestResult] = []

    def run(
        self,
        pending: deque[tuple[float, list[str]]],
        on_done: Callable[[float], tuple[float, list[str]] | None] | None = None,
    ) -> VirtualRun:
        """Until no arrival is pending and the engine is idle; ``on_done(t)`` may return a
        new arrival for each request that finished at ``t`` (a closed loop)."""
        engine, delay = self.engine, self.cfg.profile.frontend_delay_s
        t, max_running = self.t0, 0
        while pending or engine.has_work:
            while pending and pending[0][0] + delay <= t:
                self._add(*pending.popleft())
            if not engine.has_work:
                t = pending[0][0] + delay
                continue
            plan = engine.plan(t)
            max_running = max(max_running, len(engine.running))
            if not plan.items:
                raise RuntimeError("virtual run stalled: a request can never fit the KV cache")
            t += plan.duration
            engine.complete(plan, t)
            for _ in self.finished:
                nxt = on_done(t) if on_done is not None else None
                if nxt is not None:
                    pending.append(nxt)
            self.finished.clear()
        return VirtualRun(self.results, self.metrics, t - self.t0, max_running, self.t0)

    def _add(self, arrival: float, prompt: list[str]) -> None:
        res = RequestResult(arrival=arrival)
        self.results.append(res)
        self.engine.add(
            _request(
                self.cfg,
                str(len(self.results) - 1),
                prompt,
                arrival,
                self.output_len,
                self.seed,
                self.repetition,
                res,
                self.engine.kv.block_size,
                self.finished,
            )
        )


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
    done: list[RequestResult],
) -> Request:
    req = Request(
        rid=rid,
        prompt=prompt,
        text=OutputText(prompt, seed, rep=repetition),
        target_len=output_len,
        finish_reason="length",
        sink=_RecordSink(res, done),
        arrival=arrival,
    )
    if cfg.prefix_caching:
        req.block_hashes = block_hashes(prompt, bs)
    if cfg.spec is not None and cfg.spec.is_ngram:
        req.ngram = NgramIndex(prompt, cfg.spec.lookup_min, cfg.spec.lookup_max)
    return req

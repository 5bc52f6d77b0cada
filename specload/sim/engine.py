"""The continuous-batching engine model: scheduling, KV budget, prefix cache, speculation.

One step, as vLLM V1 schedules it: running requests first (decodes, and prefills still in
progress, chunked to the ``max_num_batched_tokens`` budget), then waiting requests FCFS while the
batch has room (``max_num_seqs``) and the KV cache has blocks; a running request that cannot
grow preempts the newest one (recompute). ``plan(now)`` fixes the batch and its duration from
the cost model; ``complete(plan, end)`` applies its outcome at the step's end and pushes each
request's new tokens to its sink. The engine has no clock of its own: the real-time loop
(``loop.py``) and the virtual-time driver of the benchmarks (``benchmarks/virtual.py``) call
those two methods. The host (``host.py``: ``--spec-overhead-scale``, ``--start-jitter``) scales
speculation's launch-bound cost by its factor at ``now - t0``, seconds since the server start.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field

from specload.sim.costmodel import BatchShape, step_time
from specload.sim.host import HostDraw
from specload.sim.kvcache import KVCache
from specload.sim.metrics import SimMetrics
from specload.sim.profiles import Profile
from specload.sim.request import Request
from specload.sim.spec import SpecConfig

__all__ = ["Engine", "EngineConfig", "StepPlan"]


@dataclass(frozen=True)
class EngineConfig:
    """Server flags that shape the engine (vLLM names)."""

    profile: Profile
    spec: SpecConfig | None = None
    prefix_caching: bool = False
    max_num_seqs: int | None = None
    max_model_len: int | None = None
    num_gpu_blocks: int | None = None
    seed: int = 0
    host: HostDraw = field(default_factory=HostDraw)


@dataclass(slots=True)
class StepPlan:
    """One step: (request, query tokens, is_prefill, drafts) entries and its duration (s)."""

    items: list[tuple[Request, int, bool, list[str] | int]] = field(default_factory=list)
    duration: float = 0.0
    start: float = 0.0
    k: int = 0


class Engine:
    """Step-by-step model of a vLLM engine; see the module docstring."""

    def __init__(self, cfg: EngineConfig, metrics: SimMetrics) -> None:
        p = cfg.profile
        self.cfg, self.prof, self.spec, self.metrics = cfg, p, cfg.spec, metrics
        self.max_num_seqs = cfg.max_num_seqs or p.max_num_seqs
        self.max_model_len = cfg.max_model_len or p.max_model_len
        tokens = p.kv_cache_tokens_spec if cfg.spec else p.kv_cache_tokens
        blocks = cfg.num_gpu_blocks or tokens // p.block_size
        self.kv = KVCache(blocks, p.block_size)
        self.rng = random.Random(cfg.seed)
        self.host = cfg.host
        #: Engine-clock time of the server start (the host's slow window counts from it).
        self.t0 = 0.0
        self.running: list[Request] = []
        self.waiting: deque[Request] = deque()
        self.steps = 0

    # -- requests -------------------------------------------------------------------------
    def add(self, req: Request) -> None:
        self.waiting.append(req)
        self.metrics.waiting = len(self.waiting)

    def abort(self, req: Request) -> None:
        """Drop a request (client went away); frees its blocks."""
        if req.finished:
            return
        req.finished = req.aborted = True
        if req in self.running:
            self.running.remove(req)
            self._free(req)
        elif req in self.waiting:
            self.waiting.remove(req)
        self._gauges()

    @property
    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    # -- planning -------------------------------------------------------------------------
    def plan(self, now: float) -> StepPlan:
        """Choose this step's batch and how long it takes (see module docstring)."""
        plan = StepPlan(start=now)
        budget = self.prof.max_num_batched_tokens
        spec = self.spec
        k = spec.k_for_batch(len(self.running)) if spec else 0
        plan.k = k
        preempted = False
        i = 0
        while i < len(self.running) and budget > 0:
            r = self.running[i]
            n, prefill, drafts = self._running_tokens(r, budget, k)
            if not self._grow(r, r.computed + n):
                preempted = True
                if not self._preempt_until_fits(r, r.computed + n):
                    continue  # r itself was preempted; running[i] is the next one
            plan.items.append((r, n, prefill, drafts))
            budget -= n
            i += 1
        if not preempted:
            budget = self._admit(plan, budget, now)
        scale = self.host.spec_scale(now - self.t0) if spec is not None else 1.0
        plan.duration = step_time(self.prof, self._shape(plan), scale)
        self._gauges()
        return plan

    def _running_tokens(self, r: Request, budget: int, k: int) -> tuple[int, bool, list[str] | int]:
        if r.computed < r.prefill_target:
            return min(r.prefill_target - r.computed, budget), True, 0
        kk = min(k, r.target_len - r.generated - 1, budget - 1)
        if kk <= 0:
            return 1, False, 0
        if self.spec is not None and self.spec.is_ngram and r.ngram is not None:
            drafts = r.ngram.propose(kk)
            return 1 + len(drafts), False, drafts
        return 1 + kk, False, kk

    def _grow(self, r: Request, tokens: int) -> bool:
        need = -(-tokens // self.kv.block_size) - r.held_blocks
        if need <= 0:
            return True
        if self.kv.allocate(need):
            r.anon_blocks += need
            return True
        return False

    def _preempt_until_fits(self, r: Request, tokens: int) -> bool:
        """Preempt newest requests until ``r`` fits; False when ``r`` itself was preempted."""
        while True:
            victim = self.running.pop()
            self._preempt(victim)
            if victim is r:
                return False
            if self._grow(r, tokens):
                return True

    def _preempt(self, r: Request) -> None:
        self._free(r)
        r.computed = 0
        self.waiting.appendleft(r)
        self.metrics.preemptions += 1

    def _free(self, r: Request) -> None:
        self.kv.free_anon(r.anon_blocks)
        self.kv.release(r.held_hashes)
        r.anon_blocks = 0
        r.held_hashes = []

    def _admit(self, plan: StepPlan, budget: int, now: float) -> int:
        bs = self.kv.block_size
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            r = self.waiting[0]
            target = r.prefill_target
            hit = self.kv.lookup(r.block_hashes) if self.cfg.prefix_caching else 0
            hit = min(hit, (target - 1) // bs)
            n = min(target - hit * bs, budget)
            need = -(-(hit * bs + n) // bs) - hit
            self.kv.acquire(r.block_hashes[:hit])  # hits leave the LRU before we allocate
            if not self.kv.allocate(need):
                self.kv.release(r.block_hashes[:hit])
                break
            self.waiting.popleft()
            r.held_hashes = list(r.block_hashes[:hit])
            r.anon_blocks = need
            r.computed = hit * bs
            if r.scheduled_at is None:
                r.scheduled_at = now
                r.cached_tokens = hit * bs
                if self.cfg.prefix_caching:
                    self.metrics.prefix_queries += len(r.prompt)
                    self.metrics.prefix_hits += hit * bs
            self.running.append(r)
            plan.items.append((r, n, True, 0))
            budget -= n
        return budget

    def _shape(self, plan: StepPlan) -> BatchShape:
        b = BatchShape(n_seqs=len(plan.items), dynamic=bool(self.spec and self.spec.schedule))
        for r, n, prefill, _drafts in plan.items:
            b.ctx_tokens += r.computed + n
            if prefill:
                b.n_prefill += 1
                b.prefill_tokens += n
            else:
                b.decode_tokens += 1
                if n > 1:
                    b.verify_tokens += n - 1
                    b.spec_seqs += 1
        if self.spec is not None:
            b.spec = "ngram" if self.spec.is_ngram else "model"
            b.draft_k = plan.k
            b.draft_seqs = sum(1 for it in plan.items if not it[2])
        return b

    def _gauges(self) -> None:
        m = self.metrics
        m.running = len(self.running)
        m.waiting = len(self.waiting)
        m.kv_usage = self.kv.usage

    # -- completion -----------------------------------------------------------------------
    def complete(self, plan: StepPlan, now: float) -> None:
        """Apply ``plan``'s outcome at engine time ``now`` and push new tokens to sinks."""
        self.steps += 1
        done: list[Request] = []
        for r, n, prefill, drafts in plan.items:
            if r.finished:
                continue
            if prefill:
                r.computed += n
                if r.computed < r.prefill_target:
                    continue
                produced = 1
            else:
                produced = 1 + self._accept(r, drafts)
                r.computed += produced
            if self._emit(r, produced, now):
                done.append(r)
        for r in done:
            self.running.remove(r)
            self._free(r)
        self._gauges()

    def _accept(self, r: Request, drafts: list[str] | int) -> int:
        spec, m = self.spec, self.metrics
        if spec is None or not drafts:
            return 0
        if isinstance(drafts, int):
            k = drafts
            a = spec.accepted(self.rng, k)
        else:
            k = len(drafts)
            a = 0
            tok = r.text.token
            while a < k and drafts[a] == tok(r.generated + a):
                a += 1
        m.num_drafts += 1
        m.num_draft_tokens += k
        m.num_accepted += a
        per_pos = m.accepted_per_pos
        for j in range(a):
            per_pos[j] += 1
        return a

    def _emit(self, r: Request, produced: int, now: float) -> bool:
        """Generate ``produced`` tokens for ``r`` and push them; True when ``r`` finished."""
        g0 = r.generated
        g1 = min(g0 + produced, r.target_len)
        tok = r.text.token
        new = [tok(g0)] if g1 - g0 == 1 else [tok(i) for i in range(g0, g1)]
        text = new[0] if len(new) == 1 else "".join(new)
        finish = r.finish_reason if g1 >= r.target_len else None
        if r.stop:
            text, g1, finish = self._check_stop(r, new, g0, finish)
        if r.ngram is not None:
            r.ngram.extend(new[: g1 - g0])
        r.generated = g1
        self.metrics.generation_tokens += g1 - g0
        if r.first_token_at is None:
            r.first_token_at = now
            self.metrics.prompt_tokens += len(r.prompt)
            self.metrics.ttft.observe(now - r.arrival)
            self._publish(r)
        elif r.last_token_at is not None:
            self.metrics.itl.observe(now - r.last_token_at)
        r.last_token_at = now
        r.sink.push(r, text, g1 - g0, finish, now)
        if finish is not None:
            r.finished = True
            self._record_finish(r, finish, now)
        return finish is not None

    def _check_stop(
        self, r: Request, new: list[str], g0: int, finish: str | None
    ) -> tuple[str, int, str | None]:
        """Cut the output at the first stop string (excluded from the text, as vLLM does)."""
        base = len(r.out_tail)
        tail = r.out_tail
        for i, t in enumerate(new):
            tail += t
            hits = [(p, s) for s, p in ((s, tail.find(s)) for s in r.stop) if p >= 0]
            if hits:
                pos, r.stop_reason = min(hits)
                return tail[base : max(base, pos)], g0 + i + 1, "stop"
        r.out_tail = tail[-64:]
        return tail[base:], g0 + len(new), finish

    def _publish(self, r: Request) -> None:
        """After prefill, full prompt blocks become prefix-cache entries others can hit."""
        if not self.cfg.prefix_caching:
            return
        held = set(r.held_hashes)
        for h in r.block_hashes:
            if h not in held and r.anon_blocks > 0 and self.kv.publish(h):
                r.anon_blocks -= 1
                r.held_hashes.append(h)

    def _record_finish(self, r: Request, reason: str, now: float) -> None:
        m = self.metrics
        sched = r.scheduled_at if r.scheduled_at is not None else now
        first = r.first_token_at if r.first_token_at is not None else now
        m.e2e.observe(now - r.arrival)
        m.queue.observe(sched - r.arrival)
        m.prefill.observe(first - sched)
        m.decode.observe(now - first)
        if r.generated > 1:
            m.tpot.observe((now - first) / (r.generated - 1))
        m.request_success[reason] = m.request_success.get(reason, 0) + 1

    def reset_prefix_cache(self) -> bool:
        self.kv.reset_prefix_cache()
        return True

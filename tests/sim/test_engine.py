"""The engine model in virtual time: acceptance, n-gram lookup, schedules, prefix cache, KV."""

from __future__ import annotations

import random
import sys

import pytest

from specload.sim import load_profile, parse_spec_config
from specload.sim.engine import Engine, EngineConfig
from specload.sim.metrics import SimMetrics
from specload.sim.request import Request
from specload.sim.textgen import OutputText, repetition
from specload.sim.tokenizer import tokenize
from tests.conftest import REPO

sys.path.append(str(REPO / "benchmarks"))  # virtual.py: the engine in virtual time
from virtual import random_prompt, run_poisson, run_requests

TINY = load_profile("tiny")
RATES = [0.8, 0.55, 0.3, 0.15]


def _spec(**extra):
    return parse_spec_config(
        {
            "method": "draft_model",
            "num_speculative_tokens": 4,
            "synthetic_acceptance_rates": RATES,
            **extra,
        }
    )


def test_per_position_acceptance_matches_configured_rates_over_many_steps() -> None:
    run = run_poisson(EngineConfig(TINY, _spec()), 20.0, 200, input_len=64, output_len=200)
    m = run.metrics
    assert m.num_drafts > 5000
    for pos, rate in enumerate(RATES):
        assert m.accepted_per_pos[pos] / m.num_drafts == pytest.approx(rate, abs=0.02)
    assert 1 + m.num_accepted / m.num_drafts == pytest.approx(1 + sum(RATES), abs=0.05)


def test_acceptance_length_setting_gives_that_mean_length() -> None:
    spec = parse_spec_config(
        {"method": "eagle", "num_speculative_tokens": 3, "synthetic_acceptance_length": 2.2}
    )
    m = run_poisson(EngineConfig(TINY, spec), 20.0, 100, input_len=64, output_len=200).metrics
    assert 1 + m.num_accepted / m.num_drafts == pytest.approx(2.2, abs=0.05)


def _repetitive_prompt(rng: random.Random, n: int, phrase_len: int, n_phrases: int) -> list[str]:
    phrases = [random_prompt(rng, phrase_len) for _ in range(n_phrases)]
    out: list[str] = []
    while len(out) < n:
        out.extend(rng.choice(phrases))
    return out[:n]


def test_ngram_acceptance_rises_with_prompt_repetition() -> None:
    spec = parse_spec_config(
        {
            "method": "ngram",
            "num_speculative_tokens": 4,
            "prompt_lookup_min": 2,
            "prompt_lookup_max": 4,
        }
    )
    rng = random.Random(3)
    rates = []
    for prompts in (
        [random_prompt(rng, 400) for _ in range(8)],
        [_repetitive_prompt(rng, 400, 16, 12) for _ in range(8)],
        [_repetitive_prompt(rng, 400, 16, 3) for _ in range(8)],
    ):
        run = run_requests(EngineConfig(TINY, spec), prompts, [0.0] * 8, output_len=160)
        m = run.metrics
        rates.append(m.num_accepted / m.generation_tokens)  # tokens saved per output token
    assert rates[0] < 0.05 < rates[1] < rates[2]
    assert rates[2] > 0.3


def test_output_is_identical_with_and_without_speculation_and_prefix_caching() -> None:
    rng = random.Random(5)
    prompts = [_repetitive_prompt(rng, 300, 8, 6) for _ in range(6)]
    texts = []
    for spec, prefix in (
        (None, False),
        (_spec(), True),
        (parse_spec_config({"method": "ngram", "num_speculative_tokens": 5}), True),
    ):
        sinks: list[list[str]] = [[] for _ in prompts]
        engine = Engine(EngineConfig(TINY, spec, prefix_caching=prefix), SimMetrics("m", 5))
        for i, p in enumerate(prompts):
            engine.add(_req(str(i), p, 120, sinks[i]))
        t = 0.0
        while engine.has_work:
            plan = engine.plan(t)
            t += plan.duration
            engine.complete(plan, t)
        texts.append(["".join(s) for s in sinks])
    assert texts[0] == texts[1] == texts[2]
    assert len(set(texts[0])) == len(prompts)


class _ListSink:
    def __init__(self, out: list[str]) -> None:
        self.out = out

    def push(self, req, text, n_tokens, finish, now) -> None:
        self.out.append(text)


def _req(rid: str, prompt: list[str], n: int, out: list[str], seed: int = 0) -> Request:
    from specload.sim.kvcache import block_hashes
    from specload.sim.spec import NgramIndex

    r = Request(
        rid=rid,
        prompt=prompt,
        text=OutputText(prompt, seed),
        target_len=n,
        finish_reason="length",
        sink=_ListSink(out),
        arrival=0.0,
    )
    r.block_hashes = block_hashes(prompt, 16)
    r.ngram = NgramIndex(prompt, 1, 4)
    return r


def test_output_token_is_pure_function_of_prompt_seed_position() -> None:
    p = tokenize("the same prompt every time, with a few words")
    a, b, c = OutputText(p, 1), OutputText(p, 1), OutputText(p, 2)
    assert [a.token(i) for i in range(50)] == [b.token(i) for i in reversed(range(50))][::-1]
    assert [a.token(i) for i in range(50)] != [c.token(i) for i in range(50)]


def test_repetition_measure_orders_prompts() -> None:
    assert repetition(tokenize("a b c d e f g h")) == 0.0
    assert repetition(tokenize("a b c a b c a b c a b c")) > 0.5


def test_schedule_chooses_k_from_running_batch_size() -> None:
    spec = _spec(num_speculative_tokens_per_batch_size=[[1, 2, 4], [3, 1024, 0]])
    engine = Engine(EngineConfig(TINY, spec), SimMetrics("m", 4))
    rng = random.Random(0)
    engine.add(_req("a", random_prompt(rng, 32), 400, []))
    t = 0.0
    ks = []
    for _ in range(5):
        plan = engine.plan(t)
        ks.append(plan.k)
        t += plan.duration
        engine.complete(plan, t)
    assert ks[1:] == [4, 4, 4, 4]  # one running request: k = 4
    drafts_before = engine.metrics.num_draft_tokens
    for i in range(4):
        engine.add(_req(f"b{i}", random_prompt(rng, 32), 400, []))
    plan = engine.plan(t)  # admits them; running was 1 when k was chosen
    t += plan.duration
    engine.complete(plan, t)
    drafts_mid = engine.metrics.num_draft_tokens
    for _ in range(5):
        plan = engine.plan(t)
        assert plan.k == 0 and len(engine.running) == 5
        t += plan.duration
        engine.complete(plan, t)
    assert engine.metrics.num_draft_tokens == drafts_mid > drafts_before


def test_schedule_validation_follows_vllm_rules() -> None:
    for bad in ([[2, 10, 4]], [[1, 10, 4], [5, 20, 0]], [[1, 10, -1]], [[1, 10]]):
        with pytest.raises(ValueError, match="num_speculative_tokens_per_batch_size"):
            _spec(num_speculative_tokens_per_batch_size=bad)
    spec = _spec(num_speculative_tokens_per_batch_size=[[1, 4, 4], [5, 8, 2], [9, 1024, 0]])
    assert [spec.k_for_batch(n) for n in (1, 4, 5, 8, 9)] == [4, 4, 2, 2, 0]


def test_schedule_gaps_and_tail_keep_the_last_k_like_vllm() -> None:
    # vLLM sorts the ranges, lets a gap or a batch past the last range keep the k of the
    # last range below it, and clamps k to num_speculative_tokens (here 4).
    spec = _spec(num_speculative_tokens_per_batch_size=[[6, 8, 1], [1, 4, 9]])
    assert [spec.k_for_batch(n) for n in (1, 4, 5, 6, 8, 50)] == [4, 4, 4, 1, 1, 1]


def test_shared_prefix_hits_cache_and_cuts_ttft_in_virtual_time() -> None:
    rng = random.Random(1)
    prefix = random_prompt(rng, 1500)
    prompts = [prefix + random_prompt(rng, 40) for _ in range(6)]
    arrivals = [i * 1.0 for i in range(6)]  # one at a time: TTFT is pure prefill
    cold = run_requests(EngineConfig(TINY), prompts, arrivals, 8, repetition=0.0)
    warm = run_requests(
        EngineConfig(TINY, prefix_caching=True), prompts, arrivals, 8, repetition=0.0
    )
    assert warm.metrics.prefix_hits >= 5 * 1488
    assert cold.metrics.prefix_hits == 0
    assert warm.results[0].ttft_s == pytest.approx(cold.results[0].ttft_s)
    for c, w in zip(cold.results[1:], warm.results[1:], strict=False):
        assert w.ttft_s < 0.5 * c.ttft_s


def test_full_kv_budget_queues_requests_and_preempts_without_losing_output() -> None:
    rng = random.Random(2)
    prompts = [random_prompt(rng, 200) for _ in range(8)]
    cfg = EngineConfig(TINY, num_gpu_blocks=64)  # 1024 tokens of KV
    engine = Engine(cfg, SimMetrics("m"))
    outs: list[list[str]] = [[] for _ in prompts]
    for i, p in enumerate(prompts):
        engine.add(_req(str(i), p, 300, outs[i]))
    t, max_waiting = 0.0, 0
    while engine.has_work:
        plan = engine.plan(t)
        max_waiting = max(max_waiting, len(engine.waiting))
        t += plan.duration
        engine.complete(plan, t)
    assert max_waiting > 0
    assert engine.metrics.preemptions > 0
    ref = [OutputText(p, 0) for p in prompts]
    assert ["".join(o) for o in outs] == ["".join(r.token(i) for i in range(300)) for r in ref]
    assert engine.kv.used == 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_mixed_load_keeps_kv_accounting_and_output_exact(seed: int) -> None:
    """Shared prefixes, a tight KV budget (preemption), n-gram drafting: nothing is lost."""
    rng = random.Random(seed)
    spec = parse_spec_config(
        {
            "method": "ngram",
            "num_speculative_tokens": 3,
            "prompt_lookup_min": 1,
            "prompt_lookup_max": 3,
        }
    )
    cfg = EngineConfig(TINY, spec, prefix_caching=True, num_gpu_blocks=96, seed=seed)
    engine = Engine(cfg, SimMetrics("m", 3))
    prefixes = [random_prompt(rng, rng.randint(16, 200)) for _ in range(3)]
    reqs, outs, t, added = [], [], 0.0, 0
    while added < 30 or engine.has_work:
        if added < 30 and rng.random() < 0.3:
            prompt = rng.choice(prefixes) + random_prompt(rng, rng.randint(1, 120))
            outs.append([])
            reqs.append((prompt, n := rng.randint(1, 150)))
            engine.add(_req(str(added), prompt, n, outs[-1]))
            added += 1
        plan = engine.plan(t)
        kv = engine.kv
        assert 0 <= kv.used <= kv.num_blocks
        assert kv.used + len(kv._lru) <= kv.num_blocks
        t += plan.duration
        engine.complete(plan, t)
    assert engine.kv.used == 0
    for (prompt, n), out in zip(reqs, outs, strict=False):
        ref = OutputText(prompt, 0)
        assert "".join(out) == "".join(ref.token(i) for i in range(n))
    assert engine.metrics.prefix_hits > 0

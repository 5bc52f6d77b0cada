"""API behaviour over real HTTP: tokenize agreement, determinism, spec, prefix cache, KV queue."""

from __future__ import annotations

import json
import threading
import time

import pytest

from tests.sim.helpers import MODEL, chat, get_json, metrics, post

SPEC = '{"method":"draft_model","num_speculative_tokens":4,"synthetic_acceptance_rates":[0.8,0.55,0.3,0.15]}'


def test_tokenize_count_equals_usage_prompt_tokens(sim) -> None:
    msgs = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Count   these, tokens: exactly! 123 héllo"},
    ]
    status, raw = post(sim.url + "/tokenize", {"model": MODEL, "messages": msgs})
    assert status == 200
    count = json.loads(raw)["count"]
    _, body = post(
        sim.url + "/v1/chat/completions", {"model": MODEL, "messages": msgs, "max_tokens": 1}
    )
    assert json.loads(body)["usage"]["prompt_tokens"] == count
    status, raw = post(sim.url + "/tokenize", {"prompt": "a b", "return_token_strs": True})
    assert json.loads(raw)["token_strs"] == ["a", " b"]


def test_same_prompt_same_text_across_spec_and_prefix_settings(sim_factory) -> None:
    prompt = "repeat after me: the cache the batch the cache the batch " * 5
    texts = []
    for args in (
        [],
        ["--speculative-config", SPEC, "--enable-prefix-caching"],
        ["--speculative-config", '{"method":"ngram","num_speculative_tokens":3}'],
    ):
        s = sim_factory("--profile", "tiny", *args)
        out = [chat(s.url, prompt, 60)["choices"][0]["message"]["content"] for _ in range(2)]
        assert out[0] == out[1]
        texts.append(out[0])
    assert texts[0] == texts[1] == texts[2]
    assert chat(s.url, prompt, 60, seed=7)["choices"][0]["message"]["content"] != texts[0]


def test_honours_max_tokens_min_tokens_and_stop(sim) -> None:
    body = chat(sim.url, "hello", 9)
    assert body["usage"]["completion_tokens"] == 9
    assert body["choices"][0]["finish_reason"] == "length"
    _, raw = post(
        sim.url + "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": [{"role": "user", "content": "hello"}],
            "max_tokens": 600,
            "min_tokens": 550,
        },
    )
    assert json.loads(raw)["usage"]["completion_tokens"] >= 550
    full = chat(sim.url, "stop test", 80)["choices"][0]["message"]["content"]
    word = full.split()[5]
    cut = chat(sim.url, "stop test", 80, stop=[word])["choices"][0]
    assert cut["finish_reason"] == "stop" and cut["stop_reason"] == word
    assert word not in cut["message"]["content"]
    assert full.startswith(cut["message"]["content"])


def test_acceptance_counters_match_configured_rates(sim_factory) -> None:
    s = sim_factory("--profile", "tiny", "--speculative-config", SPEC)
    threads = [threading.Thread(target=chat, args=(s.url, f"prompt {i}", 300)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    m = metrics(s.url)
    drafts = m["vllm:spec_decode_num_drafts_total"]
    assert drafts > 500
    assert m["vllm:spec_decode_num_draft_tokens_total"] == pytest.approx(4 * drafts, rel=0.02)
    for pos, rate in enumerate([0.8, 0.55, 0.3, 0.15]):
        got = m[f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{pos}"}}']
        assert got / drafts == pytest.approx(rate, abs=0.07)
    assert m["vllm:generation_tokens_total"] == 8 * 300


def test_shared_prefix_raises_prefix_hits_and_reports_cached_tokens(sim_factory) -> None:
    s = sim_factory("--profile", "tiny", "--enable-prefix-caching")
    prefix = "shared system prompt words " * 100
    first = chat(s.url, prefix + "question one", 4)
    second = chat(s.url, prefix + "question two", 4)
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] >= 384
    m = metrics(s.url)
    assert m["vllm:prefix_cache_hits_total"] >= 384
    assert m["vllm:prefix_cache_queries_total"] == (
        first["usage"]["prompt_tokens"] + second["usage"]["prompt_tokens"]
    )
    assert post(s.url + "/reset_prefix_cache", b"")[0] == 200
    third = chat(s.url, prefix + "question three", 4)
    assert third["usage"]["prompt_tokens_details"]["cached_tokens"] == 0


def test_full_kv_budget_queues_requests(sim_factory) -> None:
    s = sim_factory("--profile", "tiny", "--num-gpu-blocks-override", "64")
    threads = [threading.Thread(target=chat, args=(s.url, "word " * 300, 200)) for _ in range(6)]
    for t in threads:
        t.start()
    max_waiting = 0.0
    while any(t.is_alive() for t in threads):
        max_waiting = max(max_waiting, metrics(s.url)["vllm:num_requests_waiting"])
        time.sleep(0.01)
    for t in threads:
        t.join()
    assert max_waiting > 0
    hist = metrics(s.url)
    assert hist["vllm:request_queue_time_seconds_count"] == 6


def test_metrics_carry_vllm_names_and_model_label(sim) -> None:
    chat(sim.url, "hello", 3)
    import urllib.request

    text = urllib.request.urlopen(sim.url + "/metrics").read().decode()
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:prefix_cache_queries_total",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:inter_token_latency_seconds_bucket",
        "vllm:e2e_request_latency_seconds",
        "vllm:request_queue_time_seconds",
        "vllm:request_prefill_time_seconds",
        "vllm:request_decode_time_seconds",
        "vllm:request_time_per_output_token_seconds",
        "specload_sim_step_lag_seconds",
    ):
        assert name in text, name
    assert f'model_name="{MODEL}"' in text
    assert get_json(sim.url + "/v1/models")["data"][0]["id"] == MODEL


def test_speculative_chunks_carry_several_tokens(sim_factory) -> None:
    s = sim_factory("--profile", "tiny", "--ground-truth", "--speculative-config", SPEC)
    status, _ = post(
        s.url + "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": [{"role": "user", "content": "multi"}],
            "max_tokens": 100,
            "ignore_eos": True,
            "stream": True,
        },
        headers={"X-Request-Id": "spec-1"},
    )
    assert status == 200
    truth = get_json(s.url + "/debug/requests/spec-1")
    assert sum(truth["chunk_tokens"]) == 100
    assert max(truth["chunk_tokens"]) > 1
    assert len(truth["chunk_tokens"]) < 80  # mean acceptance length 2.8

"""The simulator's stream, as the official openai SDK and raw SSE see it."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import httpx
import openai
import pytest

MODEL = "specload-sim"
MSGS = [{"role": "user", "content": "Tell me about caches and batches."}]


def _raw_stream(url: str, body: dict, headers: dict | None = None) -> list[str]:
    req = urllib.request.Request(
        url + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        text = r.read().decode()
    return [line[len("data: ") :] for line in text.split("\n\n") if line.startswith("data: ")]


def test_openai_sdk_streams_content_and_usage(sim) -> None:
    client = openai.OpenAI(base_url=sim.url + "/v1", api_key="x")
    stream = client.chat.completions.create(
        model=MODEL,
        messages=MSGS,
        max_tokens=12,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[0].choices[0].delta.content == ""
    content = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert content, "no content chunks"
    assert chunks[-2].choices[0].finish_reason == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 12
    assert all(c.choices[0].finish_reason is None for c in chunks[1:-2])


def test_raw_sequence_is_role_content_finish_usage_done(sim) -> None:
    events = _raw_stream(
        sim.url,
        {
            "model": MODEL,
            "messages": MSGS,
            "max_tokens": 5,
            "stream": True,
            "ignore_eos": True,
            "stream_options": {"include_usage": True},
        },
    )
    assert events[-1] == "[DONE]"
    objs = [json.loads(e) for e in events[:-1]]
    assert objs[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert objs[-1]["choices"] == []
    assert objs[-1]["usage"]["completion_tokens"] == 5
    assert objs[-2]["choices"][0]["finish_reason"] == "length"
    assert len({o["id"] for o in objs}) == 1
    assert all(o["object"] == "chat.completion.chunk" for o in objs)


def test_usage_chunk_absent_without_include_usage(sim) -> None:
    events = _raw_stream(
        sim.url, {"model": MODEL, "messages": MSGS, "max_tokens": 3, "stream": True}
    )
    objs = [json.loads(e) for e in events[:-1]]
    assert all(o["choices"] for o in objs)


def test_non_stream_and_stream_give_same_text(sim) -> None:
    client = openai.OpenAI(base_url=sim.url + "/v1", api_key="x")
    full = client.chat.completions.create(
        model=MODEL, messages=MSGS, max_tokens=20, extra_body={"ignore_eos": True}
    )
    parts = []
    for c in client.chat.completions.create(
        model=MODEL, messages=MSGS, max_tokens=20, stream=True, extra_body={"ignore_eos": True}
    ):
        if c.choices and c.choices[0].delta.content:
            parts.append(c.choices[0].delta.content)
    assert full.choices[0].message.content == "".join(parts)
    assert full.usage.completion_tokens == 20


def test_ground_truth_records_each_content_chunk(sim_factory) -> None:
    s = sim_factory("--profile", "tiny", "--ground-truth")
    events = _raw_stream(
        s.url,
        {"model": MODEL, "messages": MSGS, "max_tokens": 6, "stream": True, "ignore_eos": True},
        headers={"X-Request-Id": "req-1"},
    )
    with urllib.request.urlopen(s.url + "/debug/requests/req-1") as r:
        truth = json.loads(r.read())
    content_chunks = len(events) - 2  # minus role chunk and [DONE]
    assert truth["output_tokens"] == 6
    assert len(truth["chunk_times"]) == content_chunks
    assert truth["first_token_at"] >= truth["arrived_at"]
    assert truth["last_token_at"] >= truth["first_token_at"]


@pytest.mark.parametrize("path", ["/health", "/v1/models", "/version", "/metrics"])
def test_info_endpoints_answer(shared_sim, path: str) -> None:
    with urllib.request.urlopen(shared_sim.url + path) as r:
        assert r.status == 200


def test_ground_truth_store_is_bounded_oldest_first(sim_factory) -> None:
    s = sim_factory("--profile", "tiny", "--ground-truth", "--ground-truth-max", "2")
    for rid in ("a", "b", "c"):
        _raw_stream(
            s.url,
            {"model": MODEL, "messages": MSGS, "max_tokens": 2, "stream": True},
            headers={"X-Request-Id": rid},
        )
    with urllib.request.urlopen(s.url + "/debug/requests") as r:
        ids = [t["request_id"] for t in json.loads(r.read())]
    assert ids == ["b", "c"]


def test_ground_truth_endpoints_404_when_off(sim) -> None:
    import urllib.error

    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(sim.url + "/debug/requests")
    assert exc.value.code == 404


def _first_two_arrivals(url: str, body: dict, out: dict, started=None) -> None:
    """Unix times at which the role chunk and the first content chunk reached us."""
    sent = time.time()
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=60) as r:
        times = []
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                times.append(time.time())
                if len(times) == 2 and started is not None:
                    started.set()  # running: keep reading so it stays in the batch
                if len(times) == 2 and started is None:
                    break
    out.update(sent=sent, role=times[0], content=times[1])


def test_role_chunk_waits_for_the_first_token_like_vllm(sim_factory) -> None:
    # vLLM sends the role-only chunk when the engine yields its first output, so a request
    # that waits in the queue gets no body bytes until it runs. One sequence at a time: the
    # second request queues behind a long first one.
    sim = sim_factory("--profile", "tiny", "--max-num-seqs", "1")
    long_body = {
        "model": MODEL,
        "messages": MSGS,
        "max_tokens": 400,
        "ignore_eos": True,
        "stream": True,
    }
    running = threading.Event()
    first = threading.Thread(target=_first_two_arrivals, args=(sim.url, long_body, {}, running))
    first.start()
    assert running.wait(30), "the first request never started streaming"
    seen: dict = {}
    _first_two_arrivals(sim.url, {**long_body, "max_tokens": 4}, seen)
    first.join(timeout=60)
    queued = seen["content"] - seen["sent"]
    assert queued > 0.1, f"the second request did not queue ({queued:.3f} s): test is moot"
    assert seen["role"] - seen["sent"] > 0.8 * queued, (
        f"role chunk after {seen['role'] - seen['sent']:.3f} s, content after {queued:.3f} s"
    )

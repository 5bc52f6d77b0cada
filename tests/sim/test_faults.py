"""Stream faults, switched on by CLI flag or at runtime through POST /debug/faults."""

from __future__ import annotations

import json

from tests.sim.helpers import MODEL, get_json, post, stream_raw

BODY = {
    "model": MODEL,
    "messages": [{"role": "user", "content": "faults"}],
    "max_tokens": 30,
    "ignore_eos": True,
    "stream": True,
    "stream_options": {"include_usage": True},
}


def _events(raw: bytes) -> list[str]:
    return [e[len("data: ") :] for e in raw.decode().split("\n\n") if e.startswith("data: ")]


def test_drop_after_n_tokens_breaks_the_stream_mid_way(sim_factory) -> None:
    s = sim_factory("--profile", "tiny", "--fault-drop-after", "5")
    raw, err = stream_raw(s.url, BODY)
    assert err is not None  # incomplete chunked body
    events = _events(raw)
    assert "[DONE]" not in events
    assert 1 <= len(events) <= 7
    # the server keeps serving after a drop
    post(s.url + "/debug/faults", {"drop_after_tokens": None})
    raw, err = stream_raw(s.url, BODY)
    assert err is None and _events(raw)[-1] == "[DONE]"


def test_malformed_line_is_injected_once(sim) -> None:
    post(sim.url + "/debug/faults", {"malformed_after_tokens": 3})
    raw, err = stream_raw(sim.url, BODY)
    assert err is None
    bad = []
    for e in _events(raw):
        if e == "[DONE]":
            continue
        try:
            json.loads(e)
        except json.JSONDecodeError:
            bad.append(e)
    assert len(bad) == 1
    assert _events(raw)[-1] == "[DONE]"


def test_no_done_ends_stream_cleanly_without_done(sim) -> None:
    post(sim.url + "/debug/faults", {"no_done": True})
    raw, err = stream_raw(sim.url, BODY)
    assert err is None
    events = _events(raw)
    assert "[DONE]" not in events
    assert json.loads(events[-1])["usage"]["completion_tokens"] == 30


def test_stall_holds_back_bytes_for_the_stall_time(sim_factory) -> None:
    s = sim_factory(
        "--profile", "tiny", "--ground-truth", "--fault-stall-after", "4", "--fault-stall-s", "0.5"
    )
    raw, err = stream_raw(s.url, BODY, headers={"X-Request-Id": "stalled"})
    assert err is None and _events(raw)[-1] == "[DONE]"
    truth = get_json(s.url + "/debug/requests/stalled")
    gaps = [b - a for a, b in zip(truth["chunk_times"], truth["chunk_times"][1:], strict=False)]
    assert max(gaps) >= 0.45
    assert truth["output_tokens"] == 30


def test_stream_fault_rate_zero_spares_every_stream(sim) -> None:
    post(sim.url + "/debug/faults", {"drop_after_tokens": 2, "stream_fault_rate": 0.0})
    raw, err = stream_raw(sim.url, BODY)
    assert err is None and _events(raw)[-1] == "[DONE]"


def test_client_leaving_mid_stream_frees_the_request(sim) -> None:
    import http.client
    import time
    from urllib.parse import urlparse

    from tests.sim.helpers import metrics

    u = urlparse(sim.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.request(
        "POST",
        "/v1/chat/completions",
        json.dumps({**BODY, "max_tokens": 3000}),
        {"Content-Type": "application/json"},
    )
    resp = conn.getresponse()
    got = b""
    while got.count(b"data: ") < 3:  # role chunk plus content: the request is running
        got += resp.read1(4096)
    assert metrics(sim.url)["vllm:num_requests_running"] == 1
    conn.close()
    deadline = time.monotonic() + 20
    while metrics(sim.url)["vllm:num_requests_running"] > 0:
        assert time.monotonic() < deadline, "aborted stream still running"
        time.sleep(0.05)
    assert metrics(sim.url)["vllm:kv_cache_usage_perc"] == 0

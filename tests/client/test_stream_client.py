"""StreamClient against scripted raw HTTP servers: what counts as content, tokens, errors."""

from __future__ import annotations

import json
import time

import gevent
import orjson
import pytest

from specload.client import (
    ChatRequest,
    ClientSettings,
    RequestCancelled,
    StreamClient,
    make_client,
)
from specload.client.contract import messages_sha256, sha256_text
from specload.core.records import RequestRecord
from tests.client.rawserver import json_response, raw_server, sse_response

MESSAGES = ({"role": "user", "content": "secret prompt text"},)


def chunk(delta: dict | None = None, finish: str | None = None, usage: dict | None = None) -> bytes:
    obj: dict = {
        "id": "c",
        "object": "chat.completion.chunk",
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        obj["usage"] = usage
    return b"data: " + orjson.dumps(obj) + b"\n\n"


DONE = b"data: [DONE]\n\n"
USAGE = {
    "prompt_tokens": 9,
    "completion_tokens": 3,
    "total_tokens": 12,
    "prompt_tokens_details": {"cached_tokens": 4},
}


def send(client: StreamClient, req: ChatRequest | None = None, rid: str = "r1") -> RequestRecord:
    req = req or ChatRequest(
        model="m", messages=MESSAGES, max_tokens=3, min_tokens=3, ignore_eos=True
    )
    return client.send(
        req,
        request_id=rid,
        worker="w1",
        step=2,
        repeat=1,
        target_qps=4.0,
        warmup=True,
        scheduled_at=time.time() - 0.5,
    )


def test_normal_stream_gives_one_full_record() -> None:
    events = [
        chunk({"role": "assistant"}),
        chunk({"content": "a"}),
        chunk({"content": "bc"}),
        chunk({"content": "d"}, finish="length"),
        chunk(None, usage=USAGE),
        DONE,
    ]
    with raw_server(sse_response(events, gap_s=0.02)) as srv:
        rec = send(StreamClient(srv.url, ClientSettings(api_key="sk-test-key", timeout_s=10)))
        head, body = srv.requests[0]
    assert rec.ok and rec.error is None and rec.status == 200
    assert (rec.request_id, rec.worker, rec.step, rec.repeat, rec.target_qps, rec.warmup) == (
        "r1",
        "w1",
        2,
        1,
        4.0,
        True,
    )
    assert rec.content_chunks == 3
    assert (rec.output_tokens, rec.tokens_source) == (3, "usage")
    assert (rec.prompt_tokens, rec.cached_tokens, rec.finish_reason) == (9, 4, "length")
    # the role-only chunk is not the first token: one gap later than it
    assert rec.ttft_s is not None and rec.ttft_s >= 0.019
    assert rec.first_token_at == pytest.approx(rec.sent_at + rec.ttft_s)
    assert rec.e2e_s == pytest.approx(rec.ttft_s + sum(rec.itl_s))
    assert len(rec.itl_s) == 2
    assert rec.tpot_s == pytest.approx((rec.e2e_s - rec.ttft_s) / 2)
    assert rec.queue_delay_s == pytest.approx(rec.sent_at - rec.scheduled_at)
    assert rec.queue_delay_s >= 0.5
    assert rec.output_sha256 == sha256_text("abcd") and rec.output_chars == 4
    assert rec.prompt_sha256 == messages_sha256(MESSAGES)[0]
    # request: include_usage, vLLM extensions, request id, bearer key
    sent = json.loads(body)
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert (sent["min_tokens"], sent["ignore_eos"], sent["max_tokens"]) == (3, True, 3)
    assert b"\r\nX-Request-Id: r1\r\n" in head
    assert b"\r\nAuthorization: Bearer sk-test-key\r\n" in head
    # privacy: no prompt/output text, never the key
    line = json.dumps(rec.to_dict())
    assert "secret prompt" not in line and "sk-test-key" not in line
    assert "prompt_text" not in rec.to_dict()


def test_no_authorization_header_without_a_key() -> None:
    with raw_server(sse_response([chunk({"content": "x"}, finish="stop"), DONE])) as srv:
        assert send(StreamClient(srv.url, ClientSettings(api_key=None, timeout_s=10))).ok
        assert b"authorization" not in srv.requests[0][0].lower()


def test_store_text_keeps_prompt_and_output() -> None:
    with raw_server(sse_response([chunk({"content": "hi"}, finish="stop"), DONE])) as srv:
        rec = send(StreamClient(srv.url, ClientSettings(timeout_s=10, store_text=True)))
    assert rec.output_text == "hi" and "secret prompt text" in (rec.prompt_text or "")


def test_reasoning_and_tool_call_deltas_count_as_content() -> None:
    call = {"index": 0, "id": "t", "function": {"name": "f", "arguments": '{"a":'}}
    more = {"index": 0, "function": {"arguments": "1}"}}
    events = [
        chunk({"role": "assistant"}),
        chunk({"reasoning_content": "think"}),
        chunk({"tool_calls": [call]}),
        chunk({"tool_calls": [more]}),
        chunk(
            {"tool_calls": [{"index": 1, "function": {"name": "g", "arguments": ""}}]},
            finish="tool_calls",
        ),
        DONE,
    ]
    with raw_server(sse_response(events)) as srv:
        rec = send(StreamClient(srv.url, ClientSettings(timeout_s=10)))
    assert rec.ok and rec.content_chunks == 4 and rec.tool_calls == 2
    assert (rec.output_tokens, rec.tokens_source) == (4, "chunks")  # no usage sent
    assert rec.finish_reason == "tool_calls"


def test_json_contract_checked_without_text() -> None:
    events = [chunk({"content": '```json\n{"a": 1'}), chunk({"content": "}\n```"}, "stop"), DONE]
    with raw_server(sse_response(events)) as srv:
        ok = send(
            StreamClient(srv.url, ClientSettings(timeout_s=10)),
            ChatRequest(model="m", messages=MESSAGES, expect_json=True, required_fields=("a", "b")),
        )
    assert ok.json_valid is True and ok.extra == {"missing_fields": ["b"]}
    with raw_server(sse_response([chunk({"content": "{oops"}, "stop"), DONE])) as srv:
        bad = send(
            StreamClient(srv.url, ClientSettings(timeout_s=10)),
            ChatRequest(model="m", messages=MESSAGES, expect_json=True),
        )
    assert bad.json_valid is False and bad.ok


def test_http_error_status_is_an_http_record() -> None:
    body = b'{"error": {"message": "overloaded", "type": "server_error"}}'
    with raw_server(json_response("503 Service Unavailable", body)) as srv:
        rec = send(StreamClient(srv.url, ClientSettings(timeout_s=10)))
    assert not rec.ok and rec.status == 503
    assert rec.error is not None and rec.error.kind == "http"
    assert "503" in rec.error.detail and "overloaded" in rec.error.detail


def test_connection_dropped_mid_stream_is_stream_broken() -> None:
    script = sse_response([chunk({"content": "a"}), chunk({"content": "b"})])[:-1]  # no end
    with raw_server(script) as srv:
        rec = send(StreamClient(srv.url, ClientSettings(timeout_s=10)))
    assert not rec.ok and rec.error is not None and rec.error.kind == "stream_broken"
    assert rec.content_chunks == 2 and rec.ttft_s is not None


def test_malformed_line_is_bad_payload() -> None:
    events = [chunk({"content": "a"}), b"data: {not json\n\n", chunk({"content": "b"}), DONE]
    with raw_server(sse_response(events)) as srv:
        rec = send(StreamClient(srv.url, ClientSettings(timeout_s=10)))
    assert not rec.ok and rec.error is not None and rec.error.kind == "bad_payload"


def test_error_event_inside_stream_is_bad_payload() -> None:
    events = [chunk({"content": "a"}), b'data: {"error": {"message": "engine died"}}\n\n']
    with raw_server(sse_response(events)) as srv:
        rec = send(StreamClient(srv.url, ClientSettings(timeout_s=10)))
    assert rec.error is not None and rec.error.kind == "bad_payload"
    assert "engine died" in rec.error.detail


def test_stall_past_timeout_is_a_timeout_record() -> None:
    script = sse_response([chunk({"content": "a"})])[:-1] + [3.0]
    with raw_server(script) as srv:
        rec = send(StreamClient(srv.url, ClientSettings(timeout_s=0.5)))
    # the whole-request deadline ended it: had the 3 s stall run out, the server would have
    # closed the stream unfinished (stream_broken)
    assert rec.error is not None and rec.error.kind == "timeout" and not rec.ok
    assert "within 0.5 s" in rec.error.detail and rec.content_chunks == 1


def test_stream_closed_after_finish_without_done_is_ok() -> None:
    with raw_server(sse_response([chunk({"content": "a"}, "stop")], chunked=False)) as srv:
        rec = send(StreamClient(srv.url, ClientSettings(timeout_s=10)))
    assert rec.ok and rec.finish_reason == "stop"


def test_connection_refused_is_a_connect_record() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rec = send(StreamClient(f"http://127.0.0.1:{port}", ClientSettings(timeout_s=5)))
    assert not rec.ok and rec.error is not None and rec.error.kind == "connect"
    assert rec.status is None and rec.ttft_s is None


def test_killed_greenlet_raises_cancelled_with_its_record() -> None:
    script = sse_response([chunk({"content": "a"})])[:-1] + [5.0]
    with raw_server(script) as srv:
        client = StreamClient(srv.url, ClientSettings(timeout_s=10))
        g = gevent.spawn(send, client)
        gevent.sleep(0.3)
        g.kill(block=True, timeout=5)
    assert isinstance(g.value, RequestCancelled) or isinstance(g.exception, RequestCancelled)
    exc = g.value if isinstance(g.value, RequestCancelled) else g.exception
    assert exc.record.error.kind == "cancelled" and exc.record.content_chunks == 1


def test_base_url_with_v1_suffix_is_accepted() -> None:
    with raw_server(sse_response([chunk({"content": "x"}, "stop"), DONE])) as srv:
        assert send(StreamClient(srv.url + "/v1", ClientSettings(timeout_s=10))).ok
        assert srv.requests[0][0].startswith(b"POST /v1/chat/completions ")


@pytest.mark.parametrize("kind", ["fast", "openai"])
def test_both_clients_agree_on_the_record(kind: str) -> None:
    events = [
        chunk({"role": "assistant"}),
        chunk({"content": "a"}),
        chunk({"content": "b"}),
        chunk({"content": "c"}, finish="length"),
        chunk(None, usage=USAGE),
        DONE,
    ]
    with raw_server(sse_response(events, gap_s=0.01)) as srv:
        rec = send(make_client(kind, srv.url, ClientSettings(api_key="k", timeout_s=10)))
        head, body = srv.requests[0]
    assert rec.ok and rec.content_chunks == 3 and rec.output_tokens == 3
    assert rec.finish_reason == "length" and rec.cached_tokens == 4
    assert rec.output_sha256 == sha256_text("abc")
    assert b"x-request-id: r1" in head.lower()
    sent = json.loads(body)
    assert sent["stream_options"] == {"include_usage": True} and sent["ignore_eos"] is True


@pytest.mark.parametrize(
    ("script", "kind"),
    [
        (json_response("500 Internal Server Error", b'{"error": {"message": "x"}}'), "http"),
        (sse_response([chunk({"content": "a"})])[:-1], "stream_broken"),
    ],
)
def test_openai_mode_maps_failures_to_kinds(script: list, kind: str) -> None:
    with raw_server(script) as srv:
        rec = send(make_client("openai", srv.url, ClientSettings(timeout_s=10)))
    assert not rec.ok and rec.error is not None and rec.error.kind == kind


def test_pooled_connection_check_does_not_yield_under_monkey_patching() -> None:
    """Between ``sent_at`` and the send, nothing may hand the CPU to other greenlets: under
    Locust (monkey-patched), geventhttpclient's own alive check sleeps, which showed up as
    15-40 ms of fake TTFT at 256 streams."""
    import subprocess
    import sys

    code = """
from gevent import monkey; monkey.patch_all()
import socket, gevent
from geventhttpclient.connectionpool import ConnectionPool
from specload.client import ClientSettings, StreamClient
pool = StreamClient("http://127.0.0.1:9", ClientSettings(timeout_s=1))._http._connection_pool
a, b = socket.socketpair()
def switched(check):
    ran = []
    gevent.spawn(ran.append, 1)
    assert check(a) is True
    return bool(ran)
print(switched(pool._is_socket_alive), switched(lambda s: ConnectionPool._is_socket_alive(pool, s)))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.split() == ["False", "True"]  # ours does not yield; the library's does


def test_non_streaming_completion_is_one_chunk() -> None:
    body = (
        b'{"id": "c", "choices": [{"index": 0, "message": {"role": "assistant", '
        b'"content": "hello"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 3, '
        b'"completion_tokens": 2, "total_tokens": 5}}'
    )
    with raw_server(json_response("200 OK", body)) as srv:
        client = StreamClient(srv.url, ClientSettings(timeout_s=10))
        rec = send(client, ChatRequest(model="m", messages=MESSAGES, stream=False))
        assert "stream_options" not in json.loads(srv.requests[0][1])
        # a server that answers a streaming request with plain JSON is read the same way
        again = send(client, ChatRequest(model="m", messages=MESSAGES))
    for r in (rec, again):
        assert r.ok and r.finish_reason == "stop" and r.output_tokens == 2
        assert r.content_chunks == 1 and r.ttft_s == pytest.approx(r.e2e_s)
        assert r.output_sha256 == sha256_text("hello")


def test_no_response_headers_before_deadline_is_timeout_not_connect() -> None:
    with raw_server([3.0]) as srv:  # accepts, reads the request, answers nothing
        rec = send(StreamClient(srv.url, ClientSettings(timeout_s=0.5)))
    assert rec.error is not None and rec.error.kind == "timeout" and rec.status is None

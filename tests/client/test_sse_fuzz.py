"""Arbitrary bytes, split at arbitrary points, never raise out of the SSE decoder or the
streaming client, and the client always classifies the request.

The decoder gets thousands of cheap examples (any split gives the same events as no split);
the client gets real sockets: a raw server on 127.0.0.1 writes each example's pieces as
separate TCP sends, so the client's line reader sees the splits too.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specload.client import ChatRequest, ClientSettings, StreamClient
from specload.client.sse import SSEDecoder
from specload.core.records import ERROR_KINDS, RequestRecord
from tests.client.rawserver import RawServer, raw_server
from tests.conftest import examples

SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)
FUZZ = settings(
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

#: Bytes that matter to SSE and to OpenAI chunks, so random streams hit real code paths.
ATOMS = [
    b"data: ",
    b"data:",
    b"\n",
    b"\r\n",
    b"\r",
    b"\n\n",
    b": comment\n",
    b"event: x\n",
    b"id: 1\n",
    b"retry: 5\n",
    b"[DONE]",
    b"{",
    b"}",
    b'"choices"',
    b"[",
    b"]",
    b":",
    b'{"choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": null}]}',
    b'{"choices": [{"index": 0, "delta": {"content": "b"}, "finish_reason": "stop"}]}',
    b'{"choices": [], "usage": {"completion_tokens": 2, "prompt_tokens": 3}}',
    b'{"choices": [{"delta": {"tool_calls": [{"index": "x"}]}}]}',
    b'{"choices": [{"delta": null, "finish_reason": 7}], "usage": {"completion_tokens": "x"}}',
    b'{"error": {"message": "boom"}}',
    b'{"choices": "x"}',
    b"\xff\xfe",
    b"\x00",
    "é".encode(),
]
streams = st.lists(st.one_of(st.sampled_from(ATOMS), st.binary(max_size=8)), max_size=24).map(
    b"".join
)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


@settings(FUZZ, max_examples=examples(600))
@given(data=streams, cuts=st.lists(st.integers(0, 400), max_size=12))
def test_decoder_never_raises_and_any_split_gives_the_same_events(
    data: bytes, cuts: list[int]
) -> None:
    whole = SSEDecoder()
    expected = whole.feed(data) + whole.flush()
    dec = SSEDecoder()
    got = [ev for piece in split(data, cuts) for ev in dec.feed(piece)] + dec.flush()
    assert got == expected
    lines = SSEDecoder()  # the client's path: whole lines through feed_line_data
    for line in data.splitlines(keepends=True):
        out = lines.feed_line_data(line)
        assert out is None or isinstance(out, bytes)


@pytest.fixture(scope="module")
def server() -> Iterator[RawServer]:
    with raw_server([]) as srv:
        yield srv


def send(srv: RawServer, script: list, timeout_s: float = 5.0) -> RequestRecord:
    srv.script = script
    client = StreamClient(srv.url, ClientSettings(timeout_s=timeout_s, concurrency=2))
    try:
        req = ChatRequest(model="m", messages=({"role": "user", "content": "fuzz"},), max_tokens=4)
        return client.send(
            req,
            request_id="fz",
            worker="w",
            step=0,
            repeat=0,
            target_qps=1.0,
            warmup=False,
            scheduled_at=time.time(),
        )
    finally:
        client.close()


def check_classified(rec: RequestRecord) -> None:
    """One well-formed record: ok exactly when there is no error, a known error kind."""
    assert isinstance(rec, RequestRecord) and rec.request_id == "fz"
    assert rec.ok == (rec.error is None)
    if rec.ok:
        assert rec.status == 200
        assert rec.ttft_s is None or rec.ttft_s >= 0
    else:
        assert rec.error.kind in ERROR_KINDS and rec.error.kind not in ("connect", "cancelled")
    orjson.dumps(rec.to_dict())  # the recorder can always write it


def chunked(pieces: list[bytes]) -> list:
    out: list = [SSE_HEAD]
    for p in pieces:
        out += [b"%x\r\n%s\r\n" % (len(p), p), 0.001]
    return out


@settings(FUZZ, max_examples=examples(300))
@given(data=streams, cuts=st.lists(st.integers(0, 400), max_size=5), end=st.booleans())
def test_client_classifies_any_sse_body_split_anywhere(
    server: RawServer, data: bytes, cuts: list[int], end: bool
) -> None:
    """A 200 event stream with an arbitrary body, ended cleanly or cut off."""
    script = chunked(split(data, cuts)) + ([b"0\r\n\r\n"] if end else [])
    rec = send(server, script)
    check_classified(rec)
    if rec.ok:  # only a stream that said it was done, or finished cleanly, is a success
        assert b"[DONE]" in data or (end and rec.finish_reason is not None)
    if not end and b"[DONE]" not in data:
        assert not rec.ok and rec.error.kind in ("stream_broken", "bad_payload")


@settings(FUZZ, max_examples=examples(30))
@given(data=st.binary(max_size=300), cuts=st.lists(st.integers(0, 300), max_size=4))
def test_client_classifies_arbitrary_response_bytes(
    server: RawServer, data: bytes, cuts: list[int]
) -> None:
    """Not even HTTP: still one classified, failed record."""
    script: list = []
    for piece in split(data, cuts):
        script += [piece, 0.001]
    rec = send(server, script)
    check_classified(rec)
    assert not rec.ok


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (
            [
                (
                    b'data: {"choices": [{"index": 0, "delta": {"content": "a"}, '
                    b'"finish_reason": "stop"}]}\n\n'
                ),
                b"data: [DONE]\n\n",
            ],
            None,
        ),
        ([b'data: {"choices": [{"index": 0, "delta": {"content": "a"}}]}\n\n'], "stream_broken"),
        (
            [
                b'data: {"choices": [{"index": 0, "delta": {"con',
                b'tent": "a"}}]}\n\n',
                b"data: {oops\n\n",
            ],
            "bad_payload",
        ),
    ],
)
def test_known_streams_split_mid_json_get_their_kind(
    server: RawServer, body: list[bytes], kind: str | None
) -> None:
    rec = send(server, chunked(body) + [b"0\r\n\r\n"])
    assert (rec.error.kind if rec.error else None) == kind

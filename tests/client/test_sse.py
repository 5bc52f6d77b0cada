"""The SSE decoder on literal stream fixtures, split at every possible byte boundary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specload.client.sse import Event, SSEDecoder

FIXTURES = Path(__file__).parent / "fixtures"


def decode_in_pieces(data: bytes, cuts: list[int]) -> list[Event]:
    dec = SSEDecoder()
    out: list[Event] = []
    prev = 0
    for cut in [*cuts, len(data)]:
        out += dec.feed(data[prev:cut])
        prev = cut
    return out + dec.flush()


def test_vllm_stream_yields_each_chunk_then_done() -> None:
    data = (FIXTURES / "vllm_lf.txt").read_bytes()
    events = decode_in_pieces(data, [])
    assert [e.is_done for e in events] == [False] * 4 + [True]
    contents = [json.loads(e.data)["choices"] for e in events[:-1]]
    assert contents[1][0]["delta"]["content"] == "Hel"
    assert json.loads(events[3].data)["usage"]["completion_tokens"] == 2


@pytest.mark.parametrize("name", ["vllm_lf.txt", "crlf_comments.txt", "multiline_fields.txt"])
def test_every_two_way_split_gives_the_same_events(name: str) -> None:
    data = (FIXTURES / name).read_bytes()
    whole = decode_in_pieces(data, [])
    for cut in range(1, len(data)):
        assert decode_in_pieces(data, [cut]) == whole, f"split at byte {cut}"


def test_byte_by_byte_feed_equals_whole_feed() -> None:
    data = (FIXTURES / "crlf_comments.txt").read_bytes()
    assert decode_in_pieces(data, list(range(1, len(data)))) == decode_in_pieces(data, [])


def test_crlf_stream_skips_comments_and_keeps_utf8() -> None:
    events = decode_in_pieces((FIXTURES / "crlf_comments.txt").read_bytes(), [])
    assert len(events) == 4
    assert json.loads(events[2].data)["choices"][0]["delta"]["content"] == "é"
    assert events[-1].is_done


def test_multiline_data_fields_and_lenient_flush() -> None:
    events = decode_in_pieces((FIXTURES / "multiline_fields.txt").read_bytes(), [])
    assert events[0] == Event(data="first line\nsecond line", event="delta", id="7", retry_ms=1500)
    assert events[1].data == "no-space"
    assert events[2].data == ""  # a bare "data" line is an empty data field
    # the event with only an event name is not dispatched; the unterminated tail is
    assert events[3].data == "tail without blank line"
    assert events[3].event == "message"
    assert len(events) == 4


def test_lone_cr_line_endings_are_line_breaks() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: a\r\rdata: b\r") == [Event(data="a")]
    assert dec.feed(b"\r") == [Event(data="b")]


def test_cr_then_lf_in_next_feed_is_one_line_end() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: x\r") == []
    assert dec.feed(b"\n\r\n") == [Event(data="x")]


def test_multibyte_character_split_between_feeds() -> None:
    raw = 'data: {"c":"日本"}\n\n'.encode()
    cut = raw.index("本".encode()) + 1
    dec = SSEDecoder()
    assert dec.feed(raw[:cut]) == []
    assert dec.feed(raw[cut:]) == [Event(data='{"c":"日本"}')]


def test_feed_line_matches_feed_for_whole_lines() -> None:
    data = (FIXTURES / "vllm_lf.txt").read_bytes()
    dec = SSEDecoder()
    by_line = [
        e for line in data.splitlines(keepends=True) if (e := dec.feed_line(line)) is not None
    ]
    assert by_line == decode_in_pieces(data, [])


def test_flush_on_clean_stream_returns_nothing() -> None:
    dec = SSEDecoder()
    dec.feed((FIXTURES / "vllm_lf.txt").read_bytes())
    assert dec.flush() == []


@pytest.mark.parametrize("name", ["vllm_lf.txt", "crlf_comments.txt", "multiline_fields.txt"])
def test_feed_line_data_returns_the_raw_data_of_each_event(name: str) -> None:
    data = (FIXTURES / name).read_bytes()
    dec = SSEDecoder()
    raw = [
        d for line in data.splitlines(keepends=True) if (d := dec.feed_line_data(line)) is not None
    ]
    # the unterminated tail of multiline_fields.txt is only returned by flush()
    expected = [e.data.encode() for e in decode_in_pieces(data, [])]
    assert raw == expected[: len(raw)]
    assert len(raw) == len(expected) - (name == "multiline_fields.txt")

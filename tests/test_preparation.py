"""Preparing the prompt set once: its wire form and hash, and a /tokenize that keeps failing.

The servers here are real HTTP servers on 127.0.0.1: one whose ``/tokenize`` answers the
probe and then fails every request with 503 (past every retry), and a port nobody listens on.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import msgpack
import pytest

from specload.scenario import parse_scenario
from specload.scenario.preparation import PreparationFailed, prepare_prompts
from specload.scenario.prompts import PromptSet, build_prompt_set
from specload.scenario.schema import Scenario


def scenario(**synthetic: object) -> Scenario:
    spec = {"input_tokens": 40, "count": 3, **synthetic}
    return parse_scenario({"steps": [1], "prompts": {"synthetic": spec}}, file="t.yaml")


class _FailsAfterProbe(BaseHTTPRequestHandler):
    """``/tokenize``: the first request (the probe) is answered, every later one gets 503."""

    calls = 0

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        cls = type(self)
        cls.calls += 1
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if cls.calls > 1:
            self.send_error(503)
            return
        out = json.dumps({"count": len(body["messages"][0]["content"].split())}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def failing_tokenize() -> Iterator[str]:
    _FailsAfterProbe.calls = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FailsAfterProbe)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_prompt_set_travels_as_msgpack_with_its_hash() -> None:
    sent = build_prompt_set(scenario(count=5))
    wire = msgpack.unpackb(msgpack.packb(sent.to_wire()))  # what Locust's zmq link carries
    got = PromptSet.from_wire(wire)
    assert [p.messages for p in got] == [p.messages for p in sent]
    assert [p.expected_prompt_tokens for p in got] == [p.expected_prompt_tokens for p in sent]
    assert got.sha256 == sent.sha256 == wire["sha256"] and len(got.sha256) == 64
    assert got.token_count_source == "estimate" and got.input_tokens == 40
    other = build_prompt_set(parse_scenario({"steps": [1], "seed": 7}, file="t.yaml"))
    assert other.sha256 != sent.sha256  # other prompts, other identity


def test_a_prompt_altered_on_the_way_is_refused() -> None:
    wire = build_prompt_set(scenario()).to_wire()
    wire["prompts"][1][0][0]["content"] += " extra"
    with pytest.raises(ValueError, match="does not match its hash"):
        PromptSet.from_wire(wire)


@pytest.mark.slow  # real retries with their delays, or a simulator start
def test_a_tokenize_that_keeps_failing_falls_back_to_the_estimate_with_a_warning(
    failing_tokenize: str,
) -> None:
    prepared = prepare_prompts(scenario(count=2), failing_tokenize, None, None)
    assert prepared.prompts.token_count_source == "estimate"
    assert len(prepared.prompts) == 2
    (warning,) = prepared.warnings
    assert "/tokenize kept failing after retries (POST" in warning and "HTTP 503" in warning
    summary = prepared.summary()
    assert summary["warnings"] == [warning] and summary["exact"] is False
    assert summary["sha256"] == build_prompt_set(scenario(count=2)).sha256
    assert _FailsAfterProbe.calls >= 1 + 5  # the probe, then one count tried five times


@pytest.mark.slow  # real retries with their delays, or a simulator start
def test_exact_tokens_fails_with_one_line_when_tokenize_keeps_failing(
    failing_tokenize: str,
) -> None:
    with pytest.raises(PreparationFailed) as err:
        prepare_prompts(scenario(count=2, exact_tokens=True), failing_tokenize, None, None)
    msg = str(err.value)
    assert "\n" not in msg and "HTTP 503" in msg and "exact_tokens: true" in msg


def test_no_tokenize_is_the_estimate_or_with_exact_tokens_a_failure(free_tcp_port: int) -> None:
    url = f"http://127.0.0.1:{free_tcp_port}"  # nobody listens: no /tokenize at all
    prepared = prepare_prompts(scenario(), url, None, None)
    assert prepared.prompts.token_count_source == "estimate" and prepared.warnings == ()
    with pytest.raises(PreparationFailed, match="has no usable /tokenize"):
        prepare_prompts(scenario(exact_tokens=True), url, None, None)


@pytest.mark.slow  # real retries with their delays, or a simulator start
def test_exact_tokens_against_the_simulator_gives_exact_counts(sim) -> None:
    prepared = prepare_prompts(scenario(count=4, exact_tokens=True), sim.url, None, None)
    assert prepared.prompts.exact and prepared.summary()["token_count_source"] == "tokenize"

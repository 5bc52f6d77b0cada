"""Prompt sets: deterministic, exact token counts (server /tokenize), prefix, repetition, files."""

from __future__ import annotations

import json
import os
import re
import socket
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from specload.core.errors import ConfigError
from specload.core.ports import free_port
from specload.scenario import load_scenario, parse_scenario
from specload.scenario.prompts import build_prompt_set, estimate_tokens, server_tokenizer

_BPE_LIKE = re.compile(r" ?\w{1,4}|\s+|[^\w\s]")


def bpe_like(text: str) -> int:
    """A tokenizer that, unlike the estimate, splits long words: counts are not 1 per word."""
    return 2 + len(_BPE_LIKE.findall(text))  # 2 = a chat template's tokens


def scenario(**synth: object):
    synthetic = {"count": 20, **synth}
    return parse_scenario({"steps": [1], "seed": 5, "prompts": {"synthetic": synthetic}})


def content(p) -> str:
    return p.messages[0]["content"]


def test_same_seed_same_prompts_other_seed_other_prompts() -> None:
    a = build_prompt_set(scenario(input_tokens=128))
    b = build_prompt_set(scenario(input_tokens=128))
    assert [content(p) for p in a] == [content(p) for p in b]
    c = build_prompt_set(
        parse_scenario({"steps": [1], "seed": 6, "prompts": {"synthetic": {"input_tokens": 128}}})
    )
    assert content(c[0]) != content(a[0])
    assert len({content(p) for p in a}) == len(a)  # prompts differ from each other


def test_exact_counts_with_a_tokenizer_that_splits_words() -> None:
    ps = build_prompt_set(scenario(input_tokens=300), bpe_like)
    assert ps.token_count_source == "tokenize" and ps.exact
    assert all(bpe_like(content(p)) == 300 == p.expected_prompt_tokens for p in ps)


def test_estimate_mode_says_so_and_hits_its_own_count() -> None:
    ps = build_prompt_set(scenario(input_tokens=200))
    assert ps.token_count_source == "estimate" and not ps.exact
    assert all(estimate_tokens(content(p)) == 200 for p in ps)


def test_shared_prefix_has_the_requested_length() -> None:
    ps = build_prompt_set(scenario(input_tokens=400, shared_prefix_tokens=250), bpe_like)
    common = os.path.commonprefix([content(p) for p in ps])
    overhead = bpe_like("")
    assert bpe_like(common) - overhead >= 250
    assert bpe_like(common) - overhead <= 250 + 8  # the instruction line may also be shared
    assert all(bpe_like(content(p)) == 400 for p in ps)


def test_no_prefix_means_prompts_diverge_early() -> None:
    ps = build_prompt_set(scenario(input_tokens=400, repetition=0.0))
    assert estimate_tokens(os.path.commonprefix([content(p) for p in ps])) < 20


def repeated_line_share(text: str) -> float:
    lines = [ln for ln in text.splitlines()[1:-1] if ln.strip()]
    seen: set[str] = set()
    dup = 0
    for ln in lines:
        dup += ln in seen
        seen.add(ln)
    return dup / len(lines)


def test_repetition_level_controls_repeated_lines() -> None:
    low = build_prompt_set(scenario(input_tokens=800, repetition=0.1))
    high = build_prompt_set(scenario(input_tokens=800, repetition=0.9))
    lo = sum(repeated_line_share(content(p)) for p in low) / len(low)
    hi = sum(repeated_line_share(content(p)) for p in high) / len(high)
    assert hi > 0.8 and lo < 0.3
    assert "Reproduce" in content(high[0])


def test_cycle_wraps_around_in_order() -> None:
    ps = build_prompt_set(scenario(input_tokens=64, count=3))
    assert [ps.cycle(n).index for n in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_input_too_short_for_prefix_and_template_is_a_config_error() -> None:
    s = scenario(input_tokens=10, shared_prefix_tokens=9)
    with pytest.raises(ConfigError) as exc:
        build_prompt_set(s, bpe_like)
    assert exc.value.path == "prompts.synthetic.input_tokens"


def test_file_prompts_in_order_with_count_limit(tmp_path: Path) -> None:
    f = tmp_path / "p.jsonl"
    f.write_text(
        '{"messages": [{"role": "user", "content": "one two"}]}\n\n'
        '{"messages": [{"role": "system", "content": "s"}, '
        '{"role": "user", "content": "x"}]}\n'
        '{"messages": [{"role": "user", "content": "three"}]}\n'
    )
    (tmp_path / "s.yaml").write_text("steps: [1]\nprompts: {file: p.jsonl, count: 2}\n")
    ps = build_prompt_set(load_scenario(tmp_path / "s.yaml"), bpe_like)
    assert len(ps) == 2
    assert ps[0].messages[0]["content"] == "one two"
    assert ps[0].expected_prompt_tokens == bpe_like("one two")
    assert ps[1].expected_prompt_tokens is None  # several messages: not counted here


@pytest.mark.parametrize(
    ("line", "where"),
    [
        ("{not json", "line 1"),
        ('{"prompt": "x"}', "line 1"),
        ('{"messages": [{"content": "x"}]}', "line 1.messages[0]"),
    ],
)
def test_bad_jsonl_names_file_and_line(tmp_path: Path, line: str, where: str) -> None:
    f = tmp_path / "p.jsonl"
    f.write_text(line + "\n")
    (tmp_path / "s.yaml").write_text("steps: [1]\nprompts: {file: p.jsonl}\n")
    with pytest.raises(ConfigError) as exc:
        build_prompt_set(load_scenario(tmp_path / "s.yaml"))
    assert exc.value.file == str(f.resolve()) and exc.value.path == where


def test_server_tokenizer_is_none_without_a_server(free_port_: int) -> None:
    assert server_tokenizer(f"http://127.0.0.1:{free_port_}", timeout_s=1.0) is None


def test_exact_counts_against_the_simulator_tokenize(sim) -> None:
    tok = server_tokenizer(sim.url)
    assert tok is not None
    ps = build_prompt_set(scenario(input_tokens=256, shared_prefix_tokens=64, count=8), tok)
    assert ps.token_count_source == "tokenize" and ps.exact
    assert all(tok(content(p)) == 256 for p in ps)


@pytest.fixture
def free_port_() -> int:
    return free_port()


def test_parallel_tokenize_fitting_is_deterministic() -> None:
    a = build_prompt_set(scenario(input_tokens=150, count=24), bpe_like)
    b = build_prompt_set(scenario(input_tokens=150, count=24), bpe_like)
    assert [content(p) for p in a] == [content(p) for p in b]
    assert [p.index for p in a] == list(range(24))


class _FlakyTokenize(BaseHTTPRequestHandler):
    """``/tokenize`` that counts words and resets every third connection (a busy server),
    never the same text twice in a row: with the preparation's threads sharing the count, a
    global "every third" could land on one text's every retry and exhaust them (a flake under
    load, not what the test asks)."""

    calls = 0
    resets = 0
    just_reset: ClassVar[set[str]] = set()
    lock = threading.Lock()

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        cls = type(self)
        raw = self.rfile.read(int(self.headers["Content-Length"]))
        body = json.loads(raw)
        key = raw.decode()
        with cls.lock:
            cls.calls += 1
            reset = cls.calls % 3 == 0 and key not in cls.just_reset
            if reset:
                cls.just_reset.add(key)
                cls.resets += 1
            else:
                cls.just_reset.discard(key)
        if reset:  # RST instead of an answer
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return
        text = body["messages"][0]["content"] if "messages" in body else body["prompt"]
        out = json.dumps({"count": len(text.split())}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except OSError:  # the connection we reset ourselves
            self.close_connection = True

    def log_message(self, *_args: object) -> None:
        pass


def test_a_tokenize_that_resets_every_third_connection_still_gives_exact_counts() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FlakyTokenize)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        tok = server_tokenizer(f"http://127.0.0.1:{server.server_address[1]}")
        assert tok is not None
        ps = build_prompt_set(scenario(input_tokens=64, count=12), tok)
    finally:
        server.shutdown()
        server.server_close()
    assert _FlakyTokenize.resets >= 5  # the preparation met resets, and came through them
    assert ps.token_count_source == "tokenize" and ps.exact
    assert all(len(content(p).split()) == 64 for p in ps)

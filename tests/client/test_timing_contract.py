"""Timing formulas (vLLM's definitions) and the output contract checks."""

from __future__ import annotations

import pytest

from specload.client.contract import check_output, messages_sha256, sha256_text
from specload.client.timing import StreamTiming, e2e_s, itl_s, tpot_s, ttft_s


def test_ttft_tpot_e2e_follow_vllm_definitions() -> None:
    tm = StreamTiming(sent_at=100.0)
    for t in (100.2, 100.3, 100.5, 100.6):
        tm.content(t)
    ttft, tpot, e2e = tm.summary(output_tokens=7)
    assert ttft == pytest.approx(0.2) and e2e == pytest.approx(0.6)
    assert tpot == pytest.approx((0.6 - 0.2) / 6)  # per token, not per chunk
    assert itl_s(tm.chunk_times) == pytest.approx([0.1, 0.2, 0.1])


def test_no_tpot_for_one_token_and_nothing_without_content() -> None:
    assert tpot_s(0.1, 0.1, 1) is None and tpot_s(0.1, 0.2, None) is None
    assert ttft_s(1.0, None) is None and e2e_s(1.0, None) is None
    assert StreamTiming(sent_at=1.0).summary(0) == (None, None, None)


def test_json_contract_with_fence_and_missing_fields() -> None:
    r = check_output('```json\n{"a": 1, "b": 2}\n```', want_json=True, required_fields=("a", "c"))
    assert r.json_valid is True and r.missing_fields == ("c",)
    assert check_output("[1, 2]", want_json=True, required_fields=("a",)).missing_fields == ("a",)
    bad = check_output("{no", want_json=True)
    assert bad.json_valid is False
    assert check_output("anything", want_json=False).json_valid is None


def test_hashes_are_stable_and_text_free() -> None:
    msgs = [{"role": "user", "content": "hello"}]
    h, chars = messages_sha256(msgs)
    assert (h, chars) == messages_sha256([{"content": "hello", "role": "user"}])  # key order
    assert chars == 5 and len(h) == 64 and "hello" not in h
    assert sha256_text("x") != sha256_text("y")

"""Prompt-lookup match rate: high on repetitive traffic, near zero on fresh text, vLLM's rule."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specload.client.lookup import (
    LookupMatcher,
    SplitTokenizer,
    WordTokenizer,
    load_tokenizer,
    match_rate_of,
    prompt_text,
)
from specload.core.errors import ConfigError
from tests.conftest import examples

CODE = """def load(path):
    with open(path) as fh:
        return json.load(fh)


def save(path, data):
    with open(path, "w") as fh:
        json.dump(data, fh, indent=2)
"""

VOCAB = [f"w{i}" for i in range(5000)]


def fresh_text(n_words: int, seed: int) -> str:
    """Words never repeated: nothing for an n-gram drafter to copy."""
    rng = random.Random(seed)
    return " ".join(rng.sample(VOCAB, n_words))


def bpe_tokenizer(tmp_path: Path) -> SplitTokenizer:
    """A real byte-level BPE trained in memory and saved as tokenizer.json (no download)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([CODE] * 20 + [fresh_text(300, s) for s in range(5)], trainer)
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    return load_tokenizer(path)


def test_code_edit_that_copies_the_prompt_matches_most_tokens() -> None:
    edited = CODE.replace("load", "read").replace("save", "write")
    result = match_rate_of([f"Rename load to read and save to write:\n{CODE}"], edited)
    assert result.method == "words"
    assert result.output_tokens > 40
    assert result.match_rate is not None and result.match_rate > 0.7


def test_fresh_text_unrelated_to_the_prompt_matches_almost_nothing() -> None:
    result = match_rate_of([fresh_text(200, 1)], fresh_text(300, 2))
    assert result.output_tokens == 300
    assert result.match_rate is not None and result.match_rate < 0.02


def test_output_that_repeats_itself_matches_from_its_own_earlier_tokens() -> None:
    chorus = "we will sail the river at dawn and sing the old song. "
    result = match_rate_of(["Write a song."], chorus * 6)
    # The first verse is new; each repeat is predictable from the one before it.
    assert result.match_rate is not None and result.match_rate > 0.75


def test_longest_ngram_wins_over_a_shorter_earlier_match() -> None:
    # vLLM: the longest suffix in min..max that occurred before, at its earliest occurrence.
    ctx = [7, 2, 3, 9, 8, 2, 3, 5, 8, 2, 3]
    hit = LookupMatcher(min_n=2, max_n=3)
    hit.feed_tokens(ctx)
    before = hit.result().matched_tokens
    hit.feed_tokens([5])  # (8, 2, 3) was followed by 5
    assert hit.result().matched_tokens == before + 1
    miss = LookupMatcher(min_n=2, max_n=3)
    miss.feed_tokens(ctx)
    miss.feed_tokens([9])  # (2, 3) alone would say 9, but the longer match says 5
    assert miss.result().matched_tokens == before


def test_the_earliest_occurrence_proposes_the_next_token() -> None:
    ctx = [2, 3, 9, 2, 3, 5, 2, 3]
    m = LookupMatcher(min_n=2, max_n=2)
    m.feed_tokens(ctx)
    before = m.result().matched_tokens
    m.feed_tokens([9])
    assert m.result().matched_tokens == before + 1


def test_ngrams_shorter_than_the_minimum_do_not_count() -> None:
    # "a b" then "a": with min 2, the single token "a" is not enough to propose "b".
    loose = match_rate_of(["alpha beta"], "alpha beta", min_n=1, max_n=3)
    strict = match_rate_of(["alpha beta"], "alpha beta", min_n=2, max_n=3)
    assert loose.matched_tokens > strict.matched_tokens


def test_a_match_never_spans_two_messages() -> None:
    # Joined, " b" is followed by " c"; split into two messages, " b" ends the first one.
    split = match_rate_of(["a b", " c d"], " b c", min_n=1, max_n=1)
    joined = match_rate_of(["a b c d"], " b c", min_n=1, max_n=1)
    assert joined.matched_tokens == 1
    assert split.matched_tokens == 0


@settings(max_examples=examples(40), deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=len(CODE)), max_size=30))
def test_any_chunking_of_the_stream_gives_the_one_shot_result(cuts: list[int]) -> None:
    edges = sorted({0, len(CODE), *cuts})
    m = LookupMatcher([CODE])
    for a, b in itertools.pairwise(edges):
        m.feed(CODE[a:b])
    assert m.finish() == match_rate_of([CODE], CODE)


def test_a_real_tokenizer_is_used_and_named_when_given(tmp_path: Path) -> None:
    tok = bpe_tokenizer(tmp_path)
    assert tok.method == "tokenizer"
    echoed = match_rate_of([CODE], CODE, tok)
    fresh = match_rate_of([CODE], fresh_text(200, 3), tok)
    assert echoed.method == "tokenizer"
    assert echoed.output_tokens == len(tok.encode(CODE))
    assert echoed.match_rate is not None and echoed.match_rate > 0.9
    assert fresh.match_rate is not None and fresh.match_rate < 0.1


def test_tokenizer_streaming_char_by_char_equals_one_shot(tmp_path: Path) -> None:
    tok = bpe_tokenizer(tmp_path)
    text = CODE + fresh_text(40, 4)
    m = LookupMatcher(["Repeat:\n" + CODE], tok)
    for ch in text:
        m.feed(ch)
    assert m.finish() == match_rate_of(["Repeat:\n" + CODE], text, tok)


def test_no_output_has_no_rate() -> None:
    m = LookupMatcher(["hello there"])
    assert m.finish().match_rate is None
    assert m.method == "words"


def test_word_tokenizer_holds_back_a_word_the_next_chunk_may_extend() -> None:
    ids, tail = WordTokenizer().split("hello wor")
    assert len(ids) == 1 and tail == " wor"


def test_prompt_text_reads_strings_and_text_parts() -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    ]
    assert prompt_text(messages) == ["be brief", "ab"]


@pytest.mark.parametrize(("lo", "hi"), [(0, 3), (4, 2)])
def test_bad_lookup_window_is_a_config_error(lo: int, hi: int) -> None:
    with pytest.raises(ConfigError, match="prompt_lookup_min"):
        LookupMatcher(min_n=lo, max_n=hi)


def test_missing_or_bad_tokenizer_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no tokenizer.json"):
        load_tokenizer(tmp_path / "nowhere")
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not a tokenizers JSON"):
        load_tokenizer(tmp_path)


def vllm_next_token(ctx: list[int], min_n: int, max_n: int) -> int | None:
    """Brute-force vLLM rule: longest suffix (min..max) seen before, earliest occurrence."""
    p = len(ctx)
    for n in range(min(max_n, p), min_n - 1, -1):
        suffix = ctx[p - n :]
        for start in range(p - n):
            if ctx[start : start + n] == suffix:
                return ctx[start + n]
    return None


@settings(max_examples=examples(200), deadline=None)
@given(
    prompt=st.lists(st.integers(0, 3), max_size=30),
    output=st.lists(st.integers(0, 3), min_size=1, max_size=40),
    lo=st.integers(1, 3),
    span=st.integers(0, 3),
)
def test_matches_a_brute_force_replay_of_vllms_proposer(
    prompt: list[int], output: list[int], lo: int, span: int
) -> None:
    hi = lo + span
    expected = 0
    for i, tok in enumerate(output):
        expected += vllm_next_token(prompt + output[:i], lo, hi) == tok
    m = LookupMatcher(min_n=lo, max_n=hi, prompt_ids=prompt)
    m.feed_tokens(output)
    assert m.result().matched_tokens == expected
    assert m.result().output_tokens == len(output)


def test_an_endless_word_is_cut_instead_of_retokenized_forever() -> None:
    blob = "QUJD" * 2000  # 8,000 characters without a space, streamed 4 at a time
    m = LookupMatcher(["here is a blob"])
    for i in range(0, len(blob), 4):
        m.feed(blob[i : i + 4])
    result = m.finish()
    # Cut into pieces of bounded size: many tokens, and the repeats of a piece match.
    assert result.output_tokens > 30
    assert len(m._pending) == 0


@pytest.mark.parametrize("kind", ["fast", "openai"])
def test_every_client_record_carries_the_rate_computed_while_streaming(sim, kind: str) -> None:
    """Real client, real simulator: the per-chunk rate equals the one-shot rate of the text."""
    import json
    import time
    import urllib.request

    from specload.client import ChatRequest, ClientSettings, make_client

    with urllib.request.urlopen(sim.url + "/v1/models", timeout=5) as r:
        model = json.loads(r.read())["data"][0]["id"]
    messages = [{"role": "system", "content": "Echo."}, {"role": "user", "content": CODE}]
    req = ChatRequest(model=model, messages=messages, max_tokens=64, min_tokens=64, ignore_eos=True)
    client = make_client(kind, sim.url, ClientSettings(timeout_s=30, store_text=True))
    rec = client.send(
        req,
        request_id=f"lookup-{kind}",
        worker="t",
        step=0,
        repeat=0,
        target_qps=1.0,
        warmup=False,
        scheduled_at=time.time(),
    )
    assert rec.ok and rec.output_text
    assert rec.content_chunks > 10  # really streamed, chunk by chunk
    expected = match_rate_of(prompt_text(messages), rec.output_text)
    assert rec.lookup_match_rate == expected.match_rate
    assert rec.lookup_match_rate is not None and 0.0 <= rec.lookup_match_rate <= 1.0


def test_failed_request_without_output_has_no_rate() -> None:
    from specload.client.assemble import RecordBuilder
    from specload.client.request import ChatRequest, RecordMeta
    from specload.core.records import ErrorInfo

    req = ChatRequest(model="m", messages=[{"role": "user", "content": "hi"}])
    meta = RecordMeta("r", "w", 0, 0, 1.0, False, 0.0)
    rec = RecordBuilder(req, meta, 0.0).build(ErrorInfo("connect", "refused"), 0.1)
    assert rec.lookup_match_rate is None


def test_record_builder_feeds_each_chunk_to_the_matcher() -> None:
    from specload.client.assemble import RecordBuilder
    from specload.client.request import ChatRequest, RecordMeta

    req = ChatRequest(model="m", messages=[{"role": "user", "content": CODE}])
    b = RecordBuilder(req, RecordMeta("r", "w", 0, 0, 1.0, False, 0.0), 0.0)
    for i, piece in enumerate(CODE[j : j + 5] for j in range(0, len(CODE), 5)):
        b.on_chunk({"choices": [{"delta": {"content": piece}}]}, 0.01 * (i + 1))
    b.on_chunk({"choices": [{"delta": {}, "finish_reason": "stop"}]}, 1.0)
    b.status = 200
    rec = b.build(None, 1.0)
    assert rec.lookup_match_rate == match_rate_of([CODE], CODE).match_rate
    assert rec.lookup_match_rate is not None and rec.lookup_match_rate > 0.9

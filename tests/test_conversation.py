"""Multi-turn conversations (``scenario/conversation.py`` and the load process's turns)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from specload.analysis.compare import compare_runs
from specload.core.errors import ConfigError
from specload.recorder import read_run
from specload.scenario import parse_scenario
from tests.conftest import specload_run

BASE = {"steps": [2], "prompts": {"synthetic": {"input_tokens": 64, "count": 10}}}


def test_conversation_keys_and_think_times() -> None:
    sc = parse_scenario(
        {**BASE, "conversation": {"turns": 3, "think_time_s": {"dist": "exponential", "mean": 2}}},
        file="s.yaml",
    )
    conv = sc.conversation
    assert conv is not None and conv.turns == 3
    draws = [conv.think_time(0, f"c{i}", 1) for i in range(4000)]
    assert statistics.fmean(draws) == pytest.approx(2.0, rel=0.05)
    assert conv.think_time(0, "c1", 1) == conv.think_time(0, "c1", 1)  # seeded
    assert parse_scenario(json.loads(json.dumps(sc.to_dict())), file="s") == sc
    uni = parse_scenario(
        {
            **BASE,
            "conversation": {"turns": 2, "think_time_s": {"dist": "uniform", "min": 1, "max": 2}},
        },
        file="s",
    ).conversation
    assert uni is not None and all(1 <= uni.think_time(3, f"c{i}", 1) <= 2 for i in range(100))
    assert conv.follow_up(0, 4, 2) == conv.follow_up(0, 4, 2) != conv.follow_up(0, 4, 3)


@pytest.mark.parametrize(
    ("conversation", "path", "words"),
    [
        ({"turns": 1}, "conversation.turns", "expected an integer >= 2"),
        ({"turns": 2, "think": 1}, "conversation.think", "unknown key"),
        ({"turns": 2, "think_time_s": -1}, "conversation.think_time_s", "seconds >= 0"),
        ({"turns": 2, "think_time_s": {"dist": "gauss"}}, "conversation.think_time_s.dist", "expected one of"),
        ("yes", "conversation", "expected {turns: N"),
    ],
)  # fmt: skip
def test_bad_conversations_name_the_key(conversation: object, path: str, words: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_scenario({**BASE, "conversation": conversation}, file="s.yaml")
    assert str(exc.value).startswith(f"s.yaml: {path}: ") and words in str(exc.value)


@pytest.mark.slow
def test_turns_resend_the_history_and_hit_the_prefix_cache(sim_factory, tmp_path: Path) -> None:
    """Three-turn conversations on the simulator with prefix caching: each turn's prompt is
    the last one plus the answer and a follow-up, later turns reuse cached blocks, every
    request sent has its record, and no answer text is written."""
    (tmp_path / "s.yaml").write_text(
        "name: chat3\nsteps: [3]\nstep_duration_s: 3\nwarmup_s: 0.5\narrival: constant\n"
        "max_tokens: 24\nmax_concurrency: 32\nrequest_timeout_s: 30\n"
        "conversation: {turns: 3, think_time_s: 0.2}\n"
        "prompts: {synthetic: {input_tokens: 96, count: 8}}\n"
    )
    sim = sim_factory("--profile", "tiny", "--enable-prefix-caching")
    out = specload_run(sim.url, tmp_path / "s.yaml", "chat", tmp_path / "run")
    run = read_run(out)
    records = list(run.record_dicts())
    assert run.meta.counts["sent"] == run.meta.counts["recorded"] == len(records)
    convs: dict[str, list[dict]] = {}
    for r in records:
        assert r["ok"], r.get("error")
        convs.setdefault(r["conversation_id"], []).append(r)
    starts = [r for r in records if r["turn"] == 1]
    assert len(convs) == len(starts) >= 8
    full = [sorted(c, key=lambda r: r["turn"]) for c in convs.values() if len(c) == 3]
    assert len(full) >= 5, {k: len(v) for k, v in convs.items()}
    for turns in full:
        assert [r["turn"] for r in turns] == [1, 2, 3]
        assert len({r["prompt_index"] for r in turns}) == 1
        tokens = [r["prompt_tokens"] for r in turns]
        assert tokens[0] < tokens[1] < tokens[2]  # history + answer (24) + follow-up
        assert tokens[1] - tokens[0] > 24
        assert all(r["cached_tokens"] and r["cached_tokens"] >= 64 for r in turns[1:])
        for a, b in zip(turns, turns[1:], strict=False):  # after the answer and the think time
            assert b["scheduled_at"] == pytest.approx(a["done_at"] + 0.2, abs=0.01)
    text = (out / "requests.jsonl").read_text()
    assert "_answer" not in text and "Thanks. Now" not in text and "output_text" not in text
    c = compare_runs([out], bootstrap=100)
    by_turn = {a.name: a for a in c.classes}
    assert set(by_turn) == {"turn 1", "turn 2", "turn 3"} and by_turn["turn 3"].kind == "turn"
    ttft = {n: a.steps["chat"][0].latency["ttft_p50"].value for n, a in by_turn.items()}
    assert all(v is not None and v > 0 for v in ttft.values())

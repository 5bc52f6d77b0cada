"""Trace replay: traces read in both formats, the schedule in speedups, prompts and pacing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specload.core.errors import ConfigError
from specload.core.pacer import Pacer
from specload.recorder import read_run
from specload.scenario import load_scenario, parse_scenario
from specload.scenario.prompts import PromptSet, build_prompt_set, estimate_tokens
from specload.scenario.trace import read_trace
from tests.conftest import REPO, specload_run


def _jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_both_formats_are_read_relative_to_the_first_request_in_time_order(
    tmp_path: Path,
) -> None:
    spec = read_trace(str(_jsonl(tmp_path / "a.jsonl", [
        {"timestamp": 12.5, "input_tokens": 10, "output_tokens": 5, "category": "chat"},
        {"timestamp": 10.0, "input_tokens": 20, "output_tokens": 6},
    ])))  # fmt: skip
    assert spec.format == "specload"
    assert [(e.at_s, e.input_tokens, e.category) for e in spec.entries] == [
        (0.0, 20, None),
        (2.5, 10, "chat"),
    ]
    assert spec.span_s == pytest.approx(5.0) and spec.rate_qps == pytest.approx(0.4)
    moon = read_trace(str(REPO / "scenarios" / "traces" / "mooncake-sample.jsonl"))
    assert moon.format == "mooncake" and len(moon.entries) == 120
    assert moon.entries[2].at_s == pytest.approx(3.161 - 0.546)  # milliseconds
    assert all(len(e.hash_ids) == -(-e.input_tokens // 512) for e in moon.entries)


@pytest.mark.parametrize(
    ("rows", "where", "words"),
    [
        ([], None, "no requests"),
        ([{"ts": 1}], "line 1", "unknown trace format (found ts;"),
        ([{"timestamp": 1, "input_tokens": 5}], "line 1.output_tokens", "integer >= 1"),
        ([{"timestamp": -1, "input_tokens": 5, "output_tokens": 5}], "line 1.timestamp", ">= 0"),
        ([{"timestamp": 1, "input_length": 5, "output_length": 5, "hash_ids": ["a"]}],
         "line 1.hash_ids", "list of integers"),
    ],
)  # fmt: skip
def test_bad_traces_name_the_line_and_what_was_expected(
    tmp_path: Path, rows: list[object], where: str | None, words: str
) -> None:
    f = _jsonl(tmp_path / "t.jsonl", rows)
    with pytest.raises(ConfigError) as exc:
        read_trace(str(f))
    assert str(exc.value).startswith(f"{f}: " + (f"{where}: " if where else ""))
    assert words in str(exc.value)


def _scenario(tmp_path: Path, trace: Path, **extra: object) -> dict[str, object]:
    return {"steps": [1, 2], "arrival": "trace", "trace": str(trace), "warmup_s": 0.5, **extra}


def test_steps_are_speedups_and_a_workers_copy_needs_no_file(tmp_path: Path) -> None:
    rows = [{"timestamp": t, "input_tokens": 40, "output_tokens": 8} for t in (0, 1, 2, 3)]
    trace = _jsonl(tmp_path / "t.jsonl", rows)
    sc = parse_scenario(_scenario(tmp_path, trace, trace_speedup=2.0), file="s.yaml")
    plans = sc.schedule()
    # span 4 s (last at 3 s plus a mean gap), rate 1 req/s; speedups 1x2 and 2x2
    assert [(p.target_qps, p.warmup_s + p.duration_s) for p in plans] == [(2.0, 2.0), (4.0, 1.0)]
    trace.unlink()  # a worker on another machine has no trace file: run.json's copy suffices
    again = parse_scenario(json.loads(json.dumps(sc.to_dict())), file="<run>")
    assert again.schedule() == plans and again.trace_info == sc.trace_info


def test_trace_keys_are_checked(tmp_path: Path) -> None:
    trace = _jsonl(tmp_path / "t.jsonl", [{"timestamp": 0, "input_tokens": 9, "output_tokens": 9}])
    with pytest.raises(ConfigError, match="trace: missing"):
        parse_scenario({"steps": [1], "arrival": "trace"}, file="s")
    with pytest.raises(ConfigError, match="trace_speedup: applies to arrival: trace only"):
        parse_scenario({"steps": [1], "trace_speedup": 2}, file="s")
    with pytest.raises(ConfigError, match="prompts: not with arrival: trace"):
        parse_scenario({**_scenario(tmp_path, trace), "prompts": {"synthetic": {}}}, file="s")
    with pytest.raises(ConfigError, match="warmup_s: .*less than the fastest replay"):
        parse_scenario(_scenario(tmp_path, trace, warmup_s=5), file="s")


def test_mooncake_hash_ids_become_shared_prompt_prefixes() -> None:
    sc = load_scenario(
        REPO / "scenarios" / "trace-replay.yaml", {"trace": "traces/mooncake-sample.jsonl"}
    )
    prompts = build_prompt_set(sc, tokenize=estimate_tokens)
    trace = read_trace(str(REPO / "scenarios" / "traces" / "mooncake-sample.jsonl"))
    assert prompts.source_format == "trace-mooncake"
    assert [p.expected_prompt_tokens for p in prompts] == [e.input_tokens for e in trace.entries]
    assert [p.max_tokens for p in prompts] == [e.output_tokens for e in trace.entries]
    assert [p.at_s for p in prompts] == [e.at_s for e in trace.entries]
    # two requests with the same first block start with the same text; others do not
    by_first: dict[int, list[str]] = {}
    for p, e in zip(prompts, trace.entries, strict=True):
        by_first.setdefault(e.hash_ids[0], []).append(p.messages[0]["content"])
    shared = [texts for texts in by_first.values() if len(texts) > 1]
    assert shared, "the sample trace has requests continuing earlier ones"
    for texts in shared:
        assert len({t[:200] for t in texts}) == 1
    firsts = {texts[0][:200] for texts in by_first.values()}
    assert len(firsts) == len(by_first)
    back = PromptSet.from_wire(prompts.to_wire())
    assert [p.at_s for p in back] == [p.at_s for p in prompts]


def test_trace_shares_replay_the_trace_from_the_step_start() -> None:
    offsets = (0.0, 0.1, 0.1, 0.5, 2.0)
    parts = [
        Pacer.share(5.0, "trace", 0, 100.0, index=k, count=2, offsets=offsets, speed=2.0)
        for k in range(2)
    ]
    times = sorted(t for p in parts for i in range(4) if (t := p.next_send_at(i)) < 1e9)
    assert times == [100.0 + o / 2.0 for o in offsets]
    # a share that takes over mid-step continues where the trace stands
    assert parts[0].first_at_or_after(100.2) == 2  # share 0 sends offsets 0, 0.1 and 2.0
    assert parts[0].next_send_at(2) == pytest.approx(101.0)


@pytest.mark.slow
def test_a_trace_is_sent_on_its_times_at_each_speedup(sim_factory, tmp_path: Path) -> None:
    rows = [
        {"timestamp": round(0.05 * i + (0.6 if i >= 15 else 0.0), 3), "input_tokens": 24,
         "output_tokens": 4 + i % 5}
        for i in range(30)
    ]  # fmt: skip
    _jsonl(tmp_path / "t.jsonl", rows)
    (tmp_path / "s.yaml").write_text(
        "name: replay\narrival: trace\ntrace: t.jsonl\nsteps: [1, 2]\nwarmup_s: 0.2\n"
        "max_concurrency: 64\nignore_eos: true\nmax_tokens: 16\n"
    )
    sim = sim_factory("--profile", "tiny")
    out = specload_run(sim.url, tmp_path / "s.yaml", "replay", tmp_path / "run", "--processes", "2")
    run = read_run(out)
    records = list(run.record_dicts())
    steps = {s["index"]: s for s in run.steps}
    assert len(records) == 60 and all(r["ok"] for r in records)
    for r in records:
        entry, speed = rows[r["prompt_index"]], (1.0, 2.0)[r["step"]]
        due = steps[r["step"]]["start"] + entry["timestamp"] / speed
        assert r["scheduled_at"] == pytest.approx(due, abs=1e-6), r
        assert r["output_tokens"] == entry["output_tokens"]
    for step in (0, 1):  # every request of the trace once per step, over both workers
        assert sorted(r["prompt_index"] for r in records if r["step"] == step) == list(range(30))
    assert len({r["worker"] for r in records}) == 2

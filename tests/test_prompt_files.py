"""Prompt files: specload JSONL, ShareGPT and OpenAI request logs, detected, with classes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specload.core.errors import ConfigError
from specload.scenario import parse_scenario
from specload.scenario.prompt_files import read_prompt_file
from specload.scenario.prompts import PromptSet, build_prompt_set


def _jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_specload_lines_carry_category_cap_and_id(tmp_path: Path) -> None:
    f = _jsonl(
        tmp_path / "p.jsonl",
        [
            {"messages": [{"role": "user", "content": "a"}], "category": "code", "max_tokens": 64,
             "id": "x1"},
            {"messages": [{"role": "user", "content": "b"}]},
        ],
    )  # fmt: skip
    entries, fmt = read_prompt_file(str(f))
    assert fmt == "specload"
    assert [(e.category, e.max_tokens, e.id) for e in entries] == [("code", 64, "x1"), (None,) * 3]


def test_sharegpt_list_and_jsonl_take_the_first_human_turn(tmp_path: Path) -> None:
    conv = {
        "id": "s1",
        "category": "chat",
        "conversations": [
            {"from": "system", "value": "be brief"},
            {"from": "human", "value": "hello?"},
            {"from": "gpt", "value": "hi"},
            {"from": "human", "value": "second turn"},
        ],
    }
    as_list = tmp_path / "sharegpt.json"
    as_list.write_text(json.dumps([conv, {**conv, "id": "s2"}]))
    for f in (as_list, _jsonl(tmp_path / "sharegpt.jsonl", [conv])):
        entries, fmt = read_prompt_file(str(f))
        assert fmt == "sharegpt"
        assert entries[0].messages == (
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hello?"},
        )
        assert (entries[0].category, entries[0].id) == ("chat", "s1")


def test_openai_request_logs_read_body_cap_and_custom_id(tmp_path: Path) -> None:
    line = {
        "custom_id": "req-7",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "m", "messages": [{"role": "user", "content": "q"}],
                 "max_completion_tokens": 99, "metadata": {"category": "qa"}},
    }  # fmt: skip
    entries, fmt = read_prompt_file(str(_jsonl(tmp_path / "log.jsonl", [line])))
    assert fmt == "openai-log"
    assert (entries[0].id, entries[0].max_tokens, entries[0].category) == ("req-7", 99, "qa")


@pytest.mark.parametrize(
    ("content", "where", "words"),
    [
        ("", None, "no prompts"),
        ('{"prompt": "x"}\n', "line 1", "unknown format (found prompt;"),
        ('{"messages": []}\n', "line 1", 'non-empty "messages" list'),
        ('{"messages": [{"content": "x"}]}\n', "line 1.messages[0]", '{"role": str'),
        ('{"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}\n',
         "line 1.max_tokens", "integer >= 1"),
        ('{"messages": [{"role": "user", "content": "x"}]}\n{"body": {}}\n', "line 2",
         "not a specload entry like the first one"),
        ('[{"conversations": [{"from": "gpt", "value": "x"}]}]', "[0]", "no human turn"),
        ("{not json\n", "line 1", "not JSON"),
    ],
)  # fmt: skip
def test_bad_files_name_file_entry_and_expectation(
    tmp_path: Path, content: str, where: str | None, words: str
) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_text(content)
    with pytest.raises(ConfigError) as exc:
        read_prompt_file(str(f))
    msg = str(exc.value)
    assert msg.startswith(f"{f}: " + (f"{where}: " if where else "")), msg
    assert words in msg


def test_the_prompt_set_keeps_classes_through_the_wire_and_in_its_hash(tmp_path: Path) -> None:
    rows = [
        {"messages": [{"role": "user", "content": f"p{i}"}], "category": c, "max_tokens": 8}
        for i, c in enumerate(["code", "chat", "code"])
    ]
    f = _jsonl(tmp_path / "p.jsonl", rows)
    sc = parse_scenario({"steps": [1], "prompts": {"file": str(f)}}, file="s.yaml")
    prompts = build_prompt_set(sc)
    assert prompts.source_format == "specload"
    back = PromptSet.from_wire(prompts.to_wire())
    assert [(p.category, p.max_tokens) for p in back] == [("code", 8), ("chat", 8), ("code", 8)]
    assert back.sha256 == prompts.sha256 and back.source_format == "specload"
    rows[0]["category"] = "chat"  # another class is other traffic: another hash
    other = build_prompt_set(parse_scenario(
        {"steps": [1], "prompts": {"file": str(_jsonl(tmp_path / "q.jsonl", rows))}}, file="s"
    ))  # fmt: skip
    assert other.sha256 != prompts.sha256

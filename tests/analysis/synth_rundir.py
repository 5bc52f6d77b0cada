"""Synthesise run directories with known answers, in exactly the documented format.

``write_run`` writes run.json, requests.jsonl, metrics.jsonl (vLLM counters, gauges and
histograms, labelled with ``model_name`` like real vLLM) and steps.json for one condition.
Latency per request is a baseline curve times the condition's factor at that QPS, with
log-normal noise, so a test knows the true ratio (and so the true crossover) at every load.
Used by tests/analysis, tests/report, tests/test_compare_cli.py and the compare benchmark.
"""

from __future__ import annotations

import hashlib
import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

Factor = Callable[[float], float]

T0 = 1_780_000_000.0
TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.5, 5.0)
TPOT_BUCKETS = (0.005, 0.0075, 0.01, 0.0125, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1)


def one(_q: float) -> float:
    return 1.0


def linear_gain(g_low: float, q_low: float, slope_per_e: float) -> Factor:
    """Ratio factor whose gain = g_low - slope * ln(q / q_low): linear in log-QPS."""
    return lambda q: 1.0 - (g_low - slope_per_e * math.log(q / q_low))


def true_crossover(g_low: float, q_low: float, slope_per_e: float, min_gain: float) -> float:
    """QPS where ``linear_gain`` equals ``min_gain``."""
    return q_low * math.exp((g_low - min_gain) / slope_per_e)


@dataclass
class Cond:
    """One synthetic server condition and how it differs from the baseline."""

    label: str
    speculative: dict[str, Any] | None = None
    prefix_caching: bool | None = None
    tpot: Factor = one
    ttft: Factor = one
    tail_share: float = 0.0  # share of requests whose TPOT is multiplied by tail_factor
    tail_factor: float = 1.0
    error_rate: float = 0.0
    output_mismatch: float = 0.0  # share of outputs whose hash differs from the prompt's
    stop_share: float = 0.0  # share finishing with "stop" (shorter) instead of "length"
    acceptance_rate: float | None = None
    prefix_hit_rate: float | None = None
    json_valid_share: float | None = None
    late_share: float = 0.0  # share of requests sent ``late_s`` after their schedule
    late_s: float = 0.2
    extra_meta: dict[str, Any] = field(default_factory=dict)
    #: run.json declares both features (as a sweep does); False: an undeclared ``--url`` run
    declared: bool = True


def base_tpot(q: float) -> float:
    return 0.010 * (1 + q / 20)


def base_ttft(q: float) -> float:
    return 0.050 * (1 + q / 30)


def scenario(**over: Any) -> dict[str, Any]:
    sc = {
        "path": "scenarios/synth.yaml",
        "name": "synth",
        "model": "m",
        "sampling": {"temperature": 0.0, "max_tokens": 64, "ignore_eos": True},
        "prompts": {"kind": "synthetic", "input_tokens": 256, "count": 200, "seed": 7},
        "steps": [1, 2],
        "step_duration_s": 30,
        "warmup_s": 5,
        "repeats": 1,
    }
    sc.update(over)
    return sc


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _records(
    cond: Cond,
    qps: float,
    step: int,
    start: float,
    n: int,
    warm: int,
    rng: np.random.Generator,
    out_tokens: int,
    n_prompts: int,
    itl: bool,
) -> tuple[list[dict[str, Any]], float, float]:
    total = n + warm
    duration = total / qps
    warmup_end = start + warm / qps
    sched = start + np.sort(rng.uniform(0, duration, total))
    sched[:warm] = np.sort(rng.uniform(start, warmup_end, warm)) if warm else sched[:0]
    sched[warm:] = np.sort(rng.uniform(warmup_end, start + duration, n))
    delay = rng.exponential(0.0005, total)
    if cond.late_share:  # drawn only then: other runs keep their random stream
        delay[rng.random(total) < cond.late_share] = cond.late_s
    ttft = base_ttft(qps) * cond.ttft(qps) * rng.lognormal(0, 0.25, total)
    tpot = base_tpot(qps) * cond.tpot(qps) * rng.lognormal(0, 0.12, total)
    tail = rng.random(total) < cond.tail_share
    tpot[tail] *= cond.tail_factor
    stop = rng.random(total) < cond.stop_share
    outs = np.where(stop, out_tokens // 2, out_tokens)
    failed = rng.random(total) < cond.error_rate
    mismatch = rng.random(total) < cond.output_mismatch
    prompts = rng.integers(0, n_prompts, total)
    jv = None if cond.json_valid_share is None else rng.random(total) < cond.json_valid_share
    per_chunk = 1.0 + (cond.acceptance_rate or 0.0) * 3
    recs = []
    for i in range(total):
        sent = float(sched[i] + delay[i])
        rid = f"{cond.label}-{step}-{i}"
        base = {
            "request_id": rid,
            "worker": "local",
            "step": step,
            "target_qps": qps,
            "warmup": i < warm,
            "repeat": 0,
            "scheduled_at": float(sched[i]),
            "sent_at": sent,
            "queue_delay_s": float(delay[i]),
            "prompt_sha256": _hash(f"p{prompts[i]}"),
            "prompt_chars": 1000,
            "prompt_tokens": 256,
            "prompt_index": int(prompts[i]),
            "schema_version": 1,
            "tokens_source": "usage",
        }
        if failed[i]:
            base.update(
                {
                    "first_token_at": None,
                    "done_at": sent + 0.01,
                    "ttft_s": None,
                    "tpot_s": None,
                    "e2e_s": None,
                    "itl_s": None,
                    "content_chunks": 0,
                    "output_tokens": None,
                    "cached_tokens": None,
                    "finish_reason": None,
                    "status": 500,
                    "ok": False,
                    "error": {"kind": "http", "detail": "500"},
                    "output_sha256": None,
                    "output_chars": None,
                    "json_valid": None,
                    "tool_calls": None,
                }
            )
        else:
            n_out = int(outs[i])
            first = sent + float(ttft[i])
            e2e = float(ttft[i]) + float(tpot[i]) * (n_out - 1)
            chunks = max(1, round(n_out / per_chunk))
            out_text = f"o{prompts[i]}" + ("x" if mismatch[i] else "") + ("s" if stop[i] else "")
            base.update(
                {
                    "first_token_at": first,
                    "done_at": sent + e2e,
                    "ttft_s": float(ttft[i]),
                    "tpot_s": float(tpot[i]),
                    "e2e_s": e2e,
                    "itl_s": [float(tpot[i]) * per_chunk] * (chunks - 1) if itl else None,
                    "content_chunks": chunks,
                    "output_tokens": n_out,
                    "cached_tokens": 0,
                    "finish_reason": "stop" if stop[i] else "length",
                    "status": 200,
                    "ok": True,
                    "error": None,
                    "output_sha256": _hash(out_text),
                    "output_chars": 4 * n_out,
                    "json_valid": None if jv is None else bool(jv[i]),
                    "tool_calls": 0,
                }
            )
        recs.append(base)
    return recs, warmup_end, start + duration


def _buckets(name: str, les: tuple[float, ...], values: np.ndarray, lab: str) -> dict[str, float]:
    out = {f'{name}_bucket{{le="{le}",{lab}}}': float((values <= le).sum()) for le in les}
    out[f'{name}_bucket{{le="+Inf",{lab}}}'] = float(values.size)
    out[f"{name}_count{{{lab}}}"] = float(values.size)
    out[f"{name}_sum{{{lab}}}"] = float(values.sum())
    return out


class _Counters:
    """Cumulative vLLM counters of one synthetic server."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.c: dict[str, float] = {}

    def add(self, key: str, v: float) -> None:
        self.c[key] = self.c.get(key, 0.0) + v

    def add_traffic(self, cond: Cond, recs: list[dict[str, Any]], lab: str, junk: bool) -> None:
        ok = [r for r in recs if r["ok"]]
        gen = sum(r["output_tokens"] for r in ok)
        self.add(f"vllm:generation_tokens_total{{{lab}}}", gen)
        self.add(f"vllm:prompt_tokens_total{{{lab}}}", 256 * len(recs))
        if cond.acceptance_rate is not None:
            rate = 0.1 if junk else cond.acceptance_rate  # warm-up traffic must not count
            drafts = gen / (1 + rate * self.k)
            self.add(f"vllm:spec_decode_num_drafts_total{{{lab}}}", drafts)
            self.add(f"vllm:spec_decode_num_draft_tokens_total{{{lab}}}", drafts * self.k)
            self.add(f"vllm:spec_decode_num_accepted_tokens_total{{{lab}}}", drafts * self.k * rate)
            weights = [1.2 - 0.1 * pos for pos in range(self.k)]
            for pos, w in enumerate(weights):
                self.add(
                    f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab},position="{pos}"}}',
                    drafts * self.k * rate * w / sum(weights),
                )
        if cond.prefix_hit_rate is not None:
            self.add(f"vllm:prefix_cache_queries_total{{{lab}}}", 256 * len(recs))
            self.add(
                f"vllm:prefix_cache_hits_total{{{lab}}}", 256 * len(recs) * cond.prefix_hit_rate
            )
        if not junk and ok:
            ttft = np.array([r["ttft_s"] for r in ok]) - 0.002
            tpot = np.array([r["tpot_s"] for r in ok])
            # vLLM observes one inter-token latency per engine step (= per content chunk gap).
            gaps = np.array(
                [
                    (r["e2e_s"] - r["ttft_s"]) / (r["content_chunks"] - 1)
                    for r in ok
                    for _ in range(r["content_chunks"] - 1)
                ]
            )
            for key, v in {
                **_buckets("vllm:time_to_first_token_seconds", TTFT_BUCKETS, ttft, lab),
                **_buckets("vllm:request_time_per_output_token_seconds", TPOT_BUCKETS, tpot, lab),
                **_buckets("vllm:inter_token_latency_seconds", TPOT_BUCKETS, gaps, lab),
            }.items():
                self.add(key, v)


def write_run(
    path: Path,
    cond: Cond,
    *,
    qps: tuple[float, ...] = (2, 4, 8, 16, 32),
    n: int = 300,
    warm: int = 20,
    seed: int = 0,
    out_tokens: int = 64,
    n_prompts: int = 200,
    metrics: bool = True,
    itl: bool = False,
    sc: dict[str, Any] | None = None,
    server_version: str = "0.26.0",
    model: str = "m",
    partial_tail: bool = False,
) -> Path:
    """Write one synthetic run directory for ``cond`` and return its path."""
    path.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng([seed, zlib.crc32(cond.label.encode())])
    k = int((cond.speculative or {}).get("num_speculative_tokens", 4))
    lab = 'model_name="m"'
    counters = _Counters(k)
    steps, scrapes, t = [], [], T0
    gauges = {
        "vllm:num_requests_running{" + lab + "}": 0.0,
        "vllm:num_requests_waiting{" + lab + "}": 0.0,
        "vllm:kv_cache_usage_perc{" + lab + "}": 0.0,
    }
    with (path / "requests.jsonl").open("wb") as fh:
        for idx, q in enumerate(qps):
            recs, wend, end = _records(cond, q, idx, t, n, warm, rng, out_tokens, n_prompts, itl)
            scrapes.append(
                {"t": t, "step": idx, "phase": "start", "values": {**counters.c, **gauges}}
            )
            counters.add_traffic(cond, [r for r in recs if r["warmup"]], lab, junk=True)
            scrapes.append(
                {"t": wend, "step": idx, "phase": "interval", "values": {**counters.c, **gauges}}
            )
            counters.add_traffic(cond, [r for r in recs if not r["warmup"]], lab, junk=False)
            gauges = {
                "vllm:num_requests_running{" + lab + "}": float(round(q * 0.8)),
                "vllm:num_requests_waiting{" + lab + "}": float(max(0, q - 16)),
                "vllm:kv_cache_usage_perc{" + lab + "}": min(1.0, q / 40),
            }
            scrapes.append(
                {"t": end, "step": idx, "phase": "end", "values": {**counters.c, **gauges}}
            )
            steps.append(
                {
                    "index": idx,
                    "repeat": 0,
                    "target_qps": q,
                    "start": t,
                    "warmup_end": wend,
                    "end": end,
                }
            )
            fh.write(b"".join(orjson.dumps(r) + b"\n" for r in recs))
            t = end
        if partial_tail:
            fh.write(b'{"request_id": "cut-off", "step": 0, "tar')
    meta = {
        "schema_version": 1,
        "run_id": path.name,
        "label": cond.label,
        "condition": _condition(cond),
        "target": {
            "url": "http://127.0.0.1:8000",
            "model": model,
            "server_version": server_version,
            "models": [model],
        },
        "scenario": sc or scenario(),
        "versions": {"specload": "0.1.0", "locust": "2.40", "python": "3.11"},
        "workers": ["local"],
        "started_at": T0,
        "ended_at": t,
        "status": "completed",
        "server_cmd": None,
        "counts": {
            "sent": len(qps) * (n + warm),
            "recorded": len(qps) * (n + warm),
            "by_worker": {},
        },
        "lost_workers": [],
        "token_count_source": "estimate",
        "lookup_method": "words",
        "notes": [],
        **cond.extra_meta,
    }
    (path / "run.json").write_bytes(orjson.dumps(meta, option=orjson.OPT_INDENT_2))
    (path / "steps.json").write_bytes(orjson.dumps(steps))
    if metrics:
        (path / "metrics.jsonl").write_bytes(b"".join(orjson.dumps(s) + b"\n" for s in scrapes))
    return path


def _condition(cond: Cond) -> dict[str, Any]:
    """run.json ``condition``: declared like a sweep's, or nothing declared."""
    if not cond.declared:
        return {"speculative": None, "prefix_caching": None}
    return {
        "speculative": cond.speculative,
        "prefix_caching": bool(cond.prefix_caching),
        "source": {"speculative": "declared", "prefix_caching": "declared"},
    }


SPEC = {
    "method": "ngram",
    "num_speculative_tokens": 4,
    "prompt_lookup_max": 4,
    "prompt_lookup_min": 2,
}


def rewrite_records(run: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """Apply ``change`` to every record of ``run`` (in place); the run dir."""
    lines = []
    for line in (run / "requests.jsonl").read_bytes().splitlines():
        r = orjson.loads(line)
        change(r)
        lines.append(orjson.dumps(r))
    (run / "requests.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return run


def with_classes(run: Path, code: float = 1.0, questions: float = 1.0) -> Path:
    """Give a synthetic run a prompt file's two categories: even prompts are ``code``, odd
    ones ``questions``, each class's TPOT scaled by its factor (one class helped, one hurt)."""

    def classify(r: dict[str, Any]) -> None:
        is_code = r["prompt_index"] % 2 == 0
        r["category"] = "code" if is_code else "questions"
        if r.get("tpot_s") is not None:
            r["tpot_s"] *= code if is_code else questions

    return rewrite_records(run, classify)

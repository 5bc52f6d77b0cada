"""guidellm (``guidellm run``, 0.8's CLI) from its own env, one run over every rate.

The installed version's interface is a scenario file (``-c``): backend ``openai_http`` on
``/v1/chat/completions`` (as specload), profile ``poisson`` with the list of rates (one
benchmark per rate, in that order), a ``max_duration`` constraint per benchmark, the same
prompt texts as a ``json_file`` with ``output_tokens_count`` (guidellm then sends
``max_completion_tokens`` and ``ignore_eos``), and a JSON output that keeps every request.

Definitions: guidellm's ``time_to_first_token_ms`` is vLLM's TTFT (first chunk with
content); its ``inter_token_latency_ms`` is (last − first token) / (output tokens − 1), i.e.
vLLM's TPOT; its ``time_per_output_token_ms`` divides the whole latency after the request
start by the output tokens, so it includes the first token. The table compares its ITL with
the others' TPOT; its own TPOT is kept in the JSON as ``tpot_incl_first_*``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from peers.cpu import TreeCPU, run_measured
from peers.truth import ClientRun, Sample

__all__ = ["run_guidellm"]


def run_guidellm(
    python: Path,
    url: str,
    model: str,
    tokenizer: Path,
    dataset: Path,
    rates: list[float],
    duration_s: float,
    work: Path,
    *,
    timeout_s: float,
) -> list[ClientRun]:
    """One ``guidellm run`` with a benchmark per rate; one ``ClientRun`` per rate."""
    out = work / "guidellm.json"
    out.unlink(missing_ok=True)
    scenario = {
        "spec": {
            "backend": {
                "kind": "openai_http",
                "target": url,
                "model": model,
                "request_format": "/v1/chat/completions",
            },
            "profile": {"kind": "poisson", "rate": rates},
            "data": [{"kind": "json_file", "path": str(dataset)}],
            "tokenizer": {"kind": "hf_auto", "model": str(tokenizer)},
            "constraints": [{"kind": "max_duration", "seconds": duration_s}],
            "outputs": [{"kind": "json", "path": str(out)}],
        }
    }
    cfg = work / "guidellm-scenario.json"
    cfg.write_text(json.dumps(scenario, indent=1))
    cmd = [str(python), "-m", "guidellm", "run", "-c", str(cfg), "--disable-console-interactive"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    rc, cpu = run_measured(cmd, work / "guidellm.log", timeout_s, env=env)
    if rc != 0 or not out.exists():
        tail = (work / "guidellm.log").read_text(errors="replace")[-800:]
        raise RuntimeError(f"guidellm run exited {rc}: {tail}")
    report = json.loads(out.read_text())
    return [_parse(b, cpu) for b in report["benchmarks"]]


def _pcts(metrics: dict[str, Any], key: str) -> tuple[float | None, float | None]:
    d = (metrics.get(key) or {}).get("successful") or {}
    return d.get("median"), (d.get("percentiles") or {}).get("p95")


def _parse(bench: dict[str, Any], cpu: TreeCPU) -> ClientRun:
    rate = float(bench["config"]["strategy"]["rate"])
    samples = []
    for status, reqs in bench["requests"].items():
        if status == "total":
            continue
        for r in reqs or []:
            rid = str(r.get("response_id") or "").removeprefix("chatcmpl-")
            ok = status == "successful"
            ttft, itl = r.get("time_to_first_token_ms"), r.get("inter_token_latency_ms")
            samples.append(
                Sample(
                    rid,
                    ok,
                    ttft / 1e3 if ok and ttft is not None else None,
                    itl / 1e3 if ok and itl is not None else None,
                    r.get("output_tokens"),
                    cancelled=status == "incomplete",
                    sent_at=(r.get("info") or {}).get("timings", {}).get("request_start"),
                )
            )
    m = bench["metrics"]
    ttft50, ttft95 = _pcts(m, "time_to_first_token_ms")
    itl50, itl95 = _pcts(m, "inter_token_latency_ms")
    own50, own95 = _pcts(m, "time_per_output_token_ms")
    rps = ((m.get("requests_per_second") or {}).get("successful") or {}).get("mean")
    reported = {
        "ttft_p50": ttft50,
        "ttft_p95": ttft95,
        "tpot_p50": itl50,
        "tpot_p95": itl95,
        "tpot_incl_first_p50": own50,
        "tpot_incl_first_p95": own95,
        "achieved_rate": rps,
    }
    run = ClientRun("guidellm", rate, samples, reported, cpu)
    early = _unscheduled(bench)
    if early:
        run.notes.append(
            f"{early} of {len(samples)} requests had a targeted start near 0 "
            "(1970) instead of a time in the run, so guidellm sent them at once"
        )
    return run


def _unscheduled(bench: dict[str, Any]) -> int:
    """Requests whose Poisson target time was drawn before guidellm set its start time.

    guidellm 0.8.1's Poisson strategy adds each draw to a shared offset that starts at -1.0
    and is set to the start time only later; draws made before that (workers pre-draw for
    their queues) are due in 1970 and are sent immediately — a burst at the start of a
    benchmark, which is why its achieved rate can be many times the target.
    """
    n = 0
    for reqs in (v for k, v in bench["requests"].items() if k != "total"):
        for r in reqs or []:
            t = ((r.get("info") or {}).get("timings") or {}).get("targeted_start")
            n += t is not None and t < 1e9
    return n

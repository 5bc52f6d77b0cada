"""specload as a user runs it: ``specload run`` with a one-step scenario per rate.

One run per rate, each on an idle server as for the peers (steps back to back would start a
high rate on a server still busy with the previous one's requests), no warm-up so every
request counts, locally (``--processes 0``: one Locust process) or with Locust's own
``--processes N`` (a master and N workers on this host). The figures specload reports
are those of ``specload compare`` on the run dir (its full-precision per-step percentiles);
per-request samples come from ``requests.jsonl``, whose ``request_id`` is the
``X-Request-Id`` the simulator saw.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml
from client_fidelity import free_port

from peers.cpu import TreeCPU, run_measured
from peers.truth import ClientRun, Sample

__all__ = ["run_specload", "scenario_dict"]

REPO = Path(__file__).resolve().parents[2]


def scenario_dict(
    rates: list[float],
    duration_s: float,
    input_tokens: int,
    output_tokens: int,
    prompts: int,
    model: str,
) -> dict[str, Any]:
    """The scenario: fixed lengths, Poisson arrivals, one step per rate, no warm-up."""
    return {
        "name": "peers",
        "model": model,
        "description": "benchmarks/peers.py: specload next to vllm bench serve and guidellm",
        "max_tokens": output_tokens,
        "min_tokens": output_tokens,
        "ignore_eos": True,
        "arrival": "poisson",
        "steps": rates,
        "step_duration_s": duration_s,
        "warmup_s": 0,
        "repeats": 1,
        "max_concurrency": 2048,
        "metrics_interval_s": 5,
        "request_timeout_s": 60,
        "seed": 0,
        "prompts": {"synthetic": {"input_tokens": input_tokens, "count": prompts}},
    }


def run_specload(
    url: str, scenario: dict[str, Any], work: Path, *, processes: int, timeout_s: float
) -> list[ClientRun]:
    """Run the scenario; one ``ClientRun`` per step (rate)."""
    name = "specload" if processes == 0 else f"specload-p{processes}"
    tag = f"{name}-" + "-".join(f"{r:g}" for r in scenario["steps"])
    path = work / f"{tag}.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    out = work / tag
    cmd = [
        sys.executable,
        "-m",
        "specload",
        "run",
        "--host",
        url,
        "--scenario",
        str(path),
        "--label",
        name,
        "--out",
        str(out),
        "--processes",
        str(processes),
    ]
    env = dict(os.environ)
    if processes:
        # Locust's master port (5557 by default) may be taken by another run on this host:
        # its forked workers would then join that master. A free port for both sides.
        port = str(free_port())
        env.update(LOCUST_MASTER_BIND_PORT=port, LOCUST_MASTER_PORT=port)
    rc, cpu = run_measured(cmd, work / f"{tag}.log", timeout_s, env=env, cwd=REPO)
    if rc != 0 or not (out / "requests.jsonl").exists():
        tail = (work / f"{tag}.log").read_text(errors="replace")[-600:]
        raise RuntimeError(f"{name} exited {rc}: {tail}")
    return _runs(name, out, cpu)


def _runs(name: str, out: Path, cpu: TreeCPU) -> list[ClientRun]:
    from specload.analysis.compare import compare_runs

    by_step: dict[float, list[Sample]] = {}
    with open(out / "requests.jsonl", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            by_step.setdefault(float(r["target_qps"]), []).append(
                Sample(
                    r["request_id"],
                    bool(r["ok"]),
                    r["ttft_s"],
                    r["tpot_s"],
                    r["output_tokens"],
                    sent_at=r["sent_at"],
                )
            )
    comparison = compare_runs([str(out)], bootstrap=10)
    runs = []
    for stats in next(iter(comparison.steps.values())):
        lat = {k: v.value for k, v in stats.latency.items()}

        def ms(key: str, lat: dict[str, float | None] = lat) -> float | None:
            v = lat.get(key)
            return None if v is None else round(v * 1e3, 3)

        reported = {
            "ttft_p50": ms("ttft_p50"),
            "ttft_p95": ms("ttft_p95"),
            "tpot_p50": ms("tpot_p50"),
            "tpot_p95": ms("tpot_p95"),
            "achieved_rate": stats.achieved_qps,
            "queue_delay_p99": ms("queue_delay_p99"),
        }
        runs.append(
            ClientRun(name, stats.target_qps, by_step.get(stats.target_qps, []), reported, cpu)
        )
    return runs

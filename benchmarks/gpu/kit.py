#!/usr/bin/env python3
"""The GPU kit's helper for ``run.sh`` (standard library only; ``bench`` runs vLLM's own CLI).

Verbs:
  health  --url U --pid P --timeout S [--log F]   wait for GET /health == 200 (or the server dying)
  warmup  --url U [--n 8 --max-tokens 32]         N concurrent short completions, so one-time
                                                  compilation and lazy init are not billed to
                                                  the first measured step
  bench   --vllm CMD --url U --cond C --rates "1 4" --tokenizer T --raw DIR --summary F
                                                  vLLM's ``bench serve`` per rate against the
                                                  same server, for reference; its figures are
                                                  added to F as rows in the calibration's format
                                                  (benchmarks/data/), which table.py reads

Why a separate reference client: specload's TTFT/TPOT should match what vLLM's own client
measures on the same server start; ``table.py`` sets the two side by side per rate.
"""

from __future__ import annotations

import argparse
import json
import os
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


def _get(url: str, timeout: float) -> int:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return int(r.status)


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie counts as dead)."""
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _last_line(path: str) -> str:
    try:
        lines = [
            ln for ln in Path(path).read_text(errors="replace")[-4096:].splitlines() if ln.strip()
        ]
    except OSError:
        return ""
    return lines[-1][-160:] if lines else ""


def cmd_health(a: argparse.Namespace) -> int:
    start = time.time()
    next_note = start + 15
    while True:
        try:
            if _get(a.url + "/health", 3) == 200:
                log(f"server healthy after {time.time() - start:.0f} s")
                return 0
        except (urllib.error.URLError, OSError):
            pass
        if not _alive(a.pid):
            log(f"the server (pid {a.pid}) exited before it was healthy; see {a.log}")
            return 1
        if time.time() - start > a.timeout:
            log(f"the server was not healthy after {a.timeout:.0f} s; see {a.log}")
            return 1
        if time.time() >= next_note:
            log(f"waiting for /health ({time.time() - start:.0f} s): {_last_line(a.log)}")
            next_note += 15
        time.sleep(1)


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


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="verb", required=True)
    h = sub.add_parser("health")
    h.add_argument("--url", required=True)
    h.add_argument("--pid", type=int, default=0)
    h.add_argument("--timeout", type=float, default=600)
    h.add_argument("--log", default="")
    w = sub.add_parser("warmup")
    w.add_argument("--url", required=True)
    w.add_argument("--model", default="target")
    w.add_argument("--n", type=int, default=8)
    w.add_argument("--max-tokens", type=int, default=32)
    w.add_argument("--timeout", type=float, default=300)
    b = sub.add_parser("bench")
    b.add_argument("--vllm", required=True, help="how to run vLLM's CLI, e.g. 'vllm'")
    b.add_argument("--url", required=True)
    b.add_argument("--cond", required=True)
    b.add_argument("--rates", required=True, help="request rates, space-separated")
    b.add_argument("--model", default="target")
    b.add_argument("--tokenizer", required=True)
    b.add_argument("--raw", required=True, help="folder for vLLM's result JSON and logs")
    b.add_argument("--summary", required=True, help="JSON the rows are merged into")
    b.add_argument("--input-len", type=int, default=512)
    b.add_argument("--output-len", type=int, default=256)
    b.add_argument("--seconds", type=float, default=20, help="arrivals per rate, in seconds")
    b.add_argument("--min-prompts", type=int, default=32)
    b.add_argument("--rate-timeout", type=float, default=300)
    a = ap.parse_args()
    verbs = {
        "health": cmd_health,
        "warmup": cmd_warmup,
        "bench": cmd_bench,
    }
    return verbs[a.verb](a)


if __name__ == "__main__":
    sys.exit(main())

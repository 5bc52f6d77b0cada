#!/usr/bin/env python3
"""The GPU kit's helper for ``run.sh``: ``kit.py interleaved`` or ``kit.py starts``.

``interleaved`` (the default for decisions): both conditions' servers up at once on the one
GPU, started one after the other (each waits for /health before the next starts: two engines
profiling GPU memory at once can each count the other's allocation as free), each warmed up,
then ONE ``specload sweep --interleave --url baseline=URL --url spec=URL`` whose blocks
alternate between them in a seeded balanced order, so the GPU's drift (vLLM 0.26's draft step
flips between ~13 and ~20 ms in windows of seconds on an H200) hits both conditions alike.

``starts``: for each start, interleaved (baseline, spec, baseline, spec, ...), the server is
started in a process group of its own and waited for, then stopped with its whole group, by
specload's own ``specload.protocol.target.ManagedServer`` (what ``specload sweep`` uses). While it is up:

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
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: the usage checks need no specload
    from specload.protocol.target import ManagedServer

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
    data: dict[str, Any] = (
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
    started, stopped and waited for by ``specload.protocol.target.ManagedServer``, as ``specload
    sweep`` does, and between the two this start's warm-up, sweep run and reference bench."""
    from specload.core.errors import TargetError
    from specload.protocol.target import ManagedServer

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


#: the conditions, in the order their servers start
CONDITIONS = ("baseline", "spec")


def cmd_interleaved(a: argparse.Namespace) -> int:
    """Both servers up at once, one interleaved sweep over them, both stopped (whole groups,
    also on Ctrl-C or SIGTERM, so no engine is left holding the GPU)."""
    from specload.core.errors import TargetError

    servers = _servers(a)
    failed = 0
    with _sigterm_as_interrupt():
        try:
            for cond, server in servers.items():
                _start(server, cond)
            failed |= _interleaved_session(a, servers)
        except TargetError as exc:
            log(f"a server did not come up: {exc}")
            failed = 1
        except KeyboardInterrupt:
            log("interrupted: stopping both servers")
            failed = 1
        finally:
            for server in reversed(list(servers.values())):
                server.stop()
            log("both servers stopped")
    return failed


def _servers(a: argparse.Namespace) -> dict[str, ManagedServer]:
    """One ``ManagedServer`` per condition, each on its own port (``--port`` P: baseline on P,
    spec on P + 1; 0: free ports), its log in ``OUT/servers/<condition>.log``."""
    from specload.core.ports import free_port
    from specload.protocol.target import ManagedServer

    ports = (a.port, a.port + 1) if a.port else (free_port(), free_port())
    commands = {"baseline": a.baseline_cmd, "spec": a.spec_cmd}
    return {
        cond: ManagedServer(
            commands[cond],
            [],
            port,
            Path(a.out) / "servers" / f"{cond}.log",
            health_timeout_s=a.health_timeout,
            on_waiting=_waiting_note(cond),
        )
        for cond, port in zip(CONDITIONS, ports, strict=True)
    }


def _waiting_note(cond: str) -> Callable[[float], None]:
    """A log line every 15 s while ``cond``'s server starts (a vLLM start takes minutes)."""
    return lambda s: log(f"{cond}: waiting for /health ({s:.0f} s)")


def _start(server: ManagedServer, cond: str) -> None:
    """Start one server and wait for its /health before the caller starts the next."""
    log(f"starting {cond}: {server.command_line}")
    t = time.time()
    server.start()
    log(f"{cond} healthy at {server.url} after {time.time() - t:.0f} s")


def _interleaved_session(a: argparse.Namespace, servers: dict[str, ManagedServer]) -> int:
    """Warm-ups, the one interleaved sweep, and (when asked) vLLM's bench on each server."""
    failed = 0
    for cond, server in servers.items():
        if cmd_warmup(argparse.Namespace(**{**vars(a), "url": server.url})) != 0:
            log(f"{cond}: warm-up had errors (going on)")
    if _run_child(interleaved_sweep_argv(a, {c: s.url for c, s in servers.items()})) != 0:
        log("specload sweep --interleave failed")
        failed = 1
    if a.bench != "0":
        bench_dir = Path(a.out) / "vllm-bench"
        for cond, server in servers.items():
            one = {"url": server.url, "cond": cond, "raw": str(bench_dir / "raw-r1"),
                   "summary": str(bench_dir / "r1.json")}  # fmt: skip
            if cmd_bench(argparse.Namespace(**{**vars(a), **one})) != 0:
                log(f"vLLM bench serve failed for {cond}")
                failed = 1
    return failed


def interleaved_sweep_argv(a: argparse.Namespace, urls: dict[str, str]) -> list[str]:
    """``specload sweep --interleave`` over the running servers, each condition declared so
    that run.json says what its server runs. ``--condition`` flags take a JSON config only,
    so the baseline declares ``{}``: an empty config, which compare reads as no speculation
    (and so does the spec condition of an A/A check, SPEC_CONFIG=off)."""
    spec = "{}" if a.spec_declared == "off" else a.spec_declared  # off: an A/A check
    declared = {"baseline": "{}", "spec": spec}
    argv = [*shlex.split(a.specload), "sweep", "--interleave"]
    for cond in CONDITIONS:
        flags = f"--speculative-config {shlex.quote(declared[cond])} --no-enable-prefix-caching"
        argv += ["--url", f"{cond}={urls[cond]}", "--condition", f"{cond}={flags}"]
    argv += ["--scenario", a.scenario, "--out", str(Path(a.out) / "sweep")]
    if a.until_decided:  # it compares after each look; run.sh compares once more at the end
        return [*argv, "--until-decided", "--budget-s", f"{a.until_decided:g}"]
    return [*argv, "--no-compare"]


def _run_child(argv: list[str]) -> int:
    """Run a child; on Ctrl-C / SIGTERM give it one SIGTERM and time to finish (the sweep
    takes SIGTERM as Ctrl-C: it stops its current block and merges the blocks it ran) before
    re-raising. SIGTERM, not SIGINT: a child of a background job may ignore SIGINT."""
    proc = subprocess.Popen(argv)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        try:
            proc.wait(timeout=2)  # a terminal Ctrl-C reached it already
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
        raise


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (a ``kill`` of the kit) runs the same clean-up as Ctrl-C."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _common_args(p: argparse.ArgumentParser) -> None:
    """What both modes take: the two server commands, the scenario, warm-up and bench."""
    p.add_argument("--baseline-cmd", required=True, help="server command line, with {port}")
    p.add_argument("--spec-cmd", required=True, help="server command line, with {port}")
    p.add_argument("--spec-declared", required=True, help="the spec condition's config JSON")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--health-timeout", type=float, default=600)
    p.add_argument("--scenario", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--specload", required=True, help="how to run specload")
    p.add_argument("--bench", choices=["1", "first", "0"], default="1")
    p.add_argument("--model", default="target")
    # warm-up
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--timeout", type=float, default=300)
    # vLLM's bench serve
    p.add_argument("--vllm", default="vllm", help="how to run vLLM's CLI")
    p.add_argument("--rates", default="", help="request rates, space-separated")
    p.add_argument("--tokenizer", default="")
    p.add_argument("--input-len", type=int, default=512)
    p.add_argument("--output-len", type=int, default=256)
    p.add_argument("--seconds", type=float, default=20, help="arrivals per rate, in seconds")
    p.add_argument("--min-prompts", type=int, default=32)
    p.add_argument("--rate-timeout", type=float, default=300)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="verb", required=True)
    il = sub.add_parser(
        "interleaved", help="both servers up at once, one specload sweep --interleave, stop"
    )
    _common_args(il)
    il.add_argument(
        "--until-decided", type=float, default=0.0, metavar="SECONDS",
        help="sweep --until-decided with this --budget-s (0: the scenario's blocks only)",
    )  # fmt: skip
    st = sub.add_parser("starts", help="every server start: serve, warm up, sweep, bench, stop")
    _common_args(st)
    st.add_argument("--replicates", type=int, default=2)
    a = ap.parse_args()
    # run.sh started in the background (setsid nohup ... &) hands its children SIGINT
    # ignored, and an ignored signal stays ignored across exec: Ctrl-C semantics (the sweep
    # and its runs finishing cleanly on SIGINT) need the default handler back, here and so
    # in every child (a handled signal is reset to the default at exec).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return int(cmd_interleaved(a) if a.verb == "interleaved" else cmd_starts(a))


if __name__ == "__main__":
    sys.exit(main())

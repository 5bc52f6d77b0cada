"""Client fidelity and capacity: the default client vs ``client: openai`` against the simulator.

For each client and each number of concurrent streams (default 4, 64, 256), keeps that many
streams busy in one gevent process (closed loop) against ``specload sim --ground-truth`` and
reports, over a measured window after a warm-up:

- ``tok/s`` and ``chunks/s`` received (wall clock),
- ``µs/chunk``: client-process CPU time per content chunk received, and the capacity it
  implies for one process on one core (``tokens / client CPU seconds``) — the figure that
  matters when the server, not the client, is the slower side,
- TTFT and TPOT error against the simulator's own emission times (``/debug/requests``):
  ``ttft_client − (first_token_at − arrived_at)`` and
  ``|tpot_client − tpot_server| / tpot_server``, as p50 and p99,
- the simulator's CPU use over the window: near one core means the simulator, not the client,
  limited the rate (it is a single-threaded Python process).

The simulator does real work per chunk and, on a small machine, cannot send chunks fast
enough to load the client; so the same clients also run against a canned *replay* server
(one pre-rendered chunk per stream every ``--replay-interval-ms``, nothing else), which
measures what one client process can take (no ground truth there: capacity only).

Goals (the client's fidelity bar): ≥ 50k tok/s per process, TTFT error p99 ≤ 5 ms at 256 streams, ≥ 4× the
SDK's capacity. Results go to ``benchmarks/results/client_fidelity.{md,json}``.

Run: ``.venv/bin/python benchmarks/client_fidelity.py [--streams 4,64,256] [--window-s 8]``.
"""

from __future__ import annotations

import sys

from gevent import monkey

if "--serve-replay" not in sys.argv:  # the replay server (a child) runs plain asyncio
    monkey.patch_all()  # as under Locust: the SDK's httpx sockets must be cooperative too

import argparse
import json
import os
import platform
import random
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import gevent

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from specload.client import ChatRequest, ClientSettings, make_client
from specload.core.ports import free_port
from specload.core.records import RequestRecord

CLK_TCK = os.sysconf("SC_CLK_TCK")


def start_sim(profile: str) -> tuple[subprocess.Popen, str]:
    """``specload sim --ground-truth`` on a free port, in its own process group."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "specload",
        "sim",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--profile",
        profile,
        "--ground-truth",
        "--ground-truth-max",
        "1000000",
    ]
    proc = subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1):
                return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("simulator did not start")


def _frame(data: bytes) -> bytes:
    event = b"data: " + data + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(event), event)


_REPLAY_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)
_REPLAY_DATA = (
    b'{"id":"r","object":"chat.completion.chunk","created":0,"model":"replay",'
    b'"choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":null}]}'
)
_REPLAY_CHUNK = _frame(_REPLAY_DATA)


def _replay_tail(n: int) -> bytes:
    usage = b'{"prompt_tokens":10,"completion_tokens":%d,"total_tokens":%d}' % (n, n + 10)
    last = _REPLAY_DATA.replace(b'"finish_reason":null', b'"finish_reason":"length"')
    return (
        _frame(last)
        + _frame(b'{"id":"r","object":"chat.completion.chunk","choices":[],"usage":' + usage + b"}")
        + _frame(b"[DONE]")
        + b"0\r\n\r\n"
    )


def serve_replay(port: int, interval_s: float) -> None:
    """A server that only replays canned chunks: one per stream every ``interval_s``.

    It does none of the simulator's work (no engine, no JSON building), so it can offer a
    chunk rate that loads the client to its limit on this machine.
    """
    import asyncio
    import re

    active: set[Any] = set()

    class Stream(asyncio.Protocol):
        def connection_made(self, transport: Any) -> None:
            self.t, self.buf, self.left, self.n = transport, b"", 0, 0

        def data_received(self, data: bytes) -> None:
            self.buf += data
            head, sep, rest = self.buf.partition(b"\r\n\r\n")
            m = re.search(rb"(?i)content-length: *(\d+)", head)
            if not sep or len(rest) < (n := int(m.group(1)) if m else 0):
                return
            self.buf = rest[n:]
            self.n = self.left = int(json.loads(rest[:n]).get("max_tokens") or 128)
            self.t.write(_REPLAY_HEAD)
            active.add(self)

        def tick(self) -> None:
            self.left -= 1
            if self.left > 0:
                self.t.write(_REPLAY_CHUNK)
            else:
                self.t.write(_replay_tail(self.n))
                active.discard(self)

        def connection_lost(self, exc: Exception | None) -> None:
            active.discard(self)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        await loop.create_server(Stream, "127.0.0.1", port)
        next_at = loop.time()
        while True:
            for stream in list(active):
                stream.tick()
            next_at = max(next_at + interval_s, loop.time() - interval_s)  # catch up, no burst
            await asyncio.sleep(max(0.0, next_at - loop.time()))

    asyncio.run(run())


def start_replay(interval_s: float) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [sys.executable, __file__, "--serve-replay", str(port), "--interval-s", str(interval_s)]
    proc = subprocess.Popen(cmd, cwd=REPO, start_new_session=True)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("replay server did not start")


def stop_sim(proc: subprocess.Popen) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGKILL)


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, round(q / 100 * (len(s) - 1)))]


def chunk_times(r: RequestRecord) -> list[float]:
    if r.first_token_at is None:
        return []
    out = [r.first_token_at]
    for gap in r.itl_s or []:
        out.append(out[-1] + gap)
    return out


def drive(
    kind: str,
    url: str,
    model: str,
    streams: int,
    warmup_s: float,
    window_s: float,
    max_tokens: int,
    sim_pid: int,
    tag: str,
    truth: bool = True,
) -> dict[str, Any]:
    """Keep ``streams`` streams busy; measure over ``window_s`` after ``warmup_s``."""
    client = make_client(kind, url, ClientSettings(timeout_s=60, concurrency=streams + 8))
    rng = random.Random(streams)
    records: list[RequestRecord] = []
    stop_at = time.time() + warmup_s + window_s

    def loop(g: int) -> None:
        # Streams start staggered over the warm-up and differ in length (±25 %), so they do
        # not move in lockstep: a closed loop of equal requests would otherwise finish and
        # re-send all at once, and the burst of arrivals would dominate TTFT.
        n_tokens = rng.randint(int(max_tokens * 0.75), int(max_tokens * 1.25))
        req = ChatRequest(
            model=model,
            messages=[{"role": "user", "content": f"story {g} " * 24}],
            max_tokens=n_tokens,
            min_tokens=n_tokens,
            ignore_eos=True,
        )
        gevent.sleep(rng.uniform(0, warmup_s * 0.75))
        n = 0
        while time.time() < stop_at:
            n += 1
            records.append(
                client.send(
                    req,
                    request_id=f"{tag}-{g}-{n}",
                    worker=tag,
                    step=0,
                    repeat=0,
                    target_qps=0.0,
                    warmup=False,
                    scheduled_at=time.time(),
                )
            )

    greenlets = [gevent.spawn(loop, g) for g in range(streams)]
    gevent.sleep(warmup_s)
    t0, cpu0, sim0 = time.time(), time.process_time(), proc_cpu_s(sim_pid)
    gevent.sleep(window_s)
    t1, cpu1, sim1 = time.time(), time.process_time(), proc_cpu_s(sim_pid)
    gevent.joinall(greenlets, timeout=90)
    client.close()
    row = summarize(
        kind, streams, records, url if truth else None, t0, t1, cpu1 - cpu0, sim1 - sim0, tag
    )
    row["server"] = "simulator" if truth else "replay"
    return row


def summarize(
    kind: str,
    streams: int,
    records: list[RequestRecord],
    url: str | None,
    t0: float,
    t1: float,
    cpu_s: float,
    sim_cpu_s: float,
    tag: str,
) -> dict[str, Any]:
    window = t1 - t0
    chunks = tokens = 0.0
    for r in records:
        times = chunk_times(r)
        if not times or not r.output_tokens:
            continue
        per_chunk = r.output_tokens / len(times)
        inside = sum(t0 <= t < t1 for t in times)
        chunks += inside
        tokens += inside * per_chunk
    truth = {
        d["request_id"]: d
        for d in (get_json(url + "/debug/requests") if url else [])
        if str(d["request_id"]).startswith(tag + "-")
    }
    ttft_err, tpot_err, up, down = [], [], [], []
    for r in records:
        gt = truth.get(r.request_id)
        if not r.ok or gt is None or r.sent_at < t0 or (r.done_at or t1) > t1:
            continue
        ttft_err.append((r.ttft_s - (gt["first_token_at"] - gt["arrived_at"])) * 1e3)
        up.append((gt["arrived_at"] - r.sent_at) * 1e3)
        down.append((r.first_token_at - gt["first_token_at"]) * 1e3)
        if r.tpot_s and gt["output_tokens"] > 1:
            gt_tpot = (gt["last_token_at"] - gt["first_token_at"]) / (gt["output_tokens"] - 1)
            tpot_err.append(abs(r.tpot_s - gt_tpot) / gt_tpot * 100)
    abs_ttft = [abs(x) for x in ttft_err]
    return {
        "client": kind,
        "streams": streams,
        "window_s": round(window, 3),
        "requests_measured": len(ttft_err),
        "errors": sum(not r.ok for r in records),
        "tok_s": round(tokens / window, 1),
        "chunks_s": round(chunks / window, 1),
        "client_cpu_util": round(cpu_s / window, 3),
        "us_per_chunk": round(cpu_s / chunks * 1e6, 1) if chunks else None,
        "capacity_tok_s": round(tokens / cpu_s, 0) if cpu_s else None,
        "sim_cpu_util": round(sim_cpu_s / window, 3),
        "ttft_err_ms_p50": pct(abs_ttft, 50),
        "ttft_err_ms_p99": pct(abs_ttft, 99),
        "ttft_err_ms_mean_signed": (sum(ttft_err) / len(ttft_err)) if ttft_err else None,
        "tpot_err_pct_p50": pct(tpot_err, 50),
        "tpot_err_pct_p99": pct(tpot_err, 99),
        "send_to_arrive_ms_p50": pct(up, 50),
        "send_to_arrive_ms_p99": pct(up, 99),
        "emit_to_read_ms_p50": pct(down, 50),
        "emit_to_read_ms_p99": pct(down, 99),
    }


def verdict(rows: list[dict[str, Any]]) -> list[str]:
    """The client's three goals, checked on the figures, in words."""
    sim_rows = [r for r in rows if r.get("server", "simulator") == "simulator"]
    replay = [r for r in rows if r.get("server") == "replay"]
    by = {(r["client"], r["streams"]): r for r in sim_rows}
    top = max(r["streams"] for r in sim_rows)
    fast, sdk = by.get(("fast", top)), by.get(("openai", top))
    # capacity is judged where the server could load the client: the replay rows, if any
    rep = {r["client"]: r for r in replay if r["streams"] == max(x["streams"] for x in replay)}
    cap_fast, cap_sdk = (rep.get("fast"), rep.get("openai")) if rep else (fast, sdk)
    lines = _goal_lines(fast, cap_fast, cap_sdk, top) + _replay_lines(replay)
    if fast and fast["capacity_tok_s"] and fast["tok_s"] < 0.8 * fast["capacity_tok_s"]:
        lines.append(
            f"- The simulator could not stream fast enough to load the default client: "
            f"at {top} streams it sent {fast['tok_s']:,.0f} tok/s, "
            f"{fast['tok_s'] / fast['capacity_tok_s']:.0%} of the client's capacity "
            "(its modelled step time and one Python process); hence the replay rows."
        )
    behind = [r for r in rows if (r["emit_to_read_ms_p50"] or 0) > 50]
    if behind:
        lines.append(
            "- Client saturated (its read loop ran > 50 ms behind the server at p50) at "
            + ", ".join(f"{r['client']}@{r['streams']}" for r in behind)
            + ": it could not take the chunks as fast as the server sent them, so "
            "those rows' TTFT/TPOT are wrong by that much — the load generator, not "
            "the server, would set the figures."
        )
    return lines


def _goal_lines(
    fast: dict[str, Any] | None,
    cap_fast: dict[str, Any] | None,
    cap_sdk: dict[str, Any] | None,
    top: int,
) -> list[str]:
    lines = []
    if cap_fast:
        cap = cap_fast["capacity_tok_s"] or 0
        lines.append(
            f"- capacity ≥ 50k tok/s per process: {'MET' if cap >= 50_000 else 'NOT MET'}"
            f" — {cap:,.0f} tok/s per client CPU second ({cap_fast['us_per_chunk']} "
            f"µs/chunk) at {cap_fast['streams']} streams against the "
            f"{cap_fast.get('server', 'simulator')} server; {cap_fast['tok_s']:,.0f} "
            f"tok/s measured on the wall clock with {cap_fast['client_cpu_util']:.0%} "
            "of a core"
        )
    if fast:
        p99, own = fast["ttft_err_ms_p99"], fast["emit_to_read_ms_p99"]
        if p99 is not None and own is not None:
            lines.append(
                f"- TTFT error p99 ≤ 5 ms at {top} streams: "
                f"{'MET' if p99 <= 5 else 'NOT MET'} — {p99:.2f} ms against the ground truth; "
                f"of which send→arrive (the simulator reaching the request) p99 "
                f"{fast['send_to_arrive_ms_p99']:.2f} ms, p50 "
                f"{fast['send_to_arrive_ms_p50']:.2f} ms; emit→read (simulator's write stamp → "
                f"kernel arrival at the client) p99 {own:.2f} ms, p50 "
                f"{fast['emit_to_read_ms_p50']:.2f} ms"
            )
    if cap_fast and cap_sdk and cap_sdk["capacity_tok_s"]:
        ratio = (cap_fast["capacity_tok_s"] or 0) / cap_sdk["capacity_tok_s"]
        lines.append(
            f"- ≥ 4× the SDK's capacity: {'MET' if ratio >= 4 else 'NOT MET'} — "
            f"{ratio:.1f}× ({cap_fast['us_per_chunk']} vs {cap_sdk['us_per_chunk']} "
            f"µs/chunk, {cap_fast.get('server', 'simulator')} server)"
        )
    return lines


def _replay_lines(replay: list[dict[str, Any]]) -> list[str]:
    lines = []
    for r in replay:
        lines.append(
            f"- Replay server, {r['client']} client, {r['streams']} streams: took "
            f"{r['tok_s']:,.0f} tok/s on the wall clock using {r['client_cpu_util']:.0%} "
            f"of a core ({r['us_per_chunk']} µs/chunk, {r['capacity_tok_s']:,.0f} tok/s "
            "per CPU second); the replay server itself used "
            f"{r['sim_cpu_util']:.0%}."
        )
    return lines


_NOTES = (
    (
        "- `µs/chunk` is client-process CPU per content chunk; `capacity` = tokens per "
        "client CPU second, the most one process can take on one core (one token per "
        "chunk without speculation)."
    ),
    (
        "- TTFT error is `client TTFT − (first_token_at − arrived_at)` of the simulator. It "
        "splits into *send→arrive* (`arrived_at − sent_at`: loopback plus the "
        "simulator's event loop getting to the new request — server-side latency a user "
        "also sees, which the simulator's ground truth leaves out) and *emit→read* "
        "(`client first token − simulator first emission`: with kernel receive stamps, "
        "the loopback delivery plus any delay of the simulator between stamping a chunk "
        "and writing it; with user-space stamps also how late the client's read loop got "
        "to it)."
    ),
    (
        "- Checked on a 256-stream run (08:33 UTC): every chunk time came from a kernel "
        "stamp, and the emit→read outliers come in groups with identical delays across "
        "different streams (e.g. four requests at 57.06 ms): data the simulator had "
        "stamped as written reached the client's socket together, later. That points at "
        "the simulator's side (its stamp is taken in user space around the write), not at "
        "the client's read loop, whose lag the kernel stamps exclude."
    ),
    (
        "- The default client stamps chunks with the kernel's receive time "
        "(`SO_TIMESTAMPNS`), so its own CPU lag stays out of TTFT/TPOT; the SDK mode "
        "stamps in user space, after pydantic parsing."
    ),
    (
        "- The default client also keeps gevent from switching greenlets between "
        "`sent_at` and the send (geventhttpclient's pooled-connection check ends in "
        "`sleep(0)` under monkey-patching: before the fix, 15-40 ms of fake TTFT at 256 "
        "streams). The SDK's httpx pool is left as it is."
    ),
    (
        "- A load average above the CPU count means every process here waited for a CPU: "
        "the tails then measure this machine's scheduler (the simulator's event loop "
        "most), not the client. The p99 goals need a quiet host to be judged."
    ),
    (
        "- TPOT error compares the client's (E2E − TTFT)/(n − 1) with the server's "
        "(last − first emission)/(n − 1)."
    ),
)


def write_results(rows: list[dict[str, Any]], meta: dict[str, Any], out: Path) -> str:
    out.mkdir(parents=True, exist_ok=True)
    (out / "client_fidelity.json").write_text(
        json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n"
    )
    head = (
        "| server | client | streams | tok/s | chunks/s | µs/chunk | capacity tok/s "
        "| client CPU | server CPU | TTFT err p50 / p99 (ms) | of which send→arrive "
        "| of which emit→read | TPOT err p50 / p99 (%) | n | errors |"
    )
    lines = [
        "# Client fidelity",
        "",
        (
            f"Measured {meta['date']} on {meta['machine']} ({meta['cpus']} CPUs, shared with "
            "other work), simulator profile "
            f"`{meta['profile']}`, {meta['max_tokens']} ± 25 % output tokens per request "
            "(closed loop, streams staggered), "
            f"{meta['warmup_s']} s warm-up + {meta['window_s']} s measured per row; load "
            f"average {meta['loadavg_before'][0]} before, {meta['loadavg_after'][0]} after. "
            "Produced by `benchmarks/client_fidelity.py`."
        ),
        "",
        head,
        "|" + " --- |" * 15,
    ]

    def f(v, p=2):
        return "–" if v is None else f"{v:.{p}f}"

    for r in rows:
        lines.append(
            f"| {r.get('server', 'simulator')} | {r['client']} | {r['streams']} | "
            f"{r['tok_s']:,.0f} | {r['chunks_s']:,.0f} | "
            f"{f(r['us_per_chunk'], 1)} | {f(r['capacity_tok_s'], 0)} | "
            f"{r['client_cpu_util']:.0%} | {r['sim_cpu_util']:.0%} | "
            f"{f(r['ttft_err_ms_p50'])} / {f(r['ttft_err_ms_p99'])} | "
            f"{f(r['send_to_arrive_ms_p50'])} / {f(r['send_to_arrive_ms_p99'])} | "
            f"{f(r['emit_to_read_ms_p50'])} / {f(r['emit_to_read_ms_p99'])} | "
            f"{f(r['tpot_err_pct_p50'])} / {f(r['tpot_err_pct_p99'])} | "
            f"{r['requests_measured']} | {r['errors']} |"
        )
    lines += ["", "## Goals", "", *verdict(rows), "", "## How to read it", "", *_NOTES]
    text = "\n".join(lines) + "\n"
    (out / "client_fidelity.md").write_text(text)
    return text


def run_replay(a: argparse.Namespace) -> list[dict[str, Any]]:
    """Rows against the replay server (no ground truth: capacity only)."""
    rows = []
    for streams in [int(x) for x in a.replay_streams.split(",") if x]:
        proc, url = start_replay(a.replay_interval_ms / 1e3)
        try:
            for kind in a.clients.split(","):
                row = drive(
                    kind,
                    url,
                    "replay",
                    streams,
                    a.warmup_s,
                    a.window_s,
                    a.max_tokens,
                    proc.pid,
                    tag=f"replay-{kind}{streams}",
                    truth=False,
                )
                rows.append(row)
                print(json.dumps(row), flush=True)
                gevent.sleep(1.0)
        finally:
            stop_sim(proc)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--streams", default="4,64,256")
    ap.add_argument("--clients", default="fast,openai")
    ap.add_argument("--profile", default="tiny")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--warmup-s", type=float, default=3.0)
    ap.add_argument("--window-s", type=float, default=8.0)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    ap.add_argument(
        "--replay-streams",
        default="256",
        help="also measure against the canned replay server at these stream counts",
    )
    ap.add_argument(
        "--replay-interval-ms",
        type=float,
        default=2.0,
        help="replay server: one chunk per stream every this many ms",
    )
    ap.add_argument("--serve-replay", type=int, metavar="PORT", help=argparse.SUPPRESS)
    ap.add_argument("--interval-s", type=float, default=0.004, help=argparse.SUPPRESS)
    ap.add_argument(
        "--render-only",
        action="store_true",
        help="rewrite the .md from the existing .json without measuring",
    )
    a = ap.parse_args()
    if a.serve_replay:
        serve_replay(a.serve_replay, a.interval_s)
        return 0
    if a.render_only:
        saved = json.loads((a.out / "client_fidelity.json").read_text())
        print(write_results(saved["rows"], saved["meta"], a.out))
        return 0
    load_before = os.getloadavg()
    proc, url = start_sim(a.profile)
    rows = []
    try:
        model = get_json(url + "/v1/models")["data"][0]["id"]
        for streams in [int(s) for s in a.streams.split(",")]:
            for kind in a.clients.split(","):
                row = drive(
                    kind,
                    url,
                    model,
                    streams,
                    a.warmup_s,
                    a.window_s,
                    a.max_tokens,
                    proc.pid,
                    tag=f"{kind}{streams}",
                )
                rows.append(row)
                print(json.dumps(row), flush=True)
                gevent.sleep(1.0)  # let the simulator drain
    finally:
        stop_sim(proc)
    rows += run_replay(a)
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": platform.machine() + " " + platform.processor(),
        "cpus": os.cpu_count(),
        "profile": a.profile,
        "max_tokens": a.max_tokens,
        "warmup_s": a.warmup_s,
        "window_s": a.window_s,
        "replay_interval_ms": a.replay_interval_ms,
        "python": platform.python_version(),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(write_results(rows, meta, a.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

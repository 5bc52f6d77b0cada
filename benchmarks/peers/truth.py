"""Score one client at one rate against the simulator's ground truth.

Every client here sends requests the simulator can name: specload and ``vllm bench serve``
send ``X-Request-Id`` (``vllm bench``: ``<--request-id-prefix><index>``, its outputs are in
request order); guidellm sends none, but the simulator answers with the response id
``chatcmpl-<id it chose>`` and guidellm keeps that id per request. So every figure below is
per request, matched by id, never by order or time.

The definitions compared are vLLM's (and specload's): TTFT = first content token − send;
TPOT = (last content token − first) / (output tokens − 1). The truth for a request is the
simulator's ``first_token_at − arrived_at`` and ``(last_token_at − first_token_at) /
(output_tokens − 1)``, where its times are those at which it wrote each chunk. A client's
TTFT error is ``client TTFT − true TTFT``; it includes the loopback both ways and the
simulator's own event loop reaching the request (the same for every client), plus whatever
the client adds: late sends after ``t_sent`` was taken, a late read of the first chunk.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from client_fidelity import pct  # the same percentile rule as the client fidelity benchmark

__all__ = [
    "ClientRun",
    "Sample",
    "rate_tolerance",
    "score",
    "sustained",
    "true_tpot_s",
    "true_ttft_s",
]


@dataclass(frozen=True, slots=True)
class Sample:
    """One request as a client reported it (seconds; ``tpot_s`` by vLLM's definition).

    ``cancelled``: the client itself stopped it at the end of its time window (guidellm's
    ``max_duration`` does): not a failure, not a measurement.
    """

    request_id: str
    ok: bool
    ttft_s: float | None
    tpot_s: float | None
    output_tokens: int | None
    cancelled: bool = False
    sent_at: float | None = None  # unix s, where the client keeps a wall-clock send time


@dataclass(slots=True)
class ClientRun:
    """One client at one target rate: its per-request samples and its own summary figures.

    ``reported`` holds the percentiles the client printed itself, in ms: ``ttft_p50``,
    ``ttft_p95``, ``tpot_p50``, ``tpot_p95`` (TPOT by vLLM's definition, whatever the client
    calls it) and any client-specific extras (``itl_p50`` per chunk, guidellm's own ``tpot``
    that includes the first token). ``cpu_s_between(t0, t1)`` gives the client's CPU seconds.
    """

    client: str
    rate: float
    samples: list[Sample]
    reported: dict[str, float | None]
    cpu: Any  # TreeCPU
    notes: list[str] = field(default_factory=list)


def true_ttft_s(gt: dict[str, Any]) -> float:
    return float(gt["first_token_at"] - gt["arrived_at"])


def true_tpot_s(gt: dict[str, Any]) -> float | None:
    n = gt["output_tokens"]
    return (gt["last_token_at"] - gt["first_token_at"]) / (n - 1) if n and n > 1 else None


def _ms(v: float | None) -> float | None:
    return None if v is None else round(v * 1e3, 3)


def _r(v: float | None, nd: int = 3) -> float | None:
    return None if v is None else round(v, nd)


Pairs = list[tuple[Sample, dict[str, Any]]]


def _rate_and_cpu(run: ClientRun, matched: Pairs) -> dict[str, Any]:
    """Achieved rate over the arrival window at the simulator, and the client's CPU in it."""
    arrivals = sorted(g["arrived_at"] for _, g in matched)
    span = arrivals[-1] - arrivals[0] if len(arrivals) > 1 else 0.0
    achieved = (len(arrivals) - 1) / span if span > 0 else None
    cpu_s = run.cpu.cpu_between(arrivals[0], arrivals[-1]) if span > 0 else None
    cores = cpu_s / span if cpu_s is not None and span > 0 else None
    return {
        "achieved_rate": _r(achieved, 2),
        "achieved_ratio": _r(achieved / run.rate if achieved else None),
        "window_s": _r(span, 2),
        "client_cpu_s": _r(cpu_s),
        "client_cores": _r(cores),
        "rate_per_core": _r(achieved / cores if achieved and cores else None, 1),
    }


def _errors(ok: Pairs) -> dict[str, Any]:
    """Per-request TTFT/TPOT errors and, where the client keeps a wall-clock send time, the
    TTFT error split into send→arrive (the request reaching the simulator's handler:
    loopback, the simulator's event loop, any client delay between its stamp and the write)
    and emit→read (the simulator's write of the first chunk to the client's stamp of it)."""
    ttft_err = [(s.ttft_s - true_ttft_s(g)) * 1e3 for s, g in ok]  # type: ignore[operator]
    tpot_err, tpot_err_ms = [], []
    for s, g in ok:
        t = true_tpot_s(g)
        if s.tpot_s is not None and t:
            tpot_err.append(abs(s.tpot_s - t) / t * 100)
            tpot_err_ms.append((s.tpot_s - t) * 1e3)
    up = [(g["arrived_at"] - s.sent_at) * 1e3 for s, g in ok if s.sent_at is not None]
    down = [
        (s.sent_at + s.ttft_s - g["first_token_at"]) * 1e3  # type: ignore[operator]
        for s, g in ok
        if s.sent_at is not None
    ]
    abs_ttft = [abs(x) for x in ttft_err]
    return {
        "ttft_err_ms_p50": _r(pct(abs_ttft, 50)),
        "ttft_err_ms_p95": _r(pct(abs_ttft, 95)),
        "ttft_err_ms_p99": _r(pct(abs_ttft, 99)),
        "ttft_err_ms_mean_signed": _r(sum(ttft_err) / len(ttft_err) if ttft_err else None),
        "tpot_err_pct_p50": _r(pct(tpot_err, 50)),
        "tpot_err_pct_p99": _r(pct(tpot_err, 99)),
        "tpot_err_ms_mean_signed": _r(
            sum(tpot_err_ms) / len(tpot_err_ms) if tpot_err_ms else None, 4
        ),
        "send_to_arrive_ms_p50": _r(pct(up, 50)),
        "send_to_arrive_ms_p99": _r(pct(up, 99)),
        "emit_to_read_ms_p50": _r(pct(down, 50)),
        "emit_to_read_ms_p99": _r(pct(down, 99)),
    }


def score(run: ClientRun, truth: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The table row of ``run``: rate, CPU, reported and true percentiles, per-request errors."""
    matched = [(s, truth[s.request_id]) for s in run.samples if s.request_id in truth]
    ok = [(s, g) for s, g in matched if s.ok and s.ttft_s is not None and g["first_token_at"]]
    true_ttft = [true_ttft_s(g) for _, g in ok]
    true_tpot = [t for _, g in ok if (t := true_tpot_s(g)) is not None]
    row: dict[str, Any] = {
        "client": run.client,
        "target_rate": run.rate,
        "requests": len(run.samples),
        "matched": len(matched),
        "ok": len(ok),
        "errors": sum(not s.ok and not s.cancelled for s in run.samples),
        "cancelled": sum(s.cancelled for s in run.samples),
        **_rate_and_cpu(run, matched),
        "reported": run.reported,
        "true_ttft_p50_ms": _ms(pct(true_ttft, 50)),
        "true_ttft_p95_ms": _ms(pct(true_ttft, 95)),
        "true_tpot_p50_ms": _ms(pct(true_tpot, 50)),
        "true_tpot_p95_ms": _ms(pct(true_tpot, 95)),
        **_errors(ok),
        "notes": run.notes,
    }
    for name in ("ttft_p50", "ttft_p95", "tpot_p50", "tpot_p95"):
        got, want = run.reported.get(name), row[f"true_{name}_ms"]
        row[f"{name}_reported_err_ms"] = _r(
            got - want if got is not None and want is not None else None
        )
    return row


def rate_tolerance(arrivals: int, rate_tol: float = 0.10) -> float:
    """Allowed |achieved/target − 1|: 10 %, or two standard errors of a Poisson count of
    ``arrivals`` where that is wider (a 40-arrival window is ±32 % by chance alone)."""
    return max(rate_tol, 2 / math.sqrt(arrivals)) if arrivals > 0 else rate_tol


def sustained(row: dict[str, Any], *, ttft_p99_ms: float = 5.0) -> bool:
    """The bar: achieved within 10 % of target (or Poisson noise), TTFT error p99
    <= 5 ms, and no failed request."""
    ratio, p99 = row["achieved_ratio"], row["ttft_err_ms_p99"]
    return (
        ratio is not None
        and abs(ratio - 1) <= rate_tolerance(row["matched"])
        and p99 is not None
        and p99 <= ttft_p99_ms
        and row["errors"] == 0
    )

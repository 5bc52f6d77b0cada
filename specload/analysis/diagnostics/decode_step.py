"""Decode step time per condition and step, and the client means the server's means sit next to.

Speculative decoding trades a longer engine step (draft passes plus one verify pass) for
more tokens per step. Whether it pays off on a given host depends on how much longer that
step gets, so the report shows the step itself (the GPU validation: "spec's step is 15 % slower on
this host" must be visible, not inferred):

- **client chunk gap**: per successful request, ``(e2e − ttft) / (content_chunks − 1)``,
  the mean time between its streamed content chunks. vLLM sends one chunk per engine step
  a request takes part in, so this is the decode step time as the client sees it (wire
  jitter included). The step's figure is the median over its requests with two chunks or
  more; ``chunk_gap_mean_s`` pools them (Σ(e2e − ttft) / Σ(chunks − 1)), which weights each
  gap equally, exactly as the server's inter-token-latency histogram does.
- **tokens per chunk** (decode phase): per request ``(output_tokens − 1) / (chunks − 1)``
  (the first chunk carries the prefill's one token), median over requests: ~1 without
  speculation, the acceptance length with it.
- **server ITL mean**: ``vllm:inter_token_latency_seconds`` Δ_sum / Δ_count over the step's
  measured window (``analysis/inputs/server.py``); vLLM observes it once per engine step per
  running request, so it is the server's decode step time. None when not exposed.

The same pooled requests give the client's *means* of TTFT, TPOT and E2E, which the
client-vs-server table compares with the server histograms' means (``ServerStep.mean_s``):
a mean against a mean over (nearly) the same requests. The server's window holds the
requests that *finished* in it; the client's holds those *sent* after the warm-up, so the
two sets differ by the requests in flight at the window's edges.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specload.analysis.inputs.run_columns import RunColumns
from specload.analysis.inputs.server import ServerStep

__all__ = ["CLIENT_MEAN_FIELDS", "DecodeStep", "decode_steps"]

#: Short name → record field whose mean the client-vs-server table shows (seconds).
CLIENT_MEAN_FIELDS = {"ttft": "ttft_s", "tpot": "tpot_s", "e2e": "e2e_s"}


@dataclass(slots=True)
class DecodeStep:
    """One condition at one target QPS; seconds."""

    target_qps: float
    #: Successful measured requests with at least two content chunks (behind the chunk gap).
    n: int
    chunk_gap_s: float | None = None
    chunk_gap_mean_s: float | None = None
    tokens_per_chunk: float | None = None
    server_itl_mean_s: float | None = None
    #: Observations behind ``server_itl_mean_s`` (the histogram's Δ_count).
    server_itl_n: float | None = None
    #: Client means over the step's successful measured requests: ``ttft``, ``tpot``, ``e2e``.
    client_mean_s: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "target_qps": self.target_qps,
            "n": self.n,
            "chunk_gap_s": self.chunk_gap_s,
            "chunk_gap_mean_s": self.chunk_gap_mean_s,
            "tokens_per_chunk": self.tokens_per_chunk,
            "server_itl_mean_s": self.server_itl_mean_s,
            "server_itl_n": self.server_itl_n,
            "client_mean_s": self.client_mean_s,
        }


def _measured_ok(runs: list[RunColumns]) -> dict[str, np.ndarray]:
    """Successful, non-warm-up records of all runs, the columns this module needs."""
    names = ("target_qps", "ttft_s", "e2e_s", "tpot_s", "content_chunks", "output_tokens")
    parts = []
    for run in runs:
        cols = run.cols
        sel = cols["ok"] & ~cols["warmup"] & ~np.isnan(cols["target_qps"])
        parts.append({k: cols[k][sel].astype(float) for k in names})
    return {k: np.concatenate([p[k] for p in parts]) for k in names}


def _one(qps: float, cols: dict[str, np.ndarray], server: ServerStep | None) -> DecodeStep:
    means = {}
    for short, col in CLIENT_MEAN_FIELDS.items():
        x = cols[col][~np.isnan(cols[col])]
        if x.size:
            means[short] = float(x.mean())
    chunks, ttft, e2e, out = (
        cols["content_chunks"],
        cols["ttft_s"],
        cols["e2e_s"],
        cols["output_tokens"],
    )
    use = (chunks >= 2) & np.isfinite(ttft) & np.isfinite(e2e) & (e2e >= ttft)
    span, gaps_n = e2e[use] - ttft[use], chunks[use] - 1.0
    step = DecodeStep(target_qps=qps, n=int(use.sum()), client_mean_s=means)
    if step.n:
        step.chunk_gap_s = float(np.median(span / gaps_n))
        step.chunk_gap_mean_s = float(span.sum() / gaps_n.sum())
        tok = (out[use] - 1.0) / gaps_n
        tok = tok[np.isfinite(tok) & (tok > 0)]
        step.tokens_per_chunk = float(np.median(tok)) if tok.size else None
    if server is not None and "itl" in server.mean_s:
        step.server_itl_mean_s = server.mean_s["itl"]
        step.server_itl_n = server.mean_n.get("itl")
    return step


def decode_steps(
    runs: list[RunColumns], servers: dict[float, ServerStep | None] | None = None
) -> list[DecodeStep]:
    """Per target QPS (sorted) of one condition's pooled runs; ``servers`` maps QPS → server."""
    if not runs:
        return []
    cols = _measured_ok(runs)
    qps = np.round(cols["target_qps"], 6)
    servers = servers or {}
    out = []
    for q in np.unique(qps).tolist():
        sel = qps == q
        out.append(_one(float(q), {k: v[sel] for k, v in cols.items()}, servers.get(float(q))))
    return out

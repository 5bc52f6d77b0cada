"""Step time of one engine iteration from the batch it runs (a roofline with fixed costs).

Target forward pass: memory time (weights once plus every scheduled request's KV context, over
bandwidth) against compute time (FLOPs of every query token plus attention over context, over
peak), combined with a p-norm (``roofline_p``: large p is a hard max, small p blends the two as
real kernels do), plus a fixed per-step cost and a per-sequence cost (scheduler, sampling,
detokenization). Speculative decoding adds, per step: k draft forward passes of the draft
model (each a small roofline plus launch overhead) or a near-free n-gram lookup; the drafted
tokens' verification in the target pass (each ``verify_flops_scale`` of a token's FLOPs); a
cost per step and per sequence; and, in dynamic-schedule mode, ``dynamic_step_overhead_s`` plus
``dynamic_per_seq_overhead_s`` per sequence (vLLM 0.26 measured slower in that mode even when
it drafted nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

from specload.sim.profiles import Profile

__all__ = ["BatchShape", "step_time"]


@dataclass(slots=True)
class BatchShape:
    """What one step computes; token counts are query tokens, ``ctx_tokens`` KV read."""

    n_seqs: int = 0
    n_prefill: int = 0
    prefill_tokens: int = 0
    decode_tokens: int = 0
    verify_tokens: int = 0
    ctx_tokens: int = 0
    draft_k: int = 0
    draft_seqs: int = 0
    spec_seqs: int = 0
    spec: str = ""  # "", "model" or "ngram"
    dynamic: bool = False


def _roofline(mem_s: float, compute_s: float, p: float) -> float:
    if p >= 50:
        return max(mem_s, compute_s)
    return float((mem_s**p + compute_s**p) ** (1.0 / p))


def step_time(prof: Profile, b: BatchShape) -> float:
    """Seconds one step takes for batch ``b`` under profile ``prof``."""
    q_tokens = b.prefill_tokens + b.decode_tokens + prof.verify_flops_scale * b.verify_tokens
    mem = (prof.weight_bytes + prof.kv_bytes_per_token * b.ctx_tokens) / prof.mem_bw_Bps
    flops = prof.flops_per_token * q_tokens + prof.attn_flops_per_token_ctx * b.ctx_tokens
    t = prof.step_overhead_s + _roofline(mem, flops / prof.peak_flops, prof.roofline_p)
    t += prof.per_seq_overhead_s * b.n_seqs + prof.prefill_seq_overhead_s * b.n_prefill
    if b.spec:
        if b.spec_seqs:  # verification and rejection sampling run only when drafts exist
            t += prof.spec_step_overhead_s + prof.spec_per_seq_overhead_s * b.spec_seqs
        if b.spec == "ngram":
            t += prof.ngram_step_overhead_s
        elif b.draft_k > 0:  # a k = 0 step (dynamic schedule) runs no draft model at all
            t += _draft_time(prof, b)
    if b.dynamic:
        t += prof.dynamic_step_overhead_s + prof.dynamic_per_seq_overhead_s * b.n_seqs
    return t


def _draft_time(prof: Profile, b: BatchShape) -> float:
    """k autoregressive draft passes over the decoding sequences, plus the draft's prefill."""
    d_mem = prof.draft_weight_bytes / prof.mem_bw_Bps
    one = _roofline(
        d_mem, prof.draft_flops_per_token * b.draft_seqs / prof.peak_flops, prof.roofline_p
    )
    per_pass = prof.draft_step_overhead_s + one + prof.draft_per_seq_overhead_s * b.draft_seqs
    prefill = prof.draft_flops_per_token * b.prefill_tokens / prof.peak_flops
    return b.draft_k * per_pass + prefill

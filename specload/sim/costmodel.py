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

Which costs a host's CPU sets (``spec_scale``): every fixed cost that only speculation pays -
the draft passes' launch overheads (``draft_step_overhead_s``, ``draft_per_seq_overhead_s``,
k times a step), the proposer/rejection-sampler's per-step and per-sequence costs
(``spec_step_overhead_s``, ``spec_per_seq_overhead_s``, ``ngram_step_overhead_s``) and the
dynamic-schedule overheads - is CPU launch and bookkeeping time, so it scales with the host's
launch speed (``spec_scale``, 1 = the calibration host). The rooflines (target, verification,
draft weights and prefill) are GPU time and the baseline's fixed costs run in CUDA graphs: a
host's CPU leaves them alone, so a baseline step never depends on ``spec_scale``.
"""

from __future__ import annotations

from dataclasses import dataclass

from specload.sim.profiles import Profile

__all__ = ["BatchShape", "spec_launch_time", "step_time"]


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


def step_time(prof: Profile, b: BatchShape, spec_scale: float = 1.0) -> float:
    """Seconds one step takes for batch ``b`` under profile ``prof``.

    ``spec_scale`` multiplies the launch-bound part of speculation (``spec_launch_time``):
    1 is the calibration host, 1.5 a host whose CPU launches speculation's work 1.5x slower.
    """
    q_tokens = b.prefill_tokens + b.decode_tokens + prof.verify_flops_scale * b.verify_tokens
    mem = (prof.weight_bytes + prof.kv_bytes_per_token * b.ctx_tokens) / prof.mem_bw_Bps
    flops = prof.flops_per_token * q_tokens + prof.attn_flops_per_token_ctx * b.ctx_tokens
    t = prof.step_overhead_s + _roofline(mem, flops / prof.peak_flops, prof.roofline_p)
    t += prof.per_seq_overhead_s * b.n_seqs + prof.prefill_seq_overhead_s * b.n_prefill
    if b.spec and b.spec != "ngram" and b.draft_k > 0:
        t += _draft_gpu_time(prof, b)
    if b.spec or b.dynamic:
        t += spec_scale * spec_launch_time(prof, b)
    return t


def spec_launch_time(prof: Profile, b: BatchShape) -> float:
    """The CPU-launch-bound seconds of speculation in one step (0 for a baseline batch)."""
    t = 0.0
    if b.spec:
        if b.spec_seqs:  # verification and rejection sampling run only when drafts exist
            t += prof.spec_step_overhead_s + prof.spec_per_seq_overhead_s * b.spec_seqs
        if b.spec == "ngram":
            t += prof.ngram_step_overhead_s
        elif b.draft_k > 0:  # a k = 0 step (dynamic schedule) runs no draft model at all
            t += b.draft_k * (
                prof.draft_step_overhead_s + prof.draft_per_seq_overhead_s * b.draft_seqs
            )
    if b.dynamic:
        t += prof.dynamic_step_overhead_s + prof.dynamic_per_seq_overhead_s * b.n_seqs
    return t


def _draft_gpu_time(prof: Profile, b: BatchShape) -> float:
    """k autoregressive draft passes' GPU time over the decoding sequences, plus the draft's
    prefill (their launch overheads are in ``spec_launch_time``)."""
    d_mem = prof.draft_weight_bytes / prof.mem_bw_Bps
    one = _roofline(
        d_mem, prof.draft_flops_per_token * b.draft_seqs / prof.peak_flops, prof.roofline_p
    )
    prefill = prof.draft_flops_per_token * b.prefill_tokens / prof.peak_flops
    return b.draft_k * one + prefill

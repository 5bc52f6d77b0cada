"""Repetition figures of traffic: would n-gram drafting or prefix caching help it?

The pure part of ``specload inspect`` (``inspect.py`` reads the sources): per-request lookup
match rates summarised as a ``Distribution``; shared prefixes of token sequences (each
prompt's longest prefix shared with another, groups of prompts sharing one, and the share of
prompt tokens in 16-token blocks an earlier request already filled: vLLM's automatic prefix
caching hashes full blocks, so this is its hit rate with an unbounded cache); and the plain
recommendation with the figures and thresholds that justify it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from specload.client.lookup import LookupMatcher, SplitTokenizer, WordTokenizer, prompt_text

__all__ = [
    "BLOCK_TOKENS",
    "NGRAM_MAYBE",
    "NGRAM_TRY",
    "PREFIX_TRY",
    "Distribution",
    "PrefixGroup",
    "PrefixProfile",
    "Recommendation",
    "distribution",
    "lookup_rate",
    "prefix_profile",
    "prompt_tokens",
    "recommend",
]

#: Mean lookup match rate from which n-gram drafting is worth a measured try.
NGRAM_TRY = 0.30
#: Between this and ``NGRAM_TRY``: marginal, try only a small ``num_speculative_tokens``.
NGRAM_MAYBE = 0.15
#: Share of prompt tokens in already-seen prefix blocks from which prefix caching pays off.
PREFIX_TRY = 0.20
#: vLLM's default KV block size (tokens): prefix caching reuses whole blocks only.
BLOCK_TOKENS = 16


@dataclass(frozen=True, slots=True)
class Distribution:
    """Summary of per-request values: count, mean and percentiles (nearest rank)."""

    n: int
    mean: float
    p10: float
    p25: float
    p50: float
    p75: float
    p90: float
    max: float


def distribution(values: Iterable[float]) -> Distribution | None:
    """Summarise ``values``; ``None`` for no values."""
    xs = sorted(float(v) for v in values)
    if not xs:
        return None

    def q(p: float) -> float:
        return xs[min(len(xs) - 1, max(0, round(p * (len(xs) - 1))))]

    return Distribution(
        n=len(xs),
        mean=sum(xs) / len(xs),
        p10=q(0.10),
        p25=q(0.25),
        p50=q(0.50),
        p75=q(0.75),
        p90=q(0.90),
        max=xs[-1],
    )


@dataclass(frozen=True, slots=True)
class PrefixGroup:
    """``requests`` prompts that all start with the same ``tokens`` tokens."""

    tokens: int
    requests: int


@dataclass(frozen=True, slots=True)
class PrefixProfile:
    """Shared-prefix figures of a prompt sequence (tokens as the chosen tokenizer counts)."""

    basis: str
    prompt_tokens: int
    cacheable_share: float | None
    shared_prefix: Distribution | None
    requests_sharing: int
    groups: tuple[PrefixGroup, ...]
    exact_repeats: int


@dataclass(frozen=True, slots=True)
class Recommendation:
    """One advice line; ``action``: ``ngram``, ``ngram_maybe``, ``prefix_caching``, ``neither``."""

    action: str
    text: str


def _block_hashes(tokens: Sequence[int]) -> list[int]:
    """Chained hashes of the full blocks of ``tokens``, as vLLM keys its prefix cache."""
    out: list[int] = []
    parent = 0
    for start in range(0, len(tokens) - BLOCK_TOKENS + 1, BLOCK_TOKENS):
        parent = hash((parent, tuple(tokens[start : start + BLOCK_TOKENS])))
        out.append(parent)
    return out


def _cacheable_tokens(prompts: Sequence[Sequence[int]]) -> int:
    """Tokens in leading blocks that an earlier prompt (in order) already filled."""
    seen: set[int] = set()
    total = 0
    for toks in prompts:
        hashes = _block_hashes(toks)
        hit = 0
        while hit < len(hashes) and hashes[hit] in seen:
            hit += 1
        total += hit * BLOCK_TOKENS
        seen.update(hashes)
    return total


def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _groups(
    ordered: list[tuple[int, ...]], adjacent: list[int], top: int
) -> tuple[PrefixGroup, ...]:
    """Runs of sorted prompts whose neighbours share >= one block; the run's common length."""
    groups: list[PrefixGroup] = []
    i = 0
    while i < len(adjacent):
        if adjacent[i] < BLOCK_TOKENS:
            i += 1
            continue
        j, common = i, adjacent[i]
        while j < len(adjacent) and adjacent[j] >= BLOCK_TOKENS:
            common = min(common, adjacent[j])
            j += 1
        groups.append(PrefixGroup(tokens=common, requests=j - i + 1))
        i = j
    groups.sort(key=lambda g: (g.requests - 1) * g.tokens, reverse=True)
    return tuple(groups[:top])


def prefix_profile(prompts: Sequence[Sequence[int]], basis: str, top: int = 5) -> PrefixProfile:
    """Shared-prefix figures of token sequences, in the order they were (or will be) sent."""
    total = sum(len(p) for p in prompts)
    ordered = sorted(tuple(p) for p in prompts)
    adjacent = [_lcp(a, b) for a, b in zip(ordered, ordered[1:])]
    longest = [
        max(adjacent[i - 1] if i > 0 else 0, adjacent[i] if i < len(adjacent) else 0)
        for i in range(len(ordered))
    ]
    seen: set[tuple[int, ...]] = set()
    repeats = 0
    for p in prompts:
        key = tuple(p)
        repeats += key in seen
        seen.add(key)
    return PrefixProfile(
        basis=basis,
        prompt_tokens=total,
        cacheable_share=_cacheable_tokens(prompts) / total if total else None,
        shared_prefix=distribution(longest),
        requests_sharing=sum(1 for x in longest if x >= BLOCK_TOKENS),
        groups=_groups(ordered, adjacent, top),
        exact_repeats=repeats,
    )


def prompt_tokens(messages: Sequence[Any], tokenizer: SplitTokenizer | None = None) -> list[int]:
    """Token ids of a chat prompt: a role marker, then the content, per message."""
    tok = tokenizer or WordTokenizer()
    out: list[int] = []
    for msg in messages:
        out.append(hash(f"<|{msg.get('role')}|>"))
        out.extend(tok.encode("".join(prompt_text([msg]))))
    return out


def lookup_rate(
    messages: Sequence[dict[str, Any]], tokenizer: SplitTokenizer | None = None
) -> tuple[float | None, bool]:
    """``(rate, from_reply)``: the last assistant reply against what precedes it, if there is
    one; else the prompt's self-repetition (each token against the text before it)."""
    texts = prompt_text(messages)
    if len(messages) > 1 and messages[-1].get("role") == "assistant":
        m = LookupMatcher(texts[:-1], tokenizer)
        m.feed(texts[-1])
        return m.finish().match_rate, True
    m = LookupMatcher((), tokenizer)
    m.feed("\n".join(texts))
    return m.finish().match_rate, False


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _ngram_advice(lookup: Distribution | None, basis: str) -> Recommendation | None:
    if lookup is None:
        return None
    figures = (
        f"mean lookup match rate {_pct(lookup.mean)} (median {_pct(lookup.p50)}, "
        f"p90 {_pct(lookup.p90)}, {lookup.n} requests; {basis})"
    )
    if lookup.mean >= NGRAM_TRY:
        return Recommendation(
            "ngram",
            f"Try n-gram/suffix drafting: {figures} >= {_pct(NGRAM_TRY)}. Start with "
            '--speculative-config \'{"method": "ngram", "num_speculative_tokens": 3, '
            '"prompt_lookup_min": 2, "prompt_lookup_max": 5}\' and compare against this baseline.',
        )
    if lookup.mean >= NGRAM_MAYBE:
        return Recommendation(
            "ngram_maybe",
            f"N-gram drafting is marginal: {figures}, between {_pct(NGRAM_MAYBE)} and "
            f"{_pct(NGRAM_TRY)}. Measure it with few drafted tokens (num_speculative_tokens 2); "
            "expect gains only at low load.",
        )
    return None


def _prefix_advice(prefix: PrefixProfile | None) -> Recommendation | None:
    if prefix is None or prefix.cacheable_share is None or prefix.cacheable_share < PREFIX_TRY:
        return None
    top = prefix.groups[0] if prefix.groups else None
    group = f"; largest group: {top.requests} requests share {top.tokens} tokens" if top else ""
    return Recommendation(
        "prefix_caching",
        f"Try prefix caching (--enable-prefix-caching; on by default in vLLM V1, check it was not "
        f"turned off): {_pct(prefix.cacheable_share)} of prompt tokens sit in {BLOCK_TOKENS}-token "
        f"blocks an earlier request already filled (>= {_pct(PREFIX_TRY)}){group}. It cuts "
        "prefill, so expect TTFT to drop, not TPOT.",
    )


def recommend(
    lookup: Distribution | None, lookup_basis: str, prefix: PrefixProfile | None
) -> list[Recommendation]:
    """The advice for a profile: drafting, prefix caching, both, or neither (with figures)."""
    out = [r for r in (_ngram_advice(lookup, lookup_basis), _prefix_advice(prefix)) if r]
    if any(r.action in ("ngram", "prefix_caching") for r in out):
        return out
    parts = []
    if lookup is not None:
        parts.append(f"mean lookup match rate {_pct(lookup.mean)} < {_pct(NGRAM_TRY)}")
    if prefix is not None and prefix.cacheable_share is not None:
        parts.append(f"reusable prefix share {_pct(prefix.cacheable_share)} < {_pct(PREFIX_TRY)}")
    why = "; ".join(parts) if parts else "no figures available"
    out.append(
        Recommendation(
            "neither",
            f"Neither n-gram drafting nor prefix caching is likely to pay off ({why}). If decode "
            "latency matters, only a model-based drafter (EAGLE, MTP, draft model) is left: it "
            "costs GPU memory, so measure it against this baseline.",
        )
    )
    return out

"""Repetition figures of traffic: would n-gram drafting or prefix caching help it?

The pure part of ``specload inspect`` (``profile.py`` reads the sources): per-request lookup
match rates summarised as a ``Distribution``; shared prefixes of token sequences (each
prompt's longest prefix shared with another, groups of prompts sharing one, and the share of
prompt tokens in 16-token blocks an earlier request already filled: vLLM's automatic prefix
caching hashes full blocks, so this is its hit rate with an unbounded cache); and the plain
recommendation (exactly one, so its parts cannot contradict each other) with the figures and
thresholds that justify it.
"""

from __future__ import annotations

import itertools
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
    """The advice: ``action`` is ``ngram``, ``ngram_maybe``, ``prefix_caching``,
    ``ngram_and_prefix_caching``, ``neither`` or ``unknown`` (no figures); ``text`` is the
    decision first, then each feature's figure against its threshold."""

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
    adjacent = [_lcp(a, b) for a, b in itertools.pairwise(ordered)]
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


_NGRAM_CONFIG = (
    '--speculative-config \'{"method": "ngram", "num_speculative_tokens": 3, '
    '"prompt_lookup_min": 2, "prompt_lookup_max": 5}\''
)


def _ngram_level(lookup: Distribution | None) -> str | None:
    """``try``, ``maybe`` or ``no`` by the thresholds; ``None`` without a lookup figure."""
    if lookup is None:
        return None
    if lookup.mean >= NGRAM_TRY:
        return "try"
    return "maybe" if lookup.mean >= NGRAM_MAYBE else "no"


def _prefix_level(prefix: PrefixProfile | None) -> str | None:
    """``try`` or ``no`` by the threshold; ``None`` without a reusable-share figure."""
    if prefix is None or prefix.cacheable_share is None:
        return None
    return "try" if prefix.cacheable_share >= PREFIX_TRY else "no"


def _ngram_clause(lookup: Distribution | None, basis: str, level: str | None) -> str:
    """What the lookup figure says about n-gram drafting, with the figure and threshold."""
    if lookup is None:
        return "N-gram drafting: not judged (no lookup match rates)."
    figures = (
        f"mean lookup match rate {_pct(lookup.mean)} (median {_pct(lookup.p50)}, "
        f"p90 {_pct(lookup.p90)}, {lookup.n} requests; {basis})"
    )
    if level == "try":
        return (
            f"N-gram/suffix drafting: {figures} >= {_pct(NGRAM_TRY)}. Start with "
            f"{_NGRAM_CONFIG} and compare against this baseline."
        )
    if level == "maybe":
        return (
            f"N-gram drafting is marginal: {figures}, between {_pct(NGRAM_MAYBE)} and "
            f"{_pct(NGRAM_TRY)}. Measure it with few drafted tokens (num_speculative_tokens 2); "
            "expect gains only at low load."
        )
    return f"N-gram drafting: unlikely to pay off, {figures} < {_pct(NGRAM_MAYBE)}."


def _prefix_clause(prefix: PrefixProfile | None, level: str | None) -> str:
    """What the reusable-prefix figure says about prefix caching, with figure and threshold."""
    if prefix is None or prefix.cacheable_share is None:
        return "Prefix caching: not judged (no prefix figures)."
    share = f"{_pct(prefix.cacheable_share)} of prompt tokens sit in {BLOCK_TOKENS}-token blocks"
    if level != "try":
        return (
            f"Prefix caching: unlikely to pay off, {share} an earlier request already filled "
            f"(< {_pct(PREFIX_TRY)})."
        )
    top = prefix.groups[0] if prefix.groups else None
    group = f"; largest group: {top.requests} requests share {top.tokens} tokens" if top else ""
    return (
        f"Prefix caching (--enable-prefix-caching; on by default in vLLM V1, check it was not "
        f"turned off): {share} an earlier request already filled (>= {_pct(PREFIX_TRY)}){group}. "
        "It cuts prefill, so expect TTFT to drop, not TPOT."
    )


def _headline(ngram: str | None, prefix: str | None) -> tuple[str, str]:
    """``(action, first sentence)``: one decision from both levels, never two that clash."""
    if ngram == "try" and prefix == "try":
        return "ngram_and_prefix_caching", "Try n-gram drafting and prefix caching, one at a time."
    if ngram == "try":
        return "ngram", "Try n-gram/suffix drafting."
    if prefix == "try":
        return "prefix_caching", "Try prefix caching."
    if ngram == "maybe":
        return "ngram_maybe", "Only n-gram drafting is worth measuring, with low expectations."
    if ngram is None and prefix is None:
        return "unknown", (
            "No figures to judge by: run a baseline with this specload and inspect its run dir."
        )
    judged = (
        "Neither n-gram drafting nor prefix caching is likely to pay off."
        if ngram and prefix
        else "No figure here says n-gram drafting or prefix caching would pay off."
    )
    return "neither", (
        f"{judged} If decode latency matters, only a model-based drafter (EAGLE, MTP, draft "
        "model) is left: it costs GPU memory, so measure it against this baseline."
    )


def recommend(
    lookup: Distribution | None, lookup_basis: str, prefix: PrefixProfile | None
) -> list[Recommendation]:
    """The one recommendation for a profile (a list of one, the ``--json`` shape).

    Drafting and prefix caching are judged together, so the output never says "measure
    n-gram drafting" and "neither pays off" at once: the first sentence is the decision, then
    one sentence per feature with its figure and threshold.
    """
    ngram, pre = _ngram_level(lookup), _prefix_level(prefix)
    action, head = _headline(ngram, pre)
    clauses = [_ngram_clause(lookup, lookup_basis, ngram), _prefix_clause(prefix, pre)]
    if pre == "try" and ngram != "try":
        clauses.reverse()  # the advice first, then why the other one is not
    return [Recommendation(action, " ".join([head, *clauses]))]

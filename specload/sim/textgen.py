"""Deterministic, lossless output text: token ``i`` is a pure function of (prompt, seed, i).

Speculation and prefix caching change *when* tokens appear, never *which*: the engine asks this
module for token ``i`` and nothing else feeds into it. To make n-gram drafting meaningful, the
output copies spans of the prompt in proportion to how repetitive the prompt is: output is cut
into segments of ``SEGMENT`` tokens; a segment is a verbatim copy of a prompt span with
probability ``repetition`` (fraction of the prompt's trigrams seen earlier in the prompt), else
fresh words drawn from a fixed vocabulary. Prompt lookup then finds real matches in the
prompt+output stream, so n-gram acceptance rises with prompt repetition by actual matching.
"""

from __future__ import annotations

import hashlib

__all__ = ["OutputText", "prompt_digest", "repetition"]

SEGMENT = 8
_MASK = (1 << 64) - 1
_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "an",
    "they",
    "you",
    "were",
    "her",
    "she",
    "there",
    "been",
    "one",
    "all",
    "we",
    "their",
    "has",
    "would",
    "when",
    "if",
    "so",
    "no",
    "will",
    "more",
    "can",
    "out",
    "other",
    "into",
    "some",
    "time",
    "could",
    "them",
    "only",
    "new",
    "these",
    "two",
    "may",
    "first",
    "then",
    "do",
    "any",
    "like",
    "my",
    "now",
    "over",
    "such",
    "our",
    "man",
    "me",
    "even",
    "most",
    "made",
    "after",
    "also",
    "did",
    "many",
    "before",
    "must",
    "through",
    "back",
    "years",
    "where",
    "much",
    "your",
    "way",
    "well",
    "down",
    "should",
    "because",
    "each",
    "just",
    "those",
    "people",
    "how",
    "too",
    "little",
    "state",
    "good",
    "very",
    "make",
    "world",
    "still",
    "own",
    "see",
    "men",
    "work",
    "long",
    "get",
    "here",
    "between",
    "both",
    "life",
    "being",
    "under",
    "never",
    "day",
    "same",
    "another",
    "know",
    "while",
    "last",
    "might",
    "us",
    "great",
    "old",
    "year",
    "off",
    "come",
    "since",
    "against",
    "go",
    "came",
    "right",
    "used",
    "take",
    "three",
    "small",
    "large",
    "system",
    "data",
    "model",
    "server",
    "token",
    "value",
    "cache",
    "batch",
]
_FRESH = tuple(" " + w for w in _WORDS)
_PUNCT = (".", ",")


def _mix(x: int) -> int:
    """splitmix64 finaliser: a fast, well-spread 64-bit hash of an integer."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def prompt_digest(tokens: list[str], seed: int) -> int:
    """A 64-bit key for (prompt tokens, seed), stable across processes."""
    h = hashlib.blake2b("\x1f".join(tokens).encode("utf-8"), digest_size=8)
    return _mix(int.from_bytes(h.digest(), "little") ^ (seed & _MASK))


def repetition(tokens: list[str], n: int = 3) -> float:
    """Fraction of the prompt's ``n``-grams that already occurred earlier in it (0..1)."""
    total = len(tokens) - n + 1
    if total <= 1:
        return 0.0
    seen: set[tuple[str, ...]] = set()
    repeated = 0
    for i in range(total):
        gram = tuple(tokens[i : i + n])
        if gram in seen:
            repeated += 1
        else:
            seen.add(gram)
    return repeated / total


class OutputText:
    """The output token stream for one prompt and seed; ``token(i)`` is cheap and pure."""

    __slots__ = ("_key", "_source", "_span", "_threshold")

    def __init__(self, prompt: list[str], seed: int, rep: float | None = None) -> None:
        self._key = prompt_digest(prompt, seed)
        # Copy only from the content, not chat markers, so copied text reads like the prompt.
        self._source = [t for t in prompt if not (t.startswith("<|") and t.endswith("|>"))]
        r = repetition(self._source) if rep is None else rep
        self._span = len(self._source) - SEGMENT
        self._threshold = int(min(max(r, 0.0), 1.0) * _MASK) if self._span > 0 else 0

    def token(self, i: int) -> str:
        """Output token at position ``i`` (0-based)."""
        seg, off = divmod(i, SEGMENT)
        h = _mix(self._key ^ (seg * 0xD1B54A32D192ED03))
        if h < self._threshold:
            start = _mix(h) % (self._span + 1)
            return self._source[start + off]
        t = _mix(self._key ^ ((i + 1) * 0x8CB92BA72F3D8DD7))
        if t % 11 == 0:
            return _PUNCT[(t >> 8) & 1]
        return _FRESH[(t >> 16) % len(_FRESH)]

    def natural_length(self, lo: int = 16, hi: int = 512) -> int:
        """Where this output would stop on its own (EOS), in tokens; pure like ``token``."""
        return lo + _mix(self._key ^ 0xE05) % (hi - lo + 1)
